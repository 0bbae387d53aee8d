package nexmark

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/connector"
)

// TestSplitsUnion runs the source with parallelism 1 to 4: subtask k must
// emit events k, k+p, k+2p, … of the single-generator stream, in order, so
// that the union of the subtasks' events is that stream.
func TestSplitsUnion(t *testing.T) {
	const n = 10_007
	cfg := Config{Events: n, Seed: 3, BatchSize: 100}
	want := generate(t, cfg, 0, n)
	for p := 1; p <= 4; p++ {
		got := runSource(t, Source(cfg), p)
		var union []Event
		for k := range p {
			var part []Event
			for i := k; i < n; i += p {
				part = append(part, want[i])
			}
			if d := diffEvents(got[k], part); d != "" {
				t.Fatalf("parallelism %d, subtask %d: %s", p, k, d)
			}
			union = append(union, got[k]...)
		}
		if len(union) != n {
			t.Errorf("parallelism %d: %d events in all, want %d", p, len(union), n)
		}
	}
}

// TestSplitsMoreSubtasksThanEvents leaves out the splits without events.
func TestSplitsMoreSubtasksThanEvents(t *testing.T) {
	for _, mode := range []SplitMode{SplitInterleaved, SplitFlink} {
		splits, err := Source(Config{Events: 2, Split: mode}).Splits(t.Context(), 4)
		if err != nil {
			t.Fatal(err)
		}
		got := runSource(t, Source(Config{Events: 2, Split: mode}), 4)
		total := 0
		for _, evs := range got {
			total += len(evs)
		}
		if mode == SplitInterleaved && len(splits) != 2 || mode == SplitFlink && len(splits) != 1 || total != 2 {
			t.Errorf("%v: %d splits, %d events; want 2 events", mode, len(splits), total)
		}
	}
}

// TestSplitsFlink checks Flink's split: contiguous ID ranges of
// Events/p events (the last takes the rest), all starting at the same event
// number, on a timeline p times slower. The union of the event IDs, hence
// of the person and auction IDs, is that of the single generator.
func TestSplitsFlink(t *testing.T) {
	const n = 5_003
	cfg := Config{Events: n, Split: SplitFlink, FirstEventID: 1, FirstEventNumber: 1, Rate: 1000}
	single := generate(t, cfg, 0, n)
	if got := runSource(t, Source(cfg), 1); diffEvents(got[0], single) != "" {
		t.Fatalf("parallelism 1 differs from the single generator: %s", diffEvents(got[0], single))
	}
	ids := func(events []Event) (persons, auctions []int64) {
		for _, ev := range events {
			switch ev.Type {
			case PersonEvent:
				persons = append(persons, ev.Person.ID)
			case AuctionEvent:
				auctions = append(auctions, ev.Auction.ID)
			}
		}
		slices.Sort(persons)
		slices.Sort(auctions)
		return persons, auctions
	}
	wantP, wantA := ids(single)
	for p := 2; p <= 4; p++ {
		got := runSource(t, Source(cfg), p)
		var all []Event
		for k, events := range got {
			size := int64(n / p)
			if k == p-1 {
				size = n - size*int64(p-1)
			}
			if int64(len(events)) != size {
				t.Fatalf("parallelism %d, subtask %d: %d events, want %d", p, k, len(events), size)
			}
			// Index i has event number 1+i, 1000/p events per second.
			for i, ev := range events {
				if want := BeamBaseTime + int64(float64(1+i)*(1e6/1000*float64(p)))/1000; ev.DateTime() != want {
					t.Fatalf("parallelism %d, subtask %d, event %d at %d, want %d", p, k, i, ev.DateTime(), want)
				}
			}
			all = append(all, events...)
		}
		if gotP, gotA := ids(all); !slices.Equal(gotP, wantP) || !slices.Equal(gotA, wantA) {
			t.Errorf("parallelism %d: person and auction IDs differ from the single generator's", p)
		}
	}
}

