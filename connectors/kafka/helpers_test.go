package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/testutil/kafkatest"
)

// newCluster starts an in-process kfake broker on loopback with the given
// topics (of partitions partitions each).
func newCluster(t testing.TB, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newClient(t testing.TB, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return kafkatest.Client(t, c.ListenAddrs(), opts...)
}

// produce writes values to the topic round-robin over its partitions,
// synchronously.
func produce(t testing.TB, c *kfake.Cluster, topic string, partitions int32, values ...string) {
	t.Helper()
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(v)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consume reads every record of the topic up to its end offsets as they
// are now, with the given isolation, and returns the values sorted.
func consume(t testing.TB, c *kfake.Cluster, topic string, committed bool) []string {
	t.Helper()
	out := kafkatest.Consume(t, c.ListenAddrs(), topic, committed, 20*time.Second)
	sort.Strings(out)
	return out
}

type sliceEmitter[T any] struct{ recs []T }

func (e *sliceEmitter[T]) Emit(rec T)             { e.recs = append(e.recs, rec) }
func (e *sliceEmitter[T]) EmitAt(rec T, ts int64) { e.recs = append(e.recs, rec) }

func readerContext(subtask, parallelism int) connector.ReaderContext {
	return connector.ReaderContext{Subtask: subtask, Parallelism: parallelism,
		Logger: slog.New(slog.DiscardHandler), RequestCheckpoint: func() {}}
}

// pollUntil polls r until e holds n records (n < 0: until EndOfInput).
func pollUntil[T any](r connector.Reader[T], e *sliceEmitter[T], n int) (connector.Status, error) {
	deadline := time.After(20 * time.Second)
	for n < 0 || len(e.recs) < n {
		st, err := r.Poll(e)
		if err != nil {
			return st, err
		}
		if n >= 0 && len(e.recs) >= n {
			return st, nil // an unbounded reader may have nothing more
		}
		switch st {
		case connector.EndOfInput:
			return st, nil
		case connector.NothingAvailable:
			select {
			case <-r.Available():
			case <-deadline:
				return st, errors.New("reader stalled")
			}
		}
	}
	return connector.MoreAvailable, nil
}

func newReader[T any](t *testing.T, src connector.Source[T], splits []connector.SplitState) connector.Reader[T] {
	t.Helper()
	r, err := src.NewReader(readerContext(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.AddSplits(splits); err != nil {
		t.Fatal(err)
	}
	r.NoMoreSplits()
	return r
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
