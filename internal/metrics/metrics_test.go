package metrics

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestRate(t *testing.T) {
	type obs struct {
		at    time.Duration
		total time.Duration
		want  float64
	}
	tests := []struct {
		name string
		obs  []obs
	}{
		{"since the start while younger than the window", []obs{{time.Second, 500 * time.Millisecond, 0.5}}},
		{"at the start", []obs{{0, 0, 0}}},
		{"over the last window once older", []obs{
			{2 * time.Second, 2 * time.Second, 1},               // all backpressured so far
			{4 * time.Second, 2 * time.Second, 0},               // none in the last 2s
			{5 * time.Second, 2500 * time.Millisecond, 1.0 / 6}, // 0.5s in 3s since the 2s sample
		}},
		{"reads far apart measure since the last read", []obs{
			{10 * time.Second, 0, 0},
			{70 * time.Second, 30 * time.Second, 0.5},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Rate
			for _, o := range tt.obs {
				if got := r.Observe(t0, at(o.at), int64(o.total)); got < o.want-1e-9 || got > o.want+1e-9 {
					t.Fatalf("at %v with total %v: %v, want %v", o.at, o.total, got, o.want)
				}
			}
		})
	}
}

func TestTaskSnapshot(t *testing.T) {
	m := NewTask("3-1", "3", "count -> sink", 1, 2, []string{"count", "sink"})
	if s := m.Snapshot(at(time.Second)); s.Status != Created || !s.Start.IsZero() || s.Busy != 0 || s.InputWatermark != MinWatermark {
		t.Fatalf("a task not started: %+v", s)
	}
	m.Start(t0)
	m.SetStatus(Running, t0)
	m.BackPressuredNanos.Add(int64(time.Second))
	m.IdleNanos.Add(int64(500 * time.Millisecond))
	m.RecordsIn.Add(7)
	s := m.Snapshot(at(2 * time.Second))
	if s.RecordsIn != 7 || s.Busy != 500*time.Millisecond || s.BackPressuredRatio != 0.5 || s.IdleRatio != 0.25 || s.BusyRatio != 0.25 {
		t.Errorf("running: %+v", s)
	}
	m.SetStatus(Canceled, at(3*time.Second))
	s = m.Snapshot(at(10 * time.Second))
	if s.Status != Canceled || !s.End.Equal(at(3*time.Second)) || s.Busy != 1500*time.Millisecond || s.BackPressuredRatio != 0 {
		t.Errorf("ended: %+v; busy counts until the end, ratios are 0", s)
	}
}

func TestVertexAggregation(t *testing.T) {
	tests := []struct {
		name     string
		statuses []Status
		want     Status
		ended    bool
	}{
		{"all running", []Status{Running, Running}, Running, false},
		{"one initializing", []Status{Running, Initializing}, Initializing, false},
		{"one finished, one running", []Status{Finished, Running}, Running, false},
		{"all finished", []Status{Finished, Finished}, Finished, true},
		{"a failure wins", []Status{Canceled, Failed}, Failed, true},
		{"cancelled over finished", []Status{Finished, Canceled}, Canceled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewJob("j", "job")
			var tasks []*Task
			for i, st := range tt.statuses {
				m := NewTask("1-"+string(rune('0'+i)), "1", "v", i, len(tt.statuses), []string{"v"})
				m.Start(at(time.Duration(i) * time.Second))
				m.SetStatus(st, at(5*time.Second))
				m.RecordsOut.Add(10)
				m.InputWatermark.Store(int64(100 + i))
				tasks = append(tasks, m)
			}
			j.SetTasks(1, tasks)
			vs := j.Vertices(at(10 * time.Second))
			if len(vs) != 1 {
				t.Fatalf("%d vertices", len(vs))
			}
			v := vs[0]
			if v.Status != tt.want || v.End.IsZero() == tt.ended || !v.Start.Equal(t0) || v.RecordsOut != int64(10*len(tt.statuses)) || v.MinInputWatermark != 100 {
				t.Errorf("vertex %+v: want status %s, ended %v, start t0, records summed, min watermark", v, tt.want, tt.ended)
			}
		})
	}
}

