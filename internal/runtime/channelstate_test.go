package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/graph"
)

// TestOvertake: the barrier goes ahead of the queued batches, which stay
// queued behind it in order (the partly filled one last); the channel
// state returned is a copy of them that decodes to the same records and
// timestamps; Announce puts an event at the head without copying; a
// restored output state is sent before anything else.
func TestOvertake(t *testing.T) {
	c, err := codec.Of[int]()
	if err != nil {
		t.Fatal(err)
	}
	// Room for the re-sent batches behind the barrier: with a full queue
	// Overtake waits for the consumer to make room, as any send does.
	ch := NewChannel[int](8, make(chan struct{}, 1), nil)
	w := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 2})
	w.SetChannelState(c, []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, nil, nil)
	for i := range 5 {
		w.Emit(i, int64(100+i))
	}
	w.Announce(Event{Kind: BarrierAnnouncement, ID: 6})
	state := w.Overtake(Event{Kind: Barrier, ID: 7, Unaligned: true})
	w.Flush() // the partly filled batch stays behind the barrier
	var got []string
	for range 5 {
		env := <-ch.queue
		if env.recs == nil {
			got = append(got, fmt.Sprintf("%s %d", env.ev.Kind, env.ev.ID))
			continue
		}
		got = append(got, fmt.Sprint(env.recs, env.ts))
	}
	want := []string{"barrier 7", "barrier-announcement 6", "[0 1] [100 101]", "[2 3] [102 103]", "[4] [104]"}
	if !slices.Equal(got, want) {
		t.Fatalf("queue after Overtake = %q, want %q", got, want)
	}
	if len(state) != 1 || state[0].Len() != 5 || state[0].Handle().Edge != "a->b/0" {
		t.Fatalf("output state %v: want one channel of 5 records", state)
	}
	recs, ts, err := DecodeChannelRecords(c, state[0].AppendTo(nil), 5, !state[0].Handle().NoTimestamps)
	if err != nil || !slices.Equal(recs, []int{0, 1, 2, 3, 4}) || !slices.Equal(ts, []int64{100, 101, 102, 103, 104}) {
		t.Fatalf("decoded %v %v %v", recs, ts, err)
	}
	if _, _, err := DecodeChannelRecords(c, state[0].AppendTo(nil), 4, true); err == nil {
		t.Fatal("a record count that does not match decoded without error")
	}

	w2 := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 2})
	w2.SetChannelState(c, []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, [][]int{{7, 8, 9}}, [][]int64{{1, 2, 3}})
	w2.ReplayRecovered()
	w2.Emit(10, NoTimestamp)
	w2.Flush()
	got = nil
	for range 3 {
		env := <-ch.queue
		got = append(got, fmt.Sprint(env.recs, env.ts))
	}
	if want := []string{"[7 8] [1 2]", "[9] [3]", "[10] []"}; !slices.Equal(got, want) {
		t.Fatalf("replayed output state then new records = %q, want %q", got, want)
	}
}

// TestInputRecording: an input keeps copies of what it delivers only while
// recording, replays its restored state first, and hands the recording
// over once.
func TestInputRecording(t *testing.T) {
	c, _ := codec.Of[int]()
	ch := NewChannel[int](4, make(chan struct{}, 1), nil)
	var seen []int
	in := NewInput(ch, collectOutput{&seen}, nil)
	in.SetChannelState(c, ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, false), []int{-2, -1}, []int64{NoTimestamp, NoTimestamp})
	in.ReplayRecovered()
	send := func(recs ...int) { ch.queue <- envelope[int]{recs: recs} }
	send(0, 1)
	in.Poll()
	in.StartRecording()
	send(2, 3)
	in.Poll()
	in.StopRecording()
	send(4)
	in.Poll()
	d := in.TakeRecording(1)
	if !slices.Equal(seen, []int{-2, -1, 0, 1, 2, 3, 4}) {
		t.Fatalf("delivered %v", seen)
	}
	if d == nil || d.Len() != 2 {
		t.Fatalf("recording %v: want the 2 records read while recording", d)
	}
	if in.TakeRecording(1) != nil {
		t.Fatal("the recording was handed over twice")
	}
}

