package promexport

import (
	"testing"
	"time"

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
