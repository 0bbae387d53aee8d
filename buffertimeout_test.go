package weir_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
)

// TestBufferTimeoutOption: a source that is never idle, chained to a
// selective filter (1 record in 100 passes; the pair runs at about 100,000
// records a second, so a batch of 1024 fills in about a second), sends
// what passes across a rebalance. With a buffer timeout, the first record
// crosses long before its batch fills; with NoBufferTimeout it crosses
// with the full batch.
func TestBufferTimeoutOption(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		full    bool // the first record crosses with a full batch
	}{
		{"default", 0, false},
		{"20ms", 20 * time.Millisecond, false},
		{"off", weir.NoBufferTimeout, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Options{Parallelism: 1, BufferTimeout: tc.timeout})
			var passed atomic.Int64
			first := make(chan int64, 1)
			env.FromSource("forever", datagen.Generator(-1, func(i int64) int64 { return i })).
				Filter("selective", func(v int64) bool {
					if v%100 != 0 {
						return false
					}
					time.Sleep(time.Millisecond)
					passed.Add(1)
					return true
				}).
				Rebalance().
				Map("first", func(v int64) int64 {
					select {
					case first <- passed.Load():
					default:
					}
					return v
				}).
				SinkTo("out", collect.New[int64]())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- env.Execute(ctx, "buffer-timeout") }()
			select {
			case n := <-first:
				if tc.full && n < 1024 {
					t.Errorf("the first record crossed after %d passed the filter, want a full batch (1024) with NoBufferTimeout", n)
				}
				if !tc.full && n >= 1024 {
					t.Errorf("the first record crossed after %d passed the filter, want fewer than a batch (1024): the buffer timeout did not flush", n)
				}
			case err := <-done:
				t.Fatalf("the job ended (%v) before a record crossed", err)
			case <-time.After(30 * time.Second):
				t.Fatalf("no record crossed the rebalance in 30s (%d passed the filter)", passed.Load())
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Execute = %v, want context.Canceled", err)
			}
		})
	}
}

func TestBufferTimeoutValidation(t *testing.T) {
	for _, d := range []time.Duration{time.Microsecond, time.Millisecond - 1} {
		o := weir.Options{BufferTimeout: d}
		o.EnsureDefaults()
		if err := o.Validate(); err == nil {
			t.Errorf("BufferTimeout %v: Validate accepted it, want an error", d)
		}
	}
	for _, d := range []time.Duration{0, weir.NoBufferTimeout, -time.Second, time.Millisecond, time.Minute} {
		o := weir.Options{BufferTimeout: d}
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			t.Errorf("BufferTimeout %v: %v", d, err)
		}
	}
}