type collectOutput struct{ recs *[]int }

func (o collectOutput) Emit(r int, _ int64) { *o.recs = append(*o.recs, r) }

// TestRedistributeChannelState: the records in flight of an edge taken at
// other parallelisms go to the new consumers by key group (Hash), by
// copy of the old consumer (Broadcast), round-robin otherwise; within an
// old channel they keep their order, input state before output state;
// nothing is lost; bad input is refused naming the edge.
func TestRedistributeChannelState(t *testing.T) {
	h := func(p, c, ps, cs int, out bool) checkpoint.ChannelStateHandle {
		return ChannelStateHandleFor("a->b/0", p, ps, c, cs, out)
	}
	// Two producers, two consumers: records are 100*producer + 10*consumer
	// + i, the output state's i from 5 on; timestamps are the record.
	var chans []RestoredChannel[int]
	for p := range 2 {
		for c := range 2 {
			for _, out := range []bool{true, false} { // listed output first: the sort puts input first
				var recs []int
				var ts []int64
				first := 0
				if out {
					first = 5
				}
				for i := first; i < first+3; i++ {
					recs, ts = append(recs, 100*p+10*c+i), append(ts, int64(100*p+10*c+i))
				}
				chans = append(chans, RestoredChannel[int]{Handle: h(p, c, 2, 2, out), Recs: recs, TS: ts})
			}
		}
	}
	all := 0
	for _, ch := range chans {
		all += len(ch.Recs)
	}
	const maxPar = 8
	kg := func(r int) int { return r % maxPar }
	for _, tt := range []struct {
		name string
		rule RescaleRule[int]
		want [][]int
	}{
		{"hash to 3", RescaleRule[int]{Partitioner: graph.Hash, Consumers: 3, KeyGroup: kg, MaxParallelism: maxPar}, [][]int{
			{0, 1, 2, 10, 16, 17, 105, 106, 112},
			{5, 11, 12, 100, 101, 107, 115, 116, 117},
			{6, 7, 15, 102, 110, 111},
		}},
		{"hash to 1", RescaleRule[int]{Partitioner: graph.Hash, Consumers: 1, KeyGroup: kg, MaxParallelism: maxPar}, [][]int{
			{0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17, 100, 101, 102, 105, 106, 107, 110, 111, 112, 115, 116, 117},
		}},
		{"rebalance to 3", RescaleRule[int]{Partitioner: graph.Rebalance, Consumers: 3}, [][]int{
			{0, 5, 10, 15, 100, 105, 110, 115},
			{1, 6, 11, 16, 101, 106, 111, 116},
			{2, 7, 12, 17, 102, 107, 112, 117},
		}},
		{"forward to 1", RescaleRule[int]{Partitioner: graph.Forward, Consumers: 1}, [][]int{
			{0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17, 100, 101, 102, 105, 106, 107, 110, 111, 112, 115, 116, 117},
		}},
		{"broadcast to 3", RescaleRule[int]{Partitioner: graph.Broadcast, Consumers: 3}, [][]int{
			{0, 1, 2, 5, 6, 7, 100, 101, 102, 105, 106, 107},
			{10, 11, 12, 15, 16, 17, 110, 111, 112, 115, 116, 117},
			{0, 1, 2, 5, 6, 7, 100, 101, 102, 105, 106, 107},
		}},
		{"broadcast to 1", RescaleRule[int]{Partitioner: graph.Broadcast, Consumers: 1}, [][]int{
			{0, 1, 2, 5, 6, 7, 100, 101, 102, 105, 106, 107},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recs, ts, err := RedistributeChannelState(chans, tt.rule)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(tt.want) || len(ts) != len(tt.want) {
				t.Fatalf("%d consumers got state, want %d", len(recs), len(tt.want))
			}
			n := 0
			for c := range tt.want {
				if !slices.Equal(recs[c], tt.want[c]) {
					t.Errorf("consumer %d got %v, want %v", c, recs[c], tt.want[c])
				}
				for i, r := range recs[c] {
					if ts[c][i] != int64(r) {
						t.Errorf("consumer %d: record %d has timestamp %d", c, r, ts[c][i])
					}
					if tt.rule.Partitioner == graph.Hash && kg(r)*tt.rule.Consumers/maxPar != c {
						t.Errorf("record %d (key group %d) went to consumer %d, which does not own it", r, kg(r), c)
					}
				}
				n += len(recs[c])
			}
			if tt.rule.Partitioner != graph.Broadcast && n != all {
				t.Errorf("%d records dealt, want all %d", n, all)
			}
		})
	}
	// Without timestamps a record gets NoTimestamp.
	recs, ts, err := RedistributeChannelState([]RestoredChannel[int]{{Handle: h(0, 0, 1, 1, false), Recs: []int{1, 2}}}, RescaleRule[int]{Partitioner: graph.Rebalance, Consumers: 1})
	if err != nil || !slices.Equal(recs[0], []int{1, 2}) || !slices.Equal(ts[0], []int64{NoTimestamp, NoTimestamp}) {
		t.Fatalf("without timestamps: %v %v %v", recs, ts, err)
	}
	for _, tt := range []struct {
		name  string
		chans []RestoredChannel[int]
		rule  RescaleRule[int]
		want  string
	}{
		{"no consumers", chans, RescaleRule[int]{Edge: "e", Partitioner: graph.Rebalance}, "channel state of edge e: 0 consumers"},
		{"hash without key groups", chans, RescaleRule[int]{Edge: "e", Partitioner: graph.Hash, Consumers: 2}, "a hash edge needs a key group function"},
		{"key group out of range", chans, RescaleRule[int]{Edge: "e", Partitioner: graph.Hash, Consumers: 2, KeyGroup: func(int) int { return 9 }, MaxParallelism: maxPar}, "key group is 9, want 0..7"},
		{"timestamps missing", []RestoredChannel[int]{{Handle: h(0, 1, 1, 2, false), Recs: []int{1, 2}, TS: []int64{1}}}, RescaleRule[int]{Edge: "e", Partitioner: graph.Rebalance, Consumers: 2}, "channel 0->1 has 2 records and 1 timestamps"},
	} {
		if _, _, err := RedistributeChannelState(tt.chans, tt.rule); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// queueOf lists what ch holds, taking it: "kind id [unaligned]" for
// events, the records for batches.
func queueOf(ch *Channel[int], n int) []string {
	var got []string
	for range n {
		env := <-ch.queue
		if env.recs == nil {
			s := fmt.Sprintf("%s %d", env.ev.Kind, env.ev.ID)
			if env.ev.Unaligned {
				s += " unaligned"
			}
			if env.ev.slot != nil {
				env.ev.slot.taken()
			}
			got = append(got, s)
			continue
		}
		got = append(got, fmt.Sprint(env.recs))
	}
	return got
}

// TestTimedBarrier: an aligned barrier with a timeout is queued behind the
// data; taken by the consumer in time it stays aligned and carries no
// state; still queued at its deadline it is converted (in the task's loop,
// ConvertDue, or while a send waits for space, with the barrier queued or
// in hand): it goes to the head of the queue, unaligned, and the batches
// before it are the output state, those after it stay behind it.
func TestTimedBarrier(t *testing.T) {
	c, err := codec.Of[int]()
	if err != nil {
		t.Fatal(err)
	}
	newWriter := func(capacity int) (*RecordWriter[int], *Channel[int]) {
		ch := NewChannel[int](capacity, make(chan struct{}, 1), nil)
		w := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 2})
		w.SetChannelState(c, []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, nil, nil)
		return w, ch
	}
	barrier := Event{Kind: Barrier, ID: 3, AlignedTimeoutMs: 50}
	state := func(tb *TimedBarrier) ([]int, bool) {
		<-tb.Done()
		data, converted := tb.Converted()
		var all []int
		for _, d := range data {
			recs, _, err := DecodeChannelRecords(c, d.AppendTo(nil), int64(d.Len()), !d.Handle().NoTimestamps)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, recs...)
		}
		return all, converted
	}

	t.Run("taken in time", func(t *testing.T) {
		w, ch := newWriter(8)
		for i := range 3 {
			w.Emit(i, NoTimestamp)
		}
		tb := w.SendTimed(barrier, time.Now().Add(time.Hour))
		w.Emit(9, NoTimestamp)
		w.Flush()
		if !w.ConvertDue() {
			t.Fatal("ConvertDue before the deadline: not pending")
		}
		got := queueOf(ch, 4)
		if want := []string{"[0 1]", "[2]", "barrier 3", "[9]"}; !slices.Equal(got, want) {
			t.Fatalf("queue %q, want %q", got, want)
		}
		if recs, converted := state(tb); converted || recs != nil {
			t.Fatalf("taken barrier: converted %v, state %v", converted, recs)
		}
		if w.ConvertDue() {
			t.Fatal("ConvertDue after the barrier was taken: still pending")
		}
	})

	t.Run("converted in the loop", func(t *testing.T) {
		w, ch := newWriter(8)
		for i := range 3 {
			w.Emit(i, NoTimestamp)
		}
		tb := w.SendTimed(barrier, time.Now().Add(10*time.Millisecond))
		w.Emit(9, NoTimestamp)
		w.Flush()
		<-tb.Due()
		if w.ConvertDue() {
			t.Fatal("ConvertDue after the deadline: still pending")
		}
		got := queueOf(ch, 4)
		if want := []string{"barrier 3 unaligned", "[0 1]", "[2]", "[9]"}; !slices.Equal(got, want) {
			t.Fatalf("queue %q, want %q", got, want)
		}
		if recs, converted := state(tb); !converted || !slices.Equal(recs, []int{0, 1, 2}) {
			t.Fatalf("converted barrier: converted %v, state %v; want the 3 records before it", converted, recs)
		}
	})

	t.Run("converted while a send waits", func(t *testing.T) {
		// Room for 2 batches: the barrier is queued behind [0 1], then
		// [2 3] fills the queue and the send of [4 5] waits past the
		// deadline; a consumer starts reading only after it.
		w, ch := newWriter(2)
		w.Emit(0, NoTimestamp)
		w.Emit(1, NoTimestamp)
		tb := w.SendTimed(barrier, time.Now().Add(10*time.Millisecond))
		got := make(chan []string)
		go func() {
			<-tb.Due()
			time.Sleep(20 * time.Millisecond)
			got <- queueOf(ch, 4)
		}()
		for i := 2; i < 6; i++ {
			w.Emit(i, NoTimestamp)
		}
		if q, want := <-got, []string{"barrier 3 unaligned", "[0 1]", "[2 3]", "[4 5]"}; !slices.Equal(q, want) {
			t.Fatalf("queue %q, want %q", q, want)
		}
		if recs, converted := state(tb); !converted || !slices.Equal(recs, []int{0, 1}) {
			t.Fatalf("converted barrier: converted %v, state %v; want [0 1]", converted, recs)
		}
	})

	t.Run("converted in hand", func(t *testing.T) {
		// The queue is full when the barrier is sent: it waits in hand
		// past the deadline, then goes ahead of both batches.
		w, ch := newWriter(2)
		for i := range 4 {
			w.Emit(i, NoTimestamp)
		}
		got := make(chan []string)
		go func() {
			time.Sleep(40 * time.Millisecond)
			got <- queueOf(ch, 3)
		}()
		tb := w.SendTimed(barrier, time.Now().Add(10*time.Millisecond))
		w.Flush() // what did not fit behind the barrier waits in the writer
		if q, want := <-got, []string{"barrier 3 unaligned", "[0 1]", "[2 3]"}; !slices.Equal(q, want) {
			t.Fatalf("queue %q, want %q", q, want)
		}
		if recs, converted := state(tb); !converted || !slices.Equal(recs, []int{0, 1, 2, 3}) {
			t.Fatalf("converted barrier: converted %v, state %v; want [0 1 2 3]", converted, recs)
		}
		if w.ConvertDue() {
			t.Fatal("ConvertDue after the conversion: still pending")
		}
	})

	t.Run("without channel state", func(t *testing.T) {
		ch := NewChannel[int](8, make(chan struct{}, 1), nil)
		w := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 2})
		w.Emit(1, NoTimestamp)
		if tb := w.SendTimed(barrier, time.Now()); tb != nil {
			t.Fatal("SendTimed without channel state returned a timed barrier")
		}
		if got, want := queueOf(ch, 2), []string{"[1]", "barrier 3"}; !slices.Equal(got, want) {
			t.Fatalf("queue %q, want %q", got, want)
		}
	})
}

