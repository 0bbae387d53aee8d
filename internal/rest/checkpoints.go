package rest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/storage"
)

func (s *Server) getCheckpoints(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	sum, hist := j.Checkpoints()
	discarded := discardedSet(hist, j.CheckpointConfig().Retained)
	out := CheckpointingStatistics{
		Counts: CheckpointCounts{
			Restored:   restoreCount(sum),
			Total:      int64(sum.Completed + sum.Failed + sum.InProgress),
			InProgress: sum.InProgress,
			Completed:  int64(sum.Completed),
			Failed:     int64(sum.Failed),
		},
		History: []CheckpointStatistics{},
	}
	var completed []jobmaster.CheckpointStats
	for i := len(hist) - 1; i >= 0; i-- { // newest first
		c := hist[i]
		st := checkpointStatistics(c, discarded[c.ID])
		if len(out.History) < s.opts.CheckpointHistory {
			out.History = append(out.History, st)
		}
		switch {
		case c.Status == jobmaster.Completed && c.Savepoint && out.Latest.Savepoint == nil:
			out.Latest.Savepoint = &st
		case c.Status == jobmaster.Completed && !c.Savepoint && out.Latest.Completed == nil:
			out.Latest.Completed = &st
		case c.Status == jobmaster.Failed && out.Latest.Failed == nil:
			out.Latest.Failed = &st
		}
		if c.Status == jobmaster.Completed {
			completed = append(completed, c)
		}
	}
	out.Latest.Restored = restoredStatistics(sum, hist)
	out.Summary = CheckpointSummaryStats{
		CheckpointedSize: summarize(completed, func(c jobmaster.CheckpointStats) int64 { return c.CheckpointedSize }),
		StateSize:        summarize(completed, func(c jobmaster.CheckpointStats) int64 { return c.StateSize }),
		EndToEndDuration: summarize(completed, func(c jobmaster.CheckpointStats) int64 { return c.Duration.Milliseconds() }),
		PersistedData:    summarize(completed, func(c jobmaster.CheckpointStats) int64 { return c.PersistedData }),
	}
	writeJSON(w, http.StatusOK, out)
}

// restoreCount is the number of restores. jobmaster.Summary does not count
// them; a restart restores the latest checkpoint, so Restarts counts them
// (within restarts that found no checkpoint) and a first start from a
// checkpoint or savepoint counts one.
func restoreCount(sum jobmaster.Summary) int64 {
	if sum.RestoreTime.IsZero() && sum.RestorePath == "" && sum.Restored == 0 {
		return 0
	}
	return int64(max(1, sum.Restarts))
}

// discardedSet marks the completed checkpoints subsumed by newer ones:
// all but the newest retained (savepoints are never discarded).
func discardedSet(hist []jobmaster.CheckpointStats, retained int) map[int64]bool {
	out := map[int64]bool{}
	if retained <= 0 {
		return out
	}
	kept := 0
	for i := len(hist) - 1; i >= 0; i-- {
		if c := hist[i]; c.Status == jobmaster.Completed && !c.Savepoint {
			kept++
			out[c.ID] = kept > retained
		}
	}
	return out
}

func restoredStatistics(sum jobmaster.Summary, hist []jobmaster.CheckpointStats) *RestoredCheckpointStatistics {
	if sum.RestoreTime.IsZero() && sum.RestorePath == "" && sum.Restored == 0 {
		return nil
	}
	sp := strings.HasPrefix(path.Base(strings.TrimSuffix(sum.RestorePath, "/")), "savepoint-")
	for _, c := range hist {
		if c.ID == sum.Restored && c.Path == sum.RestorePath {
			sp = c.Savepoint
		}
	}
	return &RestoredCheckpointStatistics{
		ID: sum.Restored, RestoreTimestamp: ms(sum.RestoreTime), IsSavepoint: sp, ExternalPath: sum.RestorePath,
	}
}

