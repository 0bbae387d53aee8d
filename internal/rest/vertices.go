package rest

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// unassigned is Flink's host and endpoint of a subtask not placed yet.
const unassigned = "(unassigned)"

// vertex finds the vertex of job j named by the path, or answers 404
// naming the job's vertices.
func (s *Server) vertex(w http.ResponseWriter, r *http.Request, j Job) (VertexInfo, bool) {
	id := r.PathValue("vertexid")
	vs := j.Vertices()
	ids := make([]string, len(vs))
	for i, v := range vs {
		if v.ID == id {
			return v, true
		}
		ids[i] = v.ID
	}
	msg := fmt.Sprintf("vertex %q not found in job %q: its vertices are %s (see GET /jobs/%s)", id, j.ID(), strings.Join(ids, ", "), j.ID())
	if len(ids) == 0 {
		msg = fmt.Sprintf("vertex %q not found in job %q: the job has no vertices", id, j.ID())
	} else if _, err := strconv.Atoi(id); err != nil {
		msg = fmt.Sprintf("vertex %q not found in job %q: a vertex id is a number, one of %s (see GET /jobs/%s)", id, j.ID(), strings.Join(ids, ", "), j.ID())
	}
	writeError(w, http.StatusNotFound, msg)
	return VertexInfo{}, false
}

// subtasks are v's subtasks: those the job reports, or, when it reports
// none, Parallelism subtasks of the vertex's status on no TaskManager.
func subtasks(v VertexInfo) []SubtaskInfo {
	if v.Subtasks != nil {
		return v.Subtasks
	}
	out := make([]SubtaskInfo, v.Parallelism)
	for i := range out {
		out[i] = SubtaskInfo{Status: v.Status, StartTime: v.StartTime, EndTime: v.EndTime}
	}
	return out
}

// hostOf is the host of a subtask's endpoint; Flink's "(unassigned)" for
// none.
func hostOf(endpoint string) string {
	if endpoint == "" {
		return unassigned
	}
	if h, _, err := net.SplitHostPort(endpoint); err == nil {
		return h
	}
	return endpoint
}

func orUnassigned(s string) string {
	if s == "" {
		return unassigned
	}
	return s
}

// getVertex is GET /jobs/{jobid}/vertices/{vertexid}: the vertex's
// subtasks with where each runs.
func (s *Server) getVertex(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	v, ok := s.vertex(w, r, j)
	if !ok {
		return
	}
	now := s.opts.Now()
	out := JobVertexDetailsInfo{ID: v.ID, Name: v.Name, Parallelism: v.Parallelism, MaxParallelism: v.MaxParallelism,
		Now: now.UnixMilli(), Subtasks: []SubtaskExecutionAttemptDetailsInfo{}}
	for i, st := range subtasks(v) {
		out.Subtasks = append(out.Subtasks, SubtaskExecutionAttemptDetailsInfo{
			Subtask: i, Status: st.Status, Attempt: st.Attempt,
			Endpoint: orUnassigned(st.Endpoint), Host: hostOf(st.Endpoint),
			StartTime: ms(st.StartTime), EndTime: ms(st.EndTime), Duration: duration(st.StartTime, st.EndTime, now),
			Metrics: ioMetricsInfo(st.Metrics), TaskManagerID: orUnassigned(st.TaskManager),
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// getVertexTaskManagers is GET /jobs/{jobid}/vertices/{vertexid}/taskmanagers:
// the vertex's subtasks grouped by TaskManager.
func (s *Server) getVertexTaskManagers(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	v, ok := s.vertex(w, r, j)
	if !ok {
		return
	}
	now := s.opts.Now()
	out := JobVertexTaskManagersInfo{ID: v.ID, Name: v.Name, Now: now.UnixMilli(), TaskManagers: []JobVertexTaskManagers{}}
	type group struct {
		tm, endpoint string
		start, end   time.Time
		ended        bool
		subtasks     []int
		statuses     []TaskStatus
		metrics      IOMetrics
	}
	var groups []*group
	index := map[string]*group{}
	for i, st := range subtasks(v) {
		g := index[st.TaskManager]
		if g == nil {
			g = &group{tm: st.TaskManager, endpoint: st.Endpoint, ended: true}
			index[st.TaskManager] = g
			groups = append(groups, g)
		}
		g.subtasks = append(g.subtasks, i)
		g.statuses = append(g.statuses, st.Status)
		if !st.StartTime.IsZero() && (g.start.IsZero() || st.StartTime.Before(g.start)) {
			g.start = st.StartTime
		}
		if st.EndTime.IsZero() {
			g.ended = false
		} else if st.EndTime.After(g.end) {
			g.end = st.EndTime
		}
		m := st.Metrics
		g.metrics.ReadBytes += m.ReadBytes
		g.metrics.WriteBytes += m.WriteBytes
		g.metrics.ReadRecords += m.ReadRecords
		g.metrics.WriteRecords += m.WriteRecords
		g.metrics.BackPressuredTime += m.BackPressuredTime
		g.metrics.IdleTime += m.IdleTime
		g.metrics.BusyTime += m.BusyTime
		g.metrics.BytesUnknown = g.metrics.BytesUnknown || m.BytesUnknown
	}
	for _, g := range groups {
		end := g.end
		if !g.ended {
			end = time.Time{}
		}
		counts := zeroTaskCounts()
		for _, st := range g.statuses {
			counts[st]++
		}
		out.TaskManagers = append(out.TaskManagers, JobVertexTaskManagers{
			Endpoint: orUnassigned(g.endpoint), Host: hostOf(g.endpoint), Status: aggregateStatus(g.statuses),
			StartTime: ms(g.start), EndTime: ms(end), Duration: duration(g.start, end, now),
			Metrics: ioMetricsInfo(g.metrics), StatusCounts: counts, TaskManagerID: orUnassigned(g.tm), Subtasks: g.subtasks,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// getVertexWatermarks is GET /jobs/{jobid}/vertices/{vertexid}/watermarks:
// the watermarks of the vertex's subtasks, as Flink answers it, a list of
// metrics "<subtask>.currentInputWatermark" (and, weir's addition,
// "<subtask>.currentOutputWatermark") whose values are epoch milliseconds
// as strings, NoWatermark's before the first watermark. A subtask whose
// watermarks the job does not report is left out.
func (s *Server) getVertexWatermarks(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	v, ok := s.vertex(w, r, j)
	if !ok {
		return
	}
	out := []Metric{}
	for i, st := range subtasks(v) {
		if !st.Watermarks {
			continue
		}
		out = append(out,
			Metric{ID: strconv.Itoa(i) + ".currentInputWatermark", Value: strconv.FormatInt(st.InputWatermark, 10)},
			Metric{ID: strconv.Itoa(i) + ".currentOutputWatermark", Value: strconv.FormatInt(st.OutputWatermark, 10)})
	}
	writeJSON(w, http.StatusOK, out)
}

// aggregateOrder ranks statuses for aggregateStatus: the first one present
// wins (a failure over a cancellation, any running over one not started,
// finished only when all are).
var aggregateOrder = []TaskStatus{TaskFailed, TaskCanceling, TaskCanceled, TaskReconciling, TaskRunning,
	TaskInitializing, TaskDeploying, TaskScheduled, TaskCreated, TaskFinished}

// aggregateStatus is the status of a group of subtasks, as Flink
// aggregates a vertex's.
func aggregateStatus(sts []TaskStatus) TaskStatus {
	for _, want := range aggregateOrder {
		for _, st := range sts {
			if st == want {
				return want
			}
		}
	}
	return TaskCreated
}