// releasingOp is an operator whose snapshots count their releases.
type releasingOp struct {
	nopOp
	released atomic.Int64
}

func (o *releasingOp) Emit(int, int64) {}

func (o *releasingOp) SnapshotState(int64, *BarrierOptions) (OperatorSnapshot, error) {
	return OperatorSnapshot{Release: func() { o.released.Add(1) }}, nil
}

// ackLog is a Responder that keeps the acknowledgements.
type ackLog struct {
	mu   sync.Mutex
	acks []TaskAck
}

func (r *ackLog) Acknowledge(a TaskAck) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, a)
}
func (r *ackLog) SourceRecords(string, int64) {}
func (r *ackLog) RequestCheckpoint(string)    {}
func (r *ackLog) SourceFinished(string)       {}

// TestUnalignedAbortReleases: an unaligned snapshot abandoned while its
// input state is recorded (a cancel marker on the other input) releases
// what its operators kept for it, and acknowledges nothing more (the
// task declined already).
func TestUnalignedAbortReleases(t *testing.T) {
	c, _ := codec.Of[int]()
	bell := make(chan struct{}, 1)
	op := &releasingOp{}
	var chans []*Channel[int]
	var inputs []InputChannel
	for p := range 2 {
		ch := NewChannel[int](4, bell, nil)
		in := NewInput[int](ch, op, nil)
		in.SetChannelState(c, ChannelStateHandleFor("a->b/0", p, 2, 0, 1, false), nil, nil)
		chans, inputs = append(chans, ch), append(inputs, in)
	}
	resp := &ackLog{}
	task := NewTask(TaskConfig{Name: "t", Parallelism: 1, Doorbell: bell, Inputs: inputs, InputGate: []int{0, 0},
		Chain:         []Chained{{Name: "op", Op: op}},
		Checkpointing: &CheckpointConfig{Mode: checkpoint.ExactlyOnce, Responder: resp, Operators: []OperatorInfo{{UID: "op", Name: "op"}}}})
	done := make(chan error, 1)
	go func() { done <- task.Run(context.Background()) }()
	send := func(ch *Channel[int], env envelope[int]) {
		ch.queue <- env
		select {
		case bell <- struct{}{}:
		default:
		}
	}
	send(chans[0], envelope[int]{ev: Event{Kind: Barrier, ID: 1, Unaligned: true}})
	send(chans[1], envelope[int]{recs: []int{1, 2}})
	send(chans[1], envelope[int]{ev: Event{Kind: CancelBarrier, ID: 1}})
	deadline := time.Now().Add(10 * time.Second)
	for op.released.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for _, ch := range chans {
		send(ch, envelope[int]{ev: Event{Kind: EndOfPartition}})
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := op.released.Load(); n != 1 {
		t.Fatalf("the abandoned snapshot was released %d times, want once", n)
	}
	resp.mu.Lock()
	defer resp.mu.Unlock()
	for _, a := range resp.acks {
		if a.Err == nil {
			t.Fatalf("an abandoned unaligned snapshot was acknowledged: %+v", a)
		}
	}
}

// TestInflightStaleBarrier: the records a receiving network pump overtook
// with barrier 5 stay input state of checkpoint 5 when a stale barrier 4
// (of an aborted checkpoint, which barrier 5 overtook at the sender)
// arrives behind it before checkpoint 5's input state is taken.
func TestInflightStaleBarrier(t *testing.T) {
	ch := NewChannel[int](4, make(chan struct{}, 1), nil)
	var seen []int
	in := NewInput(ch, collectOutput{&seen}, nil)
	in.SetChannelState(codec.Int(), ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, false), nil, nil)
	ch.queue <- envelope[int]{ev: Event{Kind: Barrier, ID: 5, Unaligned: true, inflight: &inflightRecords[int]{recs: []int{1, 2}}}}
	ch.queue <- envelope[int]{ev: Event{Kind: Barrier, ID: 4, Unaligned: true, inflight: &inflightRecords[int]{recs: []int{9}}}}
	in.Poll()
	in.Poll()
	d := in.TakeRecording(5)
	if d == nil || d.Len() != 2 {
		t.Fatalf("input state of checkpoint 5: %v, want the 2 records its barrier overtook", d)
	}
}

