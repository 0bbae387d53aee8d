package cluster

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weirstream/weir/internal/cluster/pb"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/runtime"
)

// The task stream's messages and the jobmaster's Reports, both ways. Go
// values that are not flat travel as JSON inside bytes fields, versioned by
// a one-byte prefix: wireJSONv1 then the JSON text.

const wireJSONv1 byte = 1

func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append([]byte{wireJSONv1}, b...), nil
}

func decodeJSON(b []byte, v any, what string) error {
	if len(b) == 0 {
		return fmt.Errorf("%s: empty", what)
	}
	if b[0] != wireJSONv1 {
		return fmt.Errorf("%s: encoding version %d, this build reads version %d: run the same weir binary in every process", what, b[0], wireJSONv1)
	}
	if err := json.Unmarshal(b[1:], v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// reportToWire turns a Report into the task stream's form.
func reportToWire(r jobmaster.Report) (*pb.TaskReport, error) {
	switch r := r.(type) {
	case jobmaster.TaskRunning:
		return &pb.TaskReport{Body: &pb.TaskReport_TaskRunning{TaskRunning: &pb.TaskEvent{Task: r.Task}}}, nil
	case jobmaster.SourceFinished:
		return &pb.TaskReport{Body: &pb.TaskReport_SourceFinished{SourceFinished: &pb.TaskEvent{Task: r.Task}}}, nil
	case jobmaster.SourceRecords:
		return &pb.TaskReport{Body: &pb.TaskReport_SourceRecords{SourceRecords: &pb.SourceRecords{Task: r.Task, N: r.N}}}, nil
	case jobmaster.CheckpointMarker:
		return &pb.TaskReport{Body: &pb.TaskReport_CheckpointMarker{CheckpointMarker: &pb.TaskEvent{Task: r.Task}}}, nil
	case jobmaster.Acknowledge:
		ops, err := encodeJSON(r.Operators)
		if err != nil {
			return nil, fmt.Errorf("acknowledgement of checkpoint %d by task %s: %w", r.Checkpoint, r.Task, err)
		}
		return &pb.TaskReport{Body: &pb.TaskReport_Acknowledge{Acknowledge: &pb.Acknowledge{
			Task: r.Task, Checkpoint: r.Checkpoint, OperatorsJson: ops,
			SyncNs: int64(r.Sync), AsyncNs: int64(r.Async), AlignmentNs: int64(r.Alignment), StartDelayNs: int64(r.StartDelay),
			StateSize: r.StateSize, CheckpointedSize: r.CheckpointedSize, Unaligned: r.Unaligned, PersistedData: r.PersistedData,
		}}}, nil
	case jobmaster.Decline:
		return &pb.TaskReport{Body: &pb.TaskReport_Decline{Decline: &pb.Decline{Task: r.Task, Checkpoint: r.Checkpoint, Reason: r.Reason}}}, nil
	case jobmaster.TaskFailed:
		text := r.Error
		if text == "" && r.Err != nil {
			text = r.Err.Error()
		}
		return &pb.TaskReport{Body: &pb.TaskReport_TaskFailed{TaskFailed: &pb.TaskFailed{
			Task: r.Task, Operator: r.Operator, Subtask: int32(r.Subtask), Error: text}}}, nil
	case jobmaster.AttemptEnded:
		text := r.Error
		if text == "" && r.Err != nil {
			text = r.Err.Error()
		}
		return &pb.TaskReport{Body: &pb.TaskReport_AttemptEnded{AttemptEnded: &pb.AttemptEnded{Error: text, Cancellation: r.Cancellation}}}, nil
	}
	return nil, fmt.Errorf("report %T has no wire form", r)
}

// reportFromWire turns a task stream report of attempt into a Report.
func reportFromWire(attempt int, w *pb.TaskReport) (jobmaster.Report, error) {
	switch b := w.GetBody().(type) {
	case *pb.TaskReport_TaskRunning:
		return jobmaster.TaskRunning{Attempt: attempt, Task: b.TaskRunning.Task}, nil
	case *pb.TaskReport_SourceFinished:
		return jobmaster.SourceFinished{Attempt: attempt, Task: b.SourceFinished.Task}, nil
	case *pb.TaskReport_SourceRecords:
		return jobmaster.SourceRecords{Attempt: attempt, Task: b.SourceRecords.Task, N: b.SourceRecords.N}, nil
	case *pb.TaskReport_CheckpointMarker:
		return jobmaster.CheckpointMarker{Attempt: attempt, Task: b.CheckpointMarker.Task}, nil
	case *pb.TaskReport_Acknowledge:
		a := b.Acknowledge
		var ops []runtime.OperatorStateResult
		if err := decodeJSON(a.OperatorsJson, &ops, fmt.Sprintf("the state handles of task %s for checkpoint %d", a.Task, a.Checkpoint)); err != nil {
			// The ack cannot be used: the checkpoint is declined.
			return jobmaster.Decline{Attempt: attempt, Task: a.Task, Checkpoint: a.Checkpoint, Reason: err.Error()}, nil
		}
		return jobmaster.Acknowledge{Attempt: attempt, Task: a.Task, Checkpoint: a.Checkpoint, Operators: ops,
			Sync: time.Duration(a.SyncNs), Async: time.Duration(a.AsyncNs), Alignment: time.Duration(a.AlignmentNs),
			StartDelay: time.Duration(a.StartDelayNs), StateSize: a.StateSize, CheckpointedSize: a.CheckpointedSize,
			Unaligned: a.Unaligned, PersistedData: a.PersistedData}, nil
	case *pb.TaskReport_Decline:
		return jobmaster.Decline{Attempt: attempt, Task: b.Decline.Task, Checkpoint: b.Decline.Checkpoint, Reason: b.Decline.Reason}, nil
	case *pb.TaskReport_TaskFailed:
		f := b.TaskFailed
		return jobmaster.TaskFailed{Attempt: attempt, Task: f.Task, Operator: f.Operator, Subtask: int(f.Subtask), Error: f.Error}, nil
	case *pb.TaskReport_AttemptEnded:
		return jobmaster.AttemptEnded{Attempt: attempt, Error: b.AttemptEnded.Error, Cancellation: b.AttemptEnded.Cancellation}, nil
	}
	return nil, fmt.Errorf("a task report without a body (%T)", w.GetBody())
}

// fence checks the fencing token and attempt of a message: session is the
// one the message carries, want the receiver's; attempt the message's,
// current the attempt deployed (-1: none). A stale message is an error
// saying why; the receiver drops it.
func fence(session, want string, attempt, current int64) error {
	switch {
	case session != want:
		return fmt.Errorf("JobManager session %q is not the current one (%q)", session, want)
	case current < 0:
		return fmt.Errorf("attempt %d: no attempt is deployed", attempt)
	case attempt != current:
		return fmt.Errorf("attempt %d is not the current attempt %d", attempt, current)
	}
	return nil
}

// subtaskMetricsToWire is one task's figures in the task stream's form.
func subtaskMetricsToWire(task string, operators []string, s metrics.TaskSnapshot) *pb.SubtaskMetrics {
	return &pb.SubtaskMetrics{Task: task, RecordsIn: s.RecordsIn, RecordsOut: s.RecordsOut,
		BackPressuredNs: int64(s.BackPressured), IdleNs: int64(s.Idle), BusyNs: int64(s.Busy),
		BackPressuredRatio: s.BackPressuredRatio, Operators: operators,
		OperatorRecordsIn: s.OperatorRecordsIn, OperatorRecordsOut: s.OperatorRecordsOut,
		InputWatermark: s.InputWatermark, OutputWatermark: s.OutputWatermark,
		BytesIn: s.BytesIn, BytesOut: s.BytesOut}
}

// subtaskFiguresFromWire is the JobManager's form of a subtask's figures.
func subtaskFiguresFromWire(m *pb.SubtaskMetrics) SubtaskFigures {
	return SubtaskFigures{RecordsIn: m.RecordsIn, RecordsOut: m.RecordsOut,
		BackPressured: time.Duration(m.BackPressuredNs), Idle: time.Duration(m.IdleNs), Busy: time.Duration(m.BusyNs),
		BackPressuredRatio: m.BackPressuredRatio, Operators: m.Operators,
		OperatorRecordsIn: m.OperatorRecordsIn, OperatorRecordsOut: m.OperatorRecordsOut,
		InputWatermark: m.InputWatermark, OutputWatermark: m.OutputWatermark,
		BytesIn: m.BytesIn, BytesOut: m.BytesOut}
}