// checkpointStatistics converts c; Tasks stays empty (filled for details).
func checkpointStatistics(c jobmaster.CheckpointStats, discarded bool) CheckpointStatistics {
	st := CheckpointStatistics{
		ID: c.ID, IsSavepoint: c.Savepoint, CheckpointType: "CHECKPOINT",
		TriggerTimestamp: ms(c.TriggerTime), LatestAckTimestamp: -1,
		CheckpointedSize: c.CheckpointedSize, StateSize: c.StateSize, PersistedData: c.PersistedData,
		IsUnaligned: c.Unaligned,
		NumSubtasks: c.NumTasks, NumAcknowledgedSubtasks: len(c.Subtasks),
		Tasks: map[string]TaskCheckpointStatistics{},
	}
	switch {
	case c.Savepoint:
		st.CheckpointType = "SAVEPOINT"
	case c.Unaligned:
		st.CheckpointType = "UNALIGNED_CHECKPOINT"
	}
	var lastAck time.Time
	for _, sub := range c.Subtasks {
		if sub.AckTime.After(lastAck) {
			lastAck = sub.AckTime
		}
	}
	if !lastAck.IsZero() {
		st.LatestAckTimestamp = lastAck.UnixMilli()
	}
	switch c.Status {
	case jobmaster.Completed:
		st.ClassName, st.Status = classCompleted, string(jobmaster.Completed)
		st.EndToEndDuration = c.Duration.Milliseconds()
		p := c.Path
		st.ExternalPath, st.Discarded = &p, &discarded
	case jobmaster.Failed:
		st.ClassName, st.Status = classFailed, string(jobmaster.Failed)
		st.EndToEndDuration = c.Duration.Milliseconds()
		ts, msg := ms(c.EndTime), c.FailureReason
		st.FailureTimestamp, st.FailureMessage = &ts, &msg
	default:
		st.ClassName, st.Status = classInProgress, string(jobmaster.InProgress)
		st.EndToEndDuration = -1
		if !lastAck.IsZero() {
			st.EndToEndDuration = max(0, lastAck.Sub(c.TriggerTime).Milliseconds())
		}
	}
	return st
}

// splitTask splits a task id "<vertex>-<subtask>" (runtime.TaskConfig.ID).
func splitTask(task string) (vertex string, subtask int) {
	if i := strings.LastIndexByte(task, '-'); i > 0 {
		if n, err := strconv.Atoi(task[i+1:]); err == nil && n >= 0 {
			return task[:i], n
		}
	}
	return task, 0
}

// vertexCheckpoint is one vertex's part of a checkpoint.
type vertexCheckpoint struct {
	parallelism int
	acks        map[int]jobmaster.SubtaskStats
}

// byVertex groups the subtask statistics of c by vertex: the job's
// vertices, and any vertex only the acknowledgements name.
func byVertex(c jobmaster.CheckpointStats, vertices []VertexInfo) (map[string]*vertexCheckpoint, []string) {
	m := map[string]*vertexCheckpoint{}
	var order []string
	get := func(id string) *vertexCheckpoint {
		v := m[id]
		if v == nil {
			v = &vertexCheckpoint{acks: map[int]jobmaster.SubtaskStats{}}
			m[id] = v
			order = append(order, id)
		}
		return v
	}
	for _, v := range vertices {
		get(v.ID).parallelism = v.Parallelism
	}
	for _, sub := range c.Subtasks {
		id, idx := splitTask(sub.Task)
		v := get(id)
		v.acks[idx] = sub
		v.parallelism = max(v.parallelism, idx+1)
	}
	return m, order
}

func taskCheckpointStatistics(c jobmaster.CheckpointStats, v *vertexCheckpoint) TaskCheckpointStatistics {
	t := TaskCheckpointStatistics{
		ID: c.ID, Status: string(c.Status), LatestAckTimestamp: -1, EndToEndDuration: -1,
		NumSubtasks: v.parallelism, NumAcknowledgedSubtasks: len(v.acks),
	}
	var last time.Time
	for _, a := range v.acks {
		t.StateSize += a.StateSize
		t.CheckpointedSize += a.CheckpointedSize
		t.PersistedData += a.PersistedData
		if a.AckTime.After(last) {
			last = a.AckTime
		}
	}
	if !last.IsZero() {
		t.LatestAckTimestamp = last.UnixMilli()
		t.EndToEndDuration = max(0, last.Sub(c.TriggerTime).Milliseconds())
	}
	return t
}