// TestInflightKeptOverAbort: barrier 5's overtaken records survive the
// abort of checkpoint 4's alignment, which that barrier causes (the task
// takes 4's recording to drop it) before 5's input state is taken.
func TestInflightKeptOverAbort(t *testing.T) {
	ch := NewChannel[int](4, make(chan struct{}, 1), nil)
	var seen []int
	in := NewInput(ch, collectOutput{&seen}, nil)
	in.SetChannelState(codec.Int(), ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, false), nil, nil)
	ch.queue <- envelope[int]{ev: Event{Kind: Barrier, ID: 5, Unaligned: true, inflight: &inflightRecords[int]{recs: []int{1, 2}}}}
	in.Poll()
	in.TakeRecording(4) // abortPending(4)
	if d := in.TakeRecording(5); d == nil || d.Len() != 2 {
		t.Fatalf("input state of checkpoint 5: %v, want the 2 records its barrier overtook", d)
	}
}

// finishLog is a Responder that, once the source finished, triggers a
// checkpoint and then lets the task end.
type finishLog struct {
	ackLog
	task *Task
}

func (r *finishLog) SourceFinished(string) {
	go func() {
		_ = r.task.Post(context.Background(), r.task.TriggerCheckpoint(9, time.Now().UnixMilli(), nil))
		_ = r.task.Post(context.Background(), r.task.Finish())
	}()
}

