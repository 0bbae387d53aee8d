package rest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// job finds the job named by the path, or answers 404.
func (s *Server) job(w http.ResponseWriter, r *http.Request) (Job, bool) {
	id := r.PathValue("jobid")
	j, ok := s.jm.Job(id)
	if !ok || j == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("job %q not found", id))
		return nil, false
	}
	return j, true
}

func (s *Server) getOverview(w http.ResponseWriter, _ *http.Request) {
	o := ClusterOverview{Version: s.opts.Version, Commit: s.opts.Revision}
	for _, tm := range s.jm.TaskManagers() {
		o.TaskManagers++
		o.SlotsTotal += tm.Slots
		o.SlotsAvailable += tm.FreeSlots
	}
	for _, j := range s.jm.Jobs() {
		switch j.Status() {
		case JobFinished:
			o.JobsFinished++
		case JobCanceled:
			o.JobsCancelled++
		case JobFailed:
			o.JobsFailed++
		default:
			o.JobsRunning++
		}
	}
	if h, ok := s.jm.(HighAvailability); ok {
		info := h.HighAvailability()
		o.HighAvailability = &info
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *Server) getConfig(w http.ResponseWriter, _ *http.Request) {
	name, offset := s.opts.Now().Zone()
	writeJSON(w, http.StatusOK, DashboardConfiguration{
		RefreshInterval: s.opts.RefreshInterval.Milliseconds(),
		TimezoneName:    name,
		TimezoneOffset:  int64(offset) * 1000,
		Version:         s.opts.Version,
		Revision:        s.opts.Revision,
		Features:        Features{WebCancel: true},
	})
}

func (s *Server) getTaskManagers(w http.ResponseWriter, _ *http.Request) {
	out := TaskManagersInfo{TaskManagers: []TaskManagerEntry{}}
	for _, tm := range s.jm.TaskManagers() {
		out.TaskManagers = append(out.TaskManagers, taskManagerEntry(tm))
	}
	writeJSON(w, http.StatusOK, out)
}

// getTaskManager is GET /taskmanagers/{id}: one TaskManager, or 404.
func (s *Server) getTaskManager(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("tmid")
	for _, tm := range s.jm.TaskManagers() {
		if tm.ID == id {
			writeJSON(w, http.StatusOK, taskManagerEntry(tm))
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("taskmanager %q not found", id))
}

func taskManagerEntry(tm TaskManagerInfo) TaskManagerEntry {
	return TaskManagerEntry{
		ID: tm.ID, Path: tm.Address, DataPort: tm.DataPort, JMXPort: -1,
		LastBeat: ms(tm.LastHeartbeat), SlotsNumber: tm.Slots, FreeSlots: tm.FreeSlots,
		Hardware: HardwareDescription{CPUCores: tm.CPUCores, PhysicalMemory: tm.PhysicalMemory, FreeMemory: tm.FreeMemory},
	}
}

func (s *Server) getJobs(w http.ResponseWriter, _ *http.Request) {
	out := JobIDsWithStatus{Jobs: []JobIDWithStatus{}}
	for _, j := range s.jm.Jobs() {
		out.Jobs = append(out.Jobs, JobIDWithStatus{ID: j.ID(), Status: j.Status()})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getJobsOverview(w http.ResponseWriter, _ *http.Request) {
	now := s.opts.Now()
	out := MultipleJobsDetails{Jobs: []JobOverview{}}
	for _, j := range s.jm.Jobs() {
		start, end := j.StartTime(), j.EndTime()
		o := JobOverview{
			JID: j.ID(), Name: j.Name(), State: j.Status(),
			StartTime: ms(start), EndTime: ms(end), Duration: duration(start, end, now),
			LastModification: max(ms(start), ms(end)),
		}
		for _, v := range j.Vertices() {
			o.Tasks.add(v.Status, v.Parallelism)
		}
		out.Jobs = append(out.Jobs, o)
	}
	writeJSON(w, http.StatusOK, out)
}

// duration is Flink's job or vertex duration: until end, or until now
// while running; 0 before the start.
func duration(start, end, now time.Time) int64 {
	switch {
	case start.IsZero():
		return 0
	case end.IsZero():
		return max(0, now.Sub(start).Milliseconds())
	default:
		return max(0, end.Sub(start).Milliseconds())
	}
}

func (c *TaskCounts) add(st TaskStatus, n int) {
	c.Total += n
	switch st {
	case TaskCreated:
		c.Created += n
	case TaskScheduled:
		c.Scheduled += n
	case TaskDeploying:
		c.Deploying += n
	case TaskRunning:
		c.Running += n
	case TaskFinished:
		c.Finished += n
	case TaskCanceling:
		c.Canceling += n
	case TaskCanceled:
		c.Canceled += n
	case TaskFailed:
		c.Failed += n
	case TaskReconciling:
		c.Reconciling += n
	case TaskInitializing:
		c.Initializing += n
	}
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	now := s.opts.Now()
	start, end, st := j.StartTime(), j.EndTime(), j.Status()
	d := JobDetailsInfo{
		JID: j.ID(), Name: j.Name(), IsStoppable: st == JobRunning, State: st,
		StartTime: ms(start), EndTime: ms(end), Duration: duration(start, end, now),
		MaxParallelism: -1, Now: now.UnixMilli(),
		Timestamps:   map[JobStatus]int64{},
		Vertices:     []JobVertexDetails{},
		StatusCounts: zeroTaskCounts(),
		Plan:         JobPlan{JID: j.ID(), Name: j.Name(), Type: "STREAMING", Nodes: []JobPlanNode{}},
	}
	if !start.IsZero() {
		d.Timestamps[JobCreated], d.Timestamps[JobRunning] = ms(start), ms(start)
	}
	if !end.IsZero() && st.Terminal() {
		d.Timestamps[st] = ms(end)
	}
	for _, v := range j.Vertices() {
		tasks := zeroTaskCounts()
		tasks[v.Status] = v.Parallelism
		d.StatusCounts[v.Status]++
		d.MaxParallelism = max(d.MaxParallelism, v.MaxParallelism)
		d.Vertices = append(d.Vertices, JobVertexDetails{
			ID: v.ID, Name: v.Name, MaxParallelism: cmp.Or(v.MaxParallelism, -1), Parallelism: v.Parallelism,
			Status: v.Status, StartTime: ms(v.StartTime), EndTime: ms(v.EndTime),
			Duration: duration(v.StartTime, v.EndTime, now), Tasks: tasks,
			Metrics:      ioMetricsInfo(v.Metrics),
			BackPressure: JobVertexBackPressure{Level: backPressureLevel(v.BackPressuredRatio), Ratio: clampRatio(v.BackPressuredRatio)},
			Operators:    operatorsJSON(v.Operators),
		})
		node := JobPlanNode{ID: v.ID, Parallelism: v.Parallelism, Description: v.Name}
		for i, in := range v.Inputs {
			node.Inputs = append(node.Inputs, JobPlanInput{Num: i, ID: in.Source, ShipStrategy: in.ShipStrategy, Exchange: "pipelined_bounded"})
		}
		d.Plan.Nodes = append(d.Plan.Nodes, node)
	}
	sum, _ := j.Checkpoints()
	d.Checkpoints = CheckpointCountsBrief{
		Completed: int64(sum.Completed), Failed: int64(sum.Failed), InProgress: sum.InProgress,
		LatestCompleted: sum.LatestCompleted,
	}
	d.NumRestarts = int64(sum.Restarts)
	writeJSON(w, http.StatusOK, d)
}

// ioMetricsInfo is the JSON of a vertex's or a subtask's figures.
func ioMetricsInfo(m IOMetrics) IOMetricsInfo {
	return IOMetricsInfo{
		ReadBytes: m.ReadBytes, ReadBytesComplete: !m.BytesUnknown, WriteBytes: m.WriteBytes, WriteBytesComplete: !m.BytesUnknown,
		ReadRecords: m.ReadRecords, ReadRecordsComplete: true, WriteRecords: m.WriteRecords, WriteRecordsComplete: true,
		AccumulatedBackpressuredTime: m.BackPressuredTime.Milliseconds(),
		AccumulatedIdleTime:          m.IdleTime.Milliseconds(),
		AccumulatedBusyTime:          m.BusyTime.Milliseconds(),
	}
}

func zeroTaskCounts() map[TaskStatus]int {
	m := make(map[TaskStatus]int, len(taskStatuses))
	for _, st := range taskStatuses {
		m[st] = 0
	}
	return m
}

// backPressureLevel applies Flink's thresholds.
func backPressureLevel(ratio float64) string {
	switch {
	case ratio > 0.5:
		return "high"
	case ratio > 0.1:
		return "low"
	default:
		return "ok"
	}
}

// clampRatio keeps a ratio JSON-encodable and within [0, 1].
func clampRatio(r float64) float64 {
	if r != r || r < 0 { // NaN
		return 0
	}
	return min(r, 1)
}

func (s *Server) patchJob(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	switch mode := r.URL.Query().Get("mode"); strings.ToLower(mode) {
	case "", "cancel":
	case "stop":
		writeError(w, http.StatusBadRequest, `mode "stop" is not supported: stop with a savepoint by POST /jobs/{jobid}/stop`)
		return
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`mode %q is not supported: use mode=cancel`, mode))
		return
	}
	if st := j.Status(); st.Terminal() {
		writeError(w, http.StatusConflict, fmt.Sprintf("job %q has already ended (%s)", j.ID(), st))
		return
	}
	j.Cancel()
	s.opts.Logger.Info("job cancellation requested", "job", j.ID())
	writeJSON(w, http.StatusAccepted, struct{}{})
}

const defaultMaxExceptions = 20

func (s *Server) getExceptions(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	limit := defaultMaxExceptions
	if v := r.URL.Query().Get("maxExceptions"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("maxExceptions %q is not a number from 1 to 10000", v))
			return
		}
		limit = n
	}
	excs := slices.Clone(j.Exceptions())
	slices.SortStableFunc(excs, func(a, b ExceptionInfo) int { return b.Time.Compare(a.Time) })
	out := JobExceptionsInfo{
		AllExceptions: []ExecutionExceptionInfo{},
		History:       JobExceptionHistory{Entries: []RootExceptionInfo{}},
	}
	if len(excs) > limit {
		excs, out.Truncated, out.History.Truncated = excs[:limit], true, true
	}
	if len(excs) > 0 {
		msg, ts := excs[0].Message, ms(excs[0].Time)
		out.RootException, out.Timestamp = &msg, &ts
	}
	for _, e := range excs {
		out.AllExceptions = append(out.AllExceptions, ExecutionExceptionInfo{
			Exception: e.Message, Task: e.Task, Location: e.Location, Timestamp: ms(e.Time),
		})
		out.History.Entries = append(out.History.Entries, RootExceptionInfo{
			ExceptionName: e.Name, Stacktrace: e.Message, Timestamp: ms(e.Time),
			TaskName: optional(e.Task), Location: optional(e.Location),
			ConcurrentExceptions: []RootExceptionInfo{},
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// optional is nil for "" (JSON null, as Flink for global failures).
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func operatorsJSON(ops []OperatorRecords) []JobVertexOperator {
	if ops == nil {
		return nil
	}
	out := make([]JobVertexOperator, len(ops))
	for i, o := range ops {
		out[i] = JobVertexOperator{Name: o.Name, ReadRecords: o.ReadRecords, WriteRecords: o.WriteRecords}
	}
	return out
}