// checkpoint finds the checkpoint named by the path, or answers 400/404.
func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request, j Job) (jobmaster.CheckpointStats, bool) {
	raw := r.PathValue("checkpointid")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("checkpoint id %q is not a non-negative integer", raw))
		return jobmaster.CheckpointStats{}, false
	}
	c, ok := j.Checkpoint(id)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("checkpoint %d of job %q not found: it never existed or left the history", id, j.ID()))
		return jobmaster.CheckpointStats{}, false
	}
	return c, true
}

func (s *Server) getCheckpointDetails(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	c, ok := s.checkpoint(w, r, j)
	if !ok {
		return
	}
	_, hist := j.Checkpoints()
	st := checkpointStatistics(c, discardedSet(hist, j.CheckpointConfig().Retained)[c.ID])
	vs, order := byVertex(c, j.Vertices())
	for _, id := range order {
		st.Tasks[id] = taskCheckpointStatistics(c, vs[id])
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) getCheckpointSubtasks(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	c, ok := s.checkpoint(w, r, j)
	if !ok {
		return
	}
	vid := r.PathValue("vertexid")
	vs, _ := byVertex(c, j.Vertices())
	v := vs[vid]
	if v == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("vertex %q not found in job %q", vid, j.ID()))
		return
	}
	out := TaskCheckpointStatisticsWithSubtaskDetails{
		TaskCheckpointStatistics: taskCheckpointStatistics(c, v),
		Subtasks:                 []SubtaskCheckpointStatistics{},
	}
	var acked []jobmaster.SubtaskStats
	for i := range v.parallelism {
		a, ok := v.acks[i]
		if !ok {
			out.Subtasks = append(out.Subtasks, SubtaskCheckpointStatistics{Index: i, Status: subtaskPending})
			continue
		}
		acked = append(acked, a)
		out.Subtasks = append(out.Subtasks, SubtaskCheckpointStatistics{Index: i, Status: subtaskCompleted,
			CompletedSubtaskCheckpoint: &CompletedSubtaskCheckpoint{
				AckTimestamp:        ms(a.AckTime),
				EndToEndDuration:    max(0, a.AckTime.Sub(c.TriggerTime).Milliseconds()),
				StateSize:           a.StateSize,
				CheckpointedSize:    a.CheckpointedSize,
				Checkpoint:          SubtaskCheckpointTimes{Sync: a.Sync.Milliseconds(), Async: a.Async.Milliseconds()},
				Alignment:           SubtaskAlignment{Duration: a.Alignment.Milliseconds(), Persisted: a.PersistedData},
				StartDelay:          a.StartDelay.Milliseconds(),
				UnalignedCheckpoint: a.Unaligned,
				Aborted:             c.Status == jobmaster.Failed,
			}})
	}
	sub := func(f func(a jobmaster.SubtaskStats) int64) StatsSummary { return summarize(acked, f) }
	out.Summary = TaskCheckpointSummary{
		CheckpointedSize: sub(func(a jobmaster.SubtaskStats) int64 { return a.CheckpointedSize }),
		StateSize:        sub(func(a jobmaster.SubtaskStats) int64 { return a.StateSize }),
		EndToEndDuration: sub(func(a jobmaster.SubtaskStats) int64 { return max(0, a.AckTime.Sub(c.TriggerTime).Milliseconds()) }),
		CheckpointDuration: CheckpointDurationSummary{
			Sync:  sub(func(a jobmaster.SubtaskStats) int64 { return a.Sync.Milliseconds() }),
			Async: sub(func(a jobmaster.SubtaskStats) int64 { return a.Async.Milliseconds() }),
		},
		Alignment: AlignmentSummary{
			Duration:  sub(func(a jobmaster.SubtaskStats) int64 { return a.Alignment.Milliseconds() }),
			Persisted: sub(func(a jobmaster.SubtaskStats) int64 { return a.PersistedData }),
		},
		StartDelay: sub(func(a jobmaster.SubtaskStats) int64 { return a.StartDelay.Milliseconds() }),
	}
	writeJSON(w, http.StatusOK, out)
}