// TestFinishedSourceTriggersAligned: a source task whose input ended
// sends aligned barriers even with unaligned checkpoints on, so that the
// final checkpoint holds no output state (the sinks' end-of-input flush
// commits those records: a restore of that checkpoint would replay them
// once more). The records queued in front of the barrier stay in front.
func TestFinishedSourceTriggersAligned(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint("timeout=", timeout), func(t *testing.T) {
			c, _ := codec.Of[int]()
			ch := NewChannel[int](64, make(chan struct{}, 1), nil)
			w := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 4})
			w.SetChannelState(c, []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, nil, nil)
			src := &countSource{end: 40, batch: 10, out: w, ready: make(chan struct{})}
			resp := &finishLog{}
			task := NewTask(TaskConfig{Name: "src", Parallelism: 1, Source: src, Writers: []Writer{w},
				Chain: []Chained{{Name: "src", Op: nopOp{}}},
				Checkpointing: &CheckpointConfig{Mode: checkpoint.ExactlyOnce, Responder: resp, Unaligned: true, AlignedTimeout: timeout,
					Operators: []OperatorInfo{{UID: "src", Name: "src"}}}})
			resp.task = task
			if err := task.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			resp.mu.Lock()
			acks := slices.Clone(resp.acks)
			resp.mu.Unlock()
			if len(acks) != 1 || acks[0].Err != nil || acks[0].Unaligned || acks[0].PersistedData != 0 {
				t.Fatalf("acks %+v: want one aligned ack of checkpoint 9 without persisted data", acks)
			}
			var recs int
			var order []string
			for len(ch.queue) > 0 {
				env := <-ch.queue
				if env.recs != nil {
					recs += len(env.recs)
					continue
				}
				order = append(order, fmt.Sprintf("%s(after %d)", env.ev.Kind, recs))
			}
			if recs != 40 || len(order) == 0 || order[0] != "barrier(after 40)" {
				t.Fatalf("queue: %d records, events %v: want the barrier behind all 40", recs, order)
			}
		})
	}
}