// TestSnapshotRestore cuts each subtask's output at several points: a
// reader restored from a snapshot taken at the cut must emit exactly what
// the original reader emits after it.
func TestSnapshotRestore(t *testing.T) {
	for _, cfg := range []Config{
		{Events: 3_001, BatchSize: 7},
		{Events: 3_001, BatchSize: 7, Split: SplitFlink, OutOfOrderGroupSize: 50},
	} {
		const p = 3
		src := Source(cfg)
		splits, err := src.Splits(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		full := runSource(t, src, p)
		assigned := assignSplits(splits, p)
		for k := range p {
			for _, cut := range []int{0, 1, 7, 8, 500, len(full[k]) - 1, len(full[k])} {
				r := newReader(t, src, k, p, assigned[k])
				var e sliceEmitter
				if _, err := pollUntil(r, &e, cut); err != nil {
					t.Fatal(err)
				}
				head := e.events
				snap, err := r.Snapshot(1)
				if err != nil {
					t.Fatal(err)
				}
				tail := drain(t, r)
				restored := drain(t, newReader(t, src, k, p, snap))
				if d := diffEvents(slices.Concat(head, tail), full[k]); d != "" {
					t.Errorf("%v subtask %d cut %d: head + tail: %s", cfg.Split, k, cut, d)
				}
				if d := diffEvents(restored, tail); d != "" {
					t.Errorf("%v subtask %d cut %d: restored: %s", cfg.Split, k, cut, d)
				}
				if len(tail) == 0 && len(snap) != 0 {
					t.Errorf("%v subtask %d: snapshot at the end holds %d splits, want none", cfg.Split, k, len(snap))
				}
			}
		}
	}
}

// TestRestoreOtherParallelism restores a checkpoint of three subtasks into
// one reader: it must go on with the single-generator stream, in order.
func TestRestoreOtherParallelism(t *testing.T) {
	const n = 2_000
	cfg := Config{Events: n, BatchSize: 10}
	src := Source(cfg)
	splits, err := src.Splits(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	var snap []connector.SplitState
	for k, cut := range []int{100, 130, 90} {
		r := newReader(t, src, k, 3, splits[k:k+1])
		var e sliceEmitter
		if _, err := pollUntil(r, &e, cut); err != nil {
			t.Fatal(err)
		}
		st, err := r.Snapshot(1)
		if err != nil {
			t.Fatal(err)
		}
		snap = append(snap, st...)
	}
	// Subtask 2 stopped first, after event number 3·89+2 = 269.
	got := drain(t, newReader(t, src, 0, 1, snap))
	var want []Event
	for i, ev := range generate(t, cfg, 0, n) {
		if k := i % 3; i/3 >= []int{100, 130, 90}[k] {
			want = append(want, ev)
		}
	}
	if d := diffEvents(got, want); d != "" {
		t.Fatal(d)
	}
}

func TestUnboundedSource(t *testing.T) {
	src := Source(Config{BatchSize: 50})
	if src.Boundedness() != connector.Unbounded {
		t.Fatalf("Boundedness = %v", src.Boundedness())
	}
	splits, err := src.Splits(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, 1, 2, splits[1:])
	var e sliceEmitter
	for range 3 {
		if st, err := r.Poll(&e); err != nil || st != connector.MoreAvailable {
			t.Fatalf("Poll = %v, %v", st, err)
		}
	}
	want := generate(t, Config{}, 0, 300)
	var odd []Event
	for i := 1; i < 300; i += 2 {
		odd = append(odd, want[i])
	}
	if d := diffEvents(e.events, odd); d != "" {
		t.Fatal(d)
	}
	for i, ev := range e.events {
		if e.ts[i] != ev.DateTime() {
			t.Fatalf("event %d emitted with timestamp %d, DateTime %d", i, e.ts[i], ev.DateTime())
		}
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) != 1 || binary.BigEndian.Uint64(snap[0].Position) != 301 {
		t.Errorf("snapshot = %+v, want split nexmark-1 at event number 301", snap)
	}
}

// TestRateLimited checks that a rate-limited reader emits each event when
// its event time comes, counted from the first event.
func TestRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 1000 events/s over two subtasks: a subtask's events are 2 ms apart.
		src := Source(Config{Events: 20, Rate: 1000, RateLimited: true})
		splits, err := src.Splits(t.Context(), 2)
		if err != nil {
			t.Fatal(err)
		}
		r := newReader(t, src, 1, 2, splits[1:])
		start := time.Now()
		var at []time.Duration
		e := &timedEmitter{emit: func() { at = append(at, time.Since(start)) }}
		for {
			st, err := r.Poll(e)
			if err != nil {
				t.Fatal(err)
			}
			if st == connector.EndOfInput {
				break
			}
			if st == connector.NothingAvailable {
				<-r.Available()
			}
		}
		var want []time.Duration
		for i := range 10 {
			want = append(want, time.Duration(2*i)*time.Millisecond)
		}
		if !slices.Equal(at, want) {
			t.Errorf("emitted at %v, want %v", at, want)
		}
	})
}

