package datagen

import (
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/connector"
)

// timedEmitter records when each record was emitted, relative to start.
type timedEmitter struct {
	start time.Time
	recs  []int64
	at    []time.Duration
}

func (e *timedEmitter) Emit(rec int64) {
	e.recs = append(e.recs, rec)
	e.at = append(e.at, time.Since(e.start))
}
func (e *timedEmitter) EmitAt(rec int64, ts int64) { e.Emit(rec) }

func ms(ds ...int) []time.Duration {
	var out []time.Duration
	for _, d := range ds {
		out = append(out, time.Duration(d)*time.Millisecond)
	}
	return out
}

func TestRateLimitPerSubtask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 10 records/s over two subtasks: one record every 200ms each.
		src := Generator(10, func(i int64) int64 { return i }).WithOptions(Options{RecordsPerSecond: 10})
		splits, err := src.Splits(t.Context(), 2)
		if err != nil {
			t.Fatal(err)
		}
		r := newReader(t, src, 1, 2, splits[1:])
		e := &timedEmitter{start: time.Now()}
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
		if want := []int64{5, 6, 7, 8, 9}; !slices.Equal(e.recs, want) {
			t.Errorf("records = %v, want %v", e.recs, want)
		}
		if want := ms(0, 200, 400, 600, 800); !slices.Equal(e.at, want) {
			t.Errorf("emitted at %v, want %v", e.at, want)
		}
	})
}

func TestRateLimitSharedBySubtasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The rate is the whole source's: 20 records at 10/s take about two
		// seconds whatever the parallelism p. Each subtask emits 20/p
		// records, one every p/10 seconds, the first at once.
		for _, tc := range []struct {
			parallelism int
			want        time.Duration
		}{
			{1, 1900 * time.Millisecond},
			{2, 1800 * time.Millisecond},
			{4, 1600 * time.Millisecond},
		} {
			src := Sequence(0, 19).WithOptions(Options{RecordsPerSecond: 10})
			start := time.Now()
			got := runSource(t, src, tc.parallelism)
			if elapsed := time.Since(start); elapsed != tc.want {
				t.Errorf("parallelism %d: took %v, want %v", tc.parallelism, elapsed, tc.want)
			}
			if all := slices.Concat(got...); !slices.Equal(all, seq(0, 19)) {
				t.Errorf("parallelism %d: records = %v", tc.parallelism, got)
			}
		}
	})
}

func TestRateLimitAvailableFiresWhenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := Generator(-1, func(i int64) int64 { return i }).WithOptions(Options{RecordsPerSecond: 1})
		splits, err := src.Splits(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		r := newReader(t, src, 0, 1, splits)
		e := &timedEmitter{start: time.Now()}
		for i := range 3 {
			if st, err := r.Poll(e); st != connector.MoreAvailable || err != nil {
				t.Fatalf("Poll %d = %v, %v; want MoreAvailable after one record", i, st, err)
			}
			if st, err := r.Poll(e); st != connector.NothingAvailable || err != nil {
				t.Fatalf("Poll %d over the rate = %v, %v; want NothingAvailable", i, st, err)
			}
			ch := r.Available()
			time.Sleep(999 * time.Millisecond)
			synctest.Wait()
			select {
			case <-ch:
				t.Fatalf("Available fired %v after the record, before it was due", time.Since(e.start))
			default:
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			select {
			case <-ch:
			default:
				t.Fatalf("Available did not fire when the next record was due")
			}
		}
		if want := []int64{0, 1, 2}; !slices.Equal(e.recs, want) {
			t.Errorf("records = %v, want %v", e.recs, want)
		}
		if want := ms(0, 1000, 2000); !slices.Equal(e.at, want) {
			t.Errorf("emitted at %v, want %v", e.at, want)
		}
	})
}

func TestRateLimitCatchUpIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := Generator(-1, func(i int64) int64 { return i }).WithOptions(Options{RecordsPerSecond: 10})
		splits, err := src.Splits(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		r := newReader(t, src, 0, 1, splits)
		var e sliceEmitter[int64]
		if _, err := r.Poll(&e); err != nil {
			t.Fatal(err)
		}
		// A task stalled for 5s catches up one second of records (10) plus
		// the one due now, not 50.
		time.Sleep(5 * time.Second)
		if _, err := r.Poll(&e); err != nil {
			t.Fatal(err)
		}
		if want := seq(0, 11); !slices.Equal(e.recs, want) {
			t.Errorf("records = %v, want %v", e.recs, want)
		}
		if st, _ := r.Poll(&e); st != connector.NothingAvailable {
			t.Errorf("Poll after catching up = %v, want NothingAvailable", st)
		}
	})
}

func TestRateLimitRespectsBatchSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := Generator(-1, func(i int64) int64 { return i }).WithOptions(Options{RecordsPerSecond: 100, BatchSize: 3})
		splits, err := src.Splits(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		r := newReader(t, src, 0, 1, splits)
		var e sliceEmitter[int64]
		if _, err := r.Poll(&e); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // 10 more records due, in batches of 3
		var counts []int
		for {
			before := len(e.recs)
			st, err := r.Poll(&e)
			if err != nil {
				t.Fatal(err)
			}
			counts = append(counts, len(e.recs)-before)
			if st == connector.NothingAvailable {
				break
			}
		}
		if want := []int{3, 3, 3, 1, 0}; !slices.Equal(counts, want) {
			t.Errorf("records per Poll = %v, want %v", counts, want)
		}
	})
}

func TestCloseStopsRateTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := Generator(-1, func(i int64) int64 { return i }).WithOptions(Options{RecordsPerSecond: 1})
		splits, err := src.Splits(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		r, err := src.NewReader(readerContext(0, 1))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.AddSplits(splits); err != nil {
			t.Fatal(err)
		}
		var e sliceEmitter[int64]
		r.Poll(&e)
		if st, _ := r.Poll(&e); st != connector.NothingAvailable {
			t.Fatalf("Poll = %v, want NothingAvailable", st)
		}
		ch := r.Available()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-ch:
			t.Error("the rate timer fired after Close")
		default:
		}
	})
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		opts    Options
		wantErr string
	}{
		{Options{}, ""},
		{Options{RecordsPerSecond: 0.5, BatchSize: MaxBatchSize}, ""},
		{Options{RecordsPerSecond: -1}, "Options.RecordsPerSecond"},
		{Options{RecordsPerSecond: math.NaN()}, "Options.RecordsPerSecond"},
		{Options{RecordsPerSecond: math.Inf(1)}, "Options.RecordsPerSecond"},
		{Options{BatchSize: -1}, "Options.BatchSize must be in [1, 65536]"},
		{Options{BatchSize: MaxBatchSize + 1}, "Options.BatchSize must be in [1, 65536]"},
	}
	for _, tt := range tests {
		err := tt.opts.Validate()
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%+v.Validate() = %v, want %q", tt.opts, err, tt.wantErr)
		}
	}
	// A source with invalid options refuses to start.
	src := Sequence(1, 2).WithOptions(Options{BatchSize: -3})
	if _, err := src.Splits(t.Context(), 1); err == nil || !strings.Contains(err.Error(), "BatchSize") {
		t.Errorf("Splits with a bad BatchSize: err = %v", err)
	}
	if _, err := src.NewReader(readerContext(0, 1)); err == nil || !strings.Contains(err.Error(), "BatchSize") {
		t.Errorf("NewReader with a bad BatchSize: err = %v", err)
	}
}

func TestEnsureDefaults(t *testing.T) {
	var o Options
	if got := o.EnsureDefaults().BatchSize; got != DefaultBatchSize {
		t.Errorf("default BatchSize = %d, want %d", got, DefaultBatchSize)
	}
}