func TestOperatorCounters(t *testing.T) {
	// src -> a -> {b, c}: a's output feeds b and c (a fan-out), a's side
	// output feeds nothing chained (a writer); c is a sink.
	task := NewTask("1-0", "1", "src -> a -> b -> c", 0, 1, []string{"src", "a", "b", "c"})
	task.RecordsIn.Store(0)
	srcOut := task.NewCounter(0, []int{1})
	aMain := task.NewCounter(1, []int{2, 3})
	aSide := task.NewCounter(1, nil)
	bOut := task.NewCounter(2, nil)
	srcOut.N, aMain.N, aSide.N, bOut.N = 10, 7, 2, 5

	before := task.Snapshot(at(time.Second))
	if !slices.Equal(before.OperatorRecordsIn, []int64{0, 0, 0, 0}) || !slices.Equal(before.OperatorRecordsOut, []int64{0, 0, 0, 0}) {
		t.Fatalf("before Publish: in %v out %v, want zeros", before.OperatorRecordsIn, before.OperatorRecordsOut)
	}
	task.Publish()
	s := task.Snapshot(at(time.Second))
	if want := []int64{0, 10, 7, 7}; !slices.Equal(s.OperatorRecordsIn, want) {
		t.Errorf("records in %v, want %v", s.OperatorRecordsIn, want)
	}
	if want := []int64{10, 9, 5, 0}; !slices.Equal(s.OperatorRecordsOut, want) {
		t.Errorf("records out %v, want %v", s.OperatorRecordsOut, want)
	}

	// A consumer task: the head's records in are the task's.
	other := NewTask("2-0", "2", "d", 0, 2, []string{"d"})
	other.RecordsIn.Store(4)
	other2 := NewTask("2-1", "2", "d", 1, 2, []string{"d"})
	other2.RecordsIn.Store(3)
	c := other2.NewCounter(0, nil)
	c.N = 1
	other2.Publish()
	job := NewJob("j", "j")
	job.SetTasks(0, []*Task{task, other, other2})
	vs := job.Vertices(at(time.Second))
	if len(vs) != 2 || !slices.Equal(vs[1].OperatorRecordsIn, []int64{7}) || !slices.Equal(vs[1].OperatorRecordsOut, []int64{1}) {
		t.Fatalf("vertices %+v: want d with 7 in and 1 out", vs)
	}
	if !slices.Equal(vs[0].OperatorRecordsOut, []int64{10, 9, 5, 0}) {
		t.Errorf("vertex 1 records out %v", vs[0].OperatorRecordsOut)
	}
}

// TestTaskNetworkBytes: a task's bytes are the sums of its network
// channels' counters, read at each snapshot; a task without any has 0.
func TestTaskNetworkBytes(t *testing.T) {
	m := NewTask("1-0", "1", "count", 0, 2, []string{"count"})
	if s := m.Snapshot(t0); s.BytesIn != 0 || s.BytesOut != 0 {
		t.Fatalf("no channels: bytes in %d, out %d", s.BytesIn, s.BytesOut)
	}
	var in1, in2, out1 atomic.Int64
	m.AddNetworkBytes(&in1, nil)
	m.AddNetworkBytes(&in2, &out1)
	in1.Store(100)
	in2.Store(20)
	out1.Store(7)
	if s := m.Snapshot(t0); s.BytesIn != 120 || s.BytesOut != 7 {
		t.Errorf("bytes in %d, out %d; want 120 and 7", s.BytesIn, s.BytesOut)
	}
	in2.Add(5)
	if s := m.Snapshot(t0); s.BytesIn != 125 {
		t.Errorf("bytes in %d after the channel received 5 more, want 125", s.BytesIn)
	}
}