// summarize computes min, max, average and percentiles of f over xs
// (percentiles interpolate linearly between the closest ranks).
func summarize[T any](xs []T, f func(T) int64) StatsSummary {
	if len(xs) == 0 {
		return StatsSummary{}
	}
	vals := make([]int64, len(xs))
	var sum float64
	for i, x := range xs {
		vals[i] = f(x)
		sum += float64(vals[i])
	}
	slices.Sort(vals)
	pct := func(p float64) float64 {
		rank := p * float64(len(vals)-1)
		lo := int(math.Floor(rank))
		hi := min(lo+1, len(vals)-1)
		return float64(vals[lo]) + (rank-float64(lo))*float64(vals[hi]-vals[lo])
	}
	return StatsSummary{
		Min: vals[0], Max: vals[len(vals)-1], Avg: int64(math.Round(sum / float64(len(vals)))),
		P50: pct(0.5), P90: pct(0.9), P95: pct(0.95), P99: pct(0.99), P999: pct(0.999),
	}
}

func (s *Server) getCheckpointConfig(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	c := j.CheckpointConfig()
	mode := "at_least_once"
	if c.ExactlyOnce {
		mode = "exactly_once"
	}
	writeJSON(w, http.StatusOK, CheckpointConfig{
		Mode: mode, Interval: c.Interval.Milliseconds(), Timeout: c.Timeout.Milliseconds(),
		MinPause: c.MinPause.Milliseconds(), MaxConcurrent: c.MaxConcurrent,
		Externalization:            ExternalizedCheckpointInfo{Enabled: true, DeleteOnCancellation: !c.RetainOnCancel},
		StateBackend:               c.StateBackend,
		CheckpointStorage:          c.CheckpointStorage,
		UnalignedCheckpoints:       c.Unaligned,
		TolerableFailedCheckpoints: c.TolerableFailures,
		AlignedCheckpointTimeout:   c.AlignedTimeout.Milliseconds(),
		CheckpointsAfterTasksEnd:   true,
		RetainedCheckpoints:        c.Retained,
		SavepointDir:               c.SavepointDir,
		EveryNRecords:              c.EveryNRecords,
	})
}

// --- asynchronous operations -------------------------------------------------

func (s *Server) postCheckpoint(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	var req CheckpointTriggerRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.CheckpointType != "" && !strings.EqualFold(req.CheckpointType, "CONFIGURED") {
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`checkpointType %q is not supported: weir takes the kind of checkpoint the state backend is configured for; send "CONFIGURED" or leave it out`, req.CheckpointType))
		return
	}
	s.startOperation(w, r, j, opCheckpoint, "checkpoint", req.TriggerID, func(ctx context.Context) (int64, string, error) {
		id, err := j.TriggerCheckpoint(ctx)
		return id, "", err
	})
}

func (s *Server) postSavepoint(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	var req SavepointTriggerRequest
	if !s.decodeBody(w, r, &req) || !checkFormat(w, req.FormatType) {
		return
	}
	dir, ok := s.savepointTarget(w, j, req.TargetDirectory)
	if !ok {
		return
	}
	fn := func(ctx context.Context) (int64, string, error) {
		loc, err := j.TriggerSavepoint(ctx, dir)
		return 0, loc, err
	}
	what := "savepoint"
	if req.CancelJob {
		what = "stop"
		fn = func(ctx context.Context) (int64, string, error) {
			loc, err := j.StopWithSavepoint(ctx, dir)
			return 0, loc, err
		}
	}
	s.startOperation(w, r, j, opSavepoint, what, req.TriggerID, fn)
}

func (s *Server) postStop(w http.ResponseWriter, r *http.Request) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	var req StopWithSavepointRequest
	if !s.decodeBody(w, r, &req) || !checkFormat(w, req.FormatType) {
		return
	}
	dir, ok := s.savepointTarget(w, j, req.TargetDirectory)
	if !ok {
		return
	}
	fn := func(ctx context.Context) (int64, string, error) {
		loc, err := j.StopWithSavepoint(ctx, dir)
		return 0, loc, err
	}
	if req.Drain {
		d, ok := j.(Drainer)
		if !ok {
			writeError(w, http.StatusBadRequest, `"drain": true is not supported by this job: stop without draining`)
			return
		}
		fn = func(ctx context.Context) (int64, string, error) {
			loc, err := d.DrainWithSavepoint(ctx, dir)
			return 0, loc, err
		}
	}
	s.startOperation(w, r, j, opSavepoint, "stop", req.TriggerID, fn)
}

