package promexport

import (
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/metrics"
)

type sizesJob struct{ history []jobmaster.CheckpointStats }

func (j sizesJob) ID() string   { return "j" }
func (j sizesJob) Name() string { return "job" }
func (j sizesJob) Checkpoints() (jobmaster.Summary, []jobmaster.CheckpointStats) {
	return jobmaster.Summary{Completed: len(j.history)}, j.history
}
func (j sizesJob) Metrics() *metrics.Job { return metrics.NewJob("j", "job") }

// TestCheckpointSizes checks that lastCheckpointSize is what the latest
// completed checkpoint uploaded and lastCheckpointFullSize the full state
// it refers to, as Flink names them: they differ for an incremental
// checkpoint.
func TestCheckpointSizes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		history        []jobmaster.CheckpointStats
		size, fullSize float64
	}{
		{"none", nil, -1, -1},
		{"full then incremental", []jobmaster.CheckpointStats{
			{ID: 1, Status: jobmaster.Completed, StateSize: 4000, CheckpointedSize: 4000},
			{ID: 2, Status: jobmaster.Completed, StateSize: 4100, CheckpointedSize: 180},
			{ID: 3, Status: jobmaster.Failed, StateSize: 99, CheckpointedSize: 99},
		}, 180, 4100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := NewWithClock(func() []Job { return []Job{sizesJob{tc.history}} }, func() time.Time { return time.Unix(100, 0) })
			families, err := reg.Gatherer().Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, f := range families {
				for _, m := range f.GetMetric() {
					if g := m.GetGauge(); g != nil {
						got[f.GetName()] = g.GetValue()
					}
				}
			}
			if v := got[jobPrefix+"lastCheckpointSize"]; v != tc.size {
				t.Errorf("lastCheckpointSize = %v, want %v (the bytes uploaded)", v, tc.size)
			}
			if v := got[jobPrefix+"lastCheckpointFullSize"]; v != tc.fullSize {
				t.Errorf("lastCheckpointFullSize = %v, want %v (the full state)", v, tc.fullSize)
			}
		})
	}
}

// tmJob is a job's part on a TaskManager: its tasks, no checkpoints.
type tmJob struct{ m *metrics.Job }

func (j tmJob) ID() string   { return "j" }
func (j tmJob) Name() string { return "job" }
func (j tmJob) Checkpoints() (jobmaster.Summary, []jobmaster.CheckpointStats) {
	return jobmaster.Summary{Completed: 3, Restarts: 1}, []jobmaster.CheckpointStats{{ID: 3, Status: jobmaster.Completed,
		Subtasks: []jobmaster.SubtaskStats{{Task: "1-1", StateSize: 10}}}}
}
func (j tmJob) Metrics() *metrics.Job { return j.m }
func (j tmJob) TaskManagerID() string { return "tm-7" }

// TestTaskManagerJob: a TaskManager's job exports its tasks' metrics
// under the TaskManager's id, bytes and watermarks included, and none of
// the job's own (the JobManager's), even when it has checkpoints to say.
func TestTaskManagerJob(t *testing.T) {
	task := metrics.NewTask("1-1", "1", "count -> out", 1, 2, []string{"count", "out"})
	task.RecordsIn.Add(12)
	task.InputWatermark.Store(5000)
	var in atomic.Int64
	task.AddNetworkBytes(&in, nil)
	in.Store(345)
	m := metrics.NewJob("j", "job")
	m.SetTasks(4, []*metrics.Task{task})
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector(func() []Job { return []Job{tmJob{m}} }, func() time.Time { return time.Unix(100, 0) }))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{taskPrefix + "numRecordsIn": 12, taskPrefix + "numBytesIn": 345, taskPrefix + "numBytesOut": 0,
		taskPrefix + "currentInputWatermark": 5000, opPrefix + "numRecordsIn": 12}
	got := map[string]float64{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), jobPrefix) || f.GetName() == taskPrefix+"checkpointedStateSize" {
			t.Errorf("a TaskManager's job exports %s, the JobManager's", f.GetName())
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tm_id"] != "tm-7" || labels["task_attempt_num"] != "4" || labels["subtask_index"] != "1" || labels["task_id"] != "1" {
				t.Errorf("%s: labels %v, want tm_id tm-7, attempt 4, task 1 subtask 1", f.GetName(), labels)
			}
			if _, ok := want[f.GetName()]; ok && (labels["operator_id"] == "" || labels["operator_id"] == "1.0") {
				got[f.GetName()] = s.GetCounter().GetValue() + s.GetGauge().GetValue()
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