type timedEmitter struct{ emit func() }

func (e *timedEmitter) Emit(Event)          { e.emit() }
func (e *timedEmitter) EmitAt(Event, int64) { e.emit() }

func TestAddSplitsMalformed(t *testing.T) {
	cfg := Config{Events: 100}
	src := Source(cfg)
	splits, err := src.Splits(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	good := splits[0]
	other, err := Source(Config{Events: 100, Seed: 1}).Splits(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	withPos := func(st connector.SplitState, pos []byte) connector.SplitState { st.Position = pos; return st }
	pos := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	tests := []struct {
		name    string
		split   connector.SplitState
		wantErr string
	}{
		{"no data", connector.SplitState{ID: "x"}, `split "x": Data is not a version-1 nexmark split`},
		{"other config", other[1], `split "nexmark-1" was made by a nexmark source of another configuration`},
		{"short position", withPos(splits[1], []byte{1, 2}), "Position has 2 bytes, want 8"},
		{"off the split", withPos(splits[1], pos(4)), "event number 4 is not one of the split's"},
		{"past the end", withPos(splits[1], pos(103)), "event number 103 is not one of the split's"},
		{"duplicate", good, `split "nexmark-0" assigned twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := src.NewReader(readerContext(0, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			err = r.AddSplits([]connector.SplitState{good, tt.split})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("AddSplits: err = %v, want one containing %q", err, tt.wantErr)
			}
			if snap, _ := r.Snapshot(1); len(snap) != 0 {
				t.Errorf("after a failed AddSplits the reader holds %d splits", len(snap))
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg     Config
		wantErr string
	}{
		{Config{Events: -1}, "Config.Events must be >= 0"},
		{Config{Rate: -1}, "Config.Rate must be"},
		{Config{Rate: 1e-9}, "Config.Rate must be at least"},
		{Config{FirstEventID: -1}, "Config.FirstEventID must be >= 0"},
		{Config{BidProportion: -2}, "Config.BidProportion must be in [1, 1048576]"},
		{Config{AvgBidByteSize: MaxByteSize + 1}, "Config.AvgBidByteSize must be in"},
		{Config{HotAuctionRatio: -1}, "Config.HotAuctionRatio must be in"},
		{Config{BatchSize: MaxBatchSize + 1}, "Config.BatchSize must be in"},
		{Config{Split: 7}, "Config.Split must be SplitInterleaved or SplitFlink"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Validate(%+v) = %v, want an error containing %q", tt.cfg, err, tt.wantErr)
		}
		if _, err := Source(tt.cfg).Splits(t.Context(), 1); err == nil {
			t.Errorf("Splits of %+v: no error", tt.cfg)
		}
	}
	if err := (&Config{}).Validate(); err != nil {
		t.Errorf("the zero Config: %v", err)
	}
}