// savepointTarget resolves the target a request names (storage.
// ResolveSavepointTarget) against the job's savepoint directory and
// Options.SavepointAllowedRoots; it answers a refused target with 403, a
// malformed one or none at all (and no default) with 400, and returns
// false then.
func (s *Server) savepointTarget(w http.ResponseWriter, j Job, target string) (string, bool) {
	wd, _ := os.Getwd()
	roots := storage.SavepointRoots{Default: j.CheckpointConfig().SavepointDir, Allowed: s.opts.SavepointAllowedRoots, WorkDir: wd}
	dir, err := storage.ResolveSavepointTarget(target, roots)
	if err == nil {
		err = storage.CheckSavepointTargetOnDisk(dir, roots)
	}
	switch {
	case errors.Is(err, storage.ErrTargetRefused):
		s.opts.Logger.Warn("savepoint target refused", "job", j.ID(), "target", target, "err", err)
		writeError(w, http.StatusForbidden, err.Error())
		return "", false
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return dir, true
}

func checkFormat(w http.ResponseWriter, format string) bool {
	if format == "" || strings.EqualFold(format, "CANONICAL") {
		return true
	}
	writeError(w, http.StatusBadRequest, fmt.Sprintf(`formatType %q is not supported: weir writes savepoints in the canonical format; send "CANONICAL" or leave it out`, format))
	return false
}

// startOperation starts fn for j and answers 202 with its request id.
func (s *Server) startOperation(w http.ResponseWriter, r *http.Request, j Job, kind opKind, what, triggerID string, fn opFunc) {
	if triggerID != "" && !validTriggerID(triggerID) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("triggerId %q is not 32 lower-case hexadecimal digits", triggerID))
		return
	}
	if st := j.Status(); st.Terminal() {
		writeError(w, http.StatusConflict, fmt.Sprintf("job %q has ended (%s): a %s needs a running job", j.ID(), st, what))
		return
	}
	jobID := r.PathValue("jobid")
	id, err := s.ops.start(kind, jobID, triggerID, fn)
	switch {
	case errors.Is(err, errTooManyOperations):
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("%d operations are in progress: wait for some to end", s.opts.MaxOperations))
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.opts.Logger.Info("operation triggered", "job", jobID, "operation", what, "trigger", id)
	writeJSON(w, http.StatusAccepted, TriggerResponse{RequestID: id})
}

func (s *Server) getCheckpointStatus(w http.ResponseWriter, r *http.Request) {
	s.operationStatus(w, r, opCheckpoint)
}

func (s *Server) getSavepointStatus(w http.ResponseWriter, r *http.Request) {
	s.operationStatus(w, r, opSavepoint)
}

func (s *Server) operationStatus(w http.ResponseWriter, r *http.Request, kind opKind) {
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	id := r.PathValue("triggerid")
	if !validTriggerID(id) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("trigger id %q is not 32 lower-case hexadecimal digits", id))
		return
	}
	res, ok := s.ops.get(kind, r.PathValue("jobid"), id)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no %s request %s for job %q: it was never made, or is older than the last %d operations", kind, id, j.ID(), s.opts.MaxOperations))
		return
	}
	out := AsynchronousOperationResult{Status: QueueStatus{ID: StatusInProgress}}
	if res.done {
		out.Status.ID = StatusCompleted
		op := &OperationInfo{}
		switch {
		case res.err != nil:
			op.FailureCause = &FailureCause{Class: fmt.Sprintf("%T", res.err), StackTrace: res.err.Error()}
		case kind == opCheckpoint:
			op.CheckpointID = &res.checkpointID
		default:
			op.Location = &res.location
		}
		out.Operation = op
	}
	writeJSON(w, http.StatusOK, out)
	if res.done {
		s.ops.markRead(kind, r.PathValue("jobid"), id)
	}
}