// TestConversionWhileConsumed: a timed barrier converted while its
// consumer reads the queue at full speed. Whatever the interleaving, the
// consumer reads no record queued behind the barrier before it; the
// records queued in front of it are each either read before it or its
// output state, never both and never neither (a drain the consumer could
// read from the middle of lost or repeated them: the exactly-once harness
// with aligned-checkpoint timeouts, about 1 run in 500 under load).
func TestConversionWhileConsumed(t *testing.T) {
	c, _ := codec.Of[int]()
	const front, behind = 20, 5
	for trial := range 2000 {
		ch := NewChannel[int](64, make(chan struct{}, 1), nil)
		w := NewRecordWriter([]*Channel[int]{ch}, WriterOptions[int]{Partitioner: graph.Forward, BatchSize: 1})
		w.SetChannelState(c, []checkpoint.ChannelStateHandle{ChannelStateHandleFor("a->b/0", 0, 1, 0, 1, true)}, nil, nil)
		var before, after []int
		got := &before
		in := NewInput(ch, outputFunc(func(r int, _ int64) { *got = append(*got, r) }), nil)
		consumed := make(chan struct{})
		go func() {
			defer close(consumed)
			for len(before)+len(after) < front+behind {
				ev, isEvent, ok := in.Poll()
				if ok && isEvent && ev.Kind == Barrier {
					got = &after
				}
			}
		}()
		for i := range front {
			w.Emit(i, NoTimestamp)
		}
		tb := w.SendTimed(Event{Kind: Barrier, ID: 1, AlignedTimeoutMs: 1}, time.Now())
		for i := range behind {
			w.Emit(100+i, NoTimestamp)
		}
		select { // taken by the consumer first: its timer stopped
		case <-tb.Due():
		case <-tb.Done():
		}
		w.ConvertDue()
		<-consumed
		<-tb.Done()
		var state []int
		data, _ := tb.Converted()
		for _, d := range data {
			recs, _, err := DecodeChannelRecords(c, d.AppendTo(nil), int64(d.Len()), !d.Handle().NoTimestamps)
			if err != nil {
				t.Fatal(err)
			}
			state = append(state, recs...)
		}
		for _, r := range before {
			if r >= 100 {
				t.Fatalf("trial %d: record %d, queued behind the barrier, read before it (before %v, state %v)", trial, r, before, state)
			}
		}
		front := slices.Sorted(slices.Values(append(slices.Clone(before), state...)))
		if want := slices.Collect(func(yield func(int) bool) {
			for i := range 20 {
				yield(i)
			}
		}); !slices.Equal(front, want) {
			t.Fatalf("trial %d: read before the barrier %v plus output state %v: want each of 0..19 once", trial, before, state)
		}
	}
}
