package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/examples/wordcount"
	"github.com/weirstream/weir/internal/testutil/multiset"
)

// wordLines returns n lines of words and the exactly-once output of the
// word count over them: "word,k" for k = 1..count(word).
func wordLines(n int, seed uint64) (lines, want []string) {
	rng := rand.New(rand.NewPCG(seed, 1))
	counts := map[string]int{}
	for range n {
		var ws []string
		for range 1 + rng.IntN(4) {
			w := fmt.Sprintf("w%d", rng.IntN(300))
			ws = append(ws, w)
			counts[w]++
			want = append(want, fmt.Sprintf("%s,%d", w, counts[w]))
		}
		lines = append(lines, strings.Join(ws, " "))
	}
	return lines, sorted(want)
}

// runWordCount runs the word count from topic "in" to topic "out" of c as
// a weir job, exactly-once, with restarts; fail, when set, is called for
// every line and may panic to fail the job.
func runWordCount(t *testing.T, c *kfake.Cluster, fail func(n int64), sinkClient ...kgo.Opt) *weir.JobClient {
	t.Helper()
	opts := weir.Options{Parallelism: 2, Restart: "fixed-delay:attempts=20,delay=20ms", JobID: "wc"}
	opts.Checkpointing.Interval = 50 * time.Millisecond
	env := weir.NewEnvironment(opts)
	src := NewSource(sourceOpts(c, "in"), String())
	so := sinkOpts(c, ExactlyOnce)
	so.ClientOptions = sinkClient
	sink := NewSink(so, func(s string) (Record, error) {
		w, _, _ := strings.Cut(s, ",")
		return Record{Key: []byte(w), Value: []byte(s)}, nil
	})
	var seen atomic.Int64
	lines := env.FromSource("in", src).UID("in").Map("fail", func(s string) string {
		if fail != nil {
			fail(seen.Add(1))
		}
		return s
	})
	wordcount.Build(lines).SinkTo("out", sink).UID("out")
	job, err := env.ExecuteAsync(t.Context(), "wc")
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func checkExactlyOnce(t *testing.T, c *kfake.Cluster, want []string) {
	t.Helper()
	got := consume(t, c, "out", true)
	if missing, extra := multiset.Diff(want, got); len(missing)+len(extra) > 0 {
		t.Fatalf("read_committed: %d records, want %d: %d lost (%v), %d duplicated (%v)",
			len(got), len(want), len(missing), missing[:min(5, len(missing))], len(extra), extra[:min(5, len(extra))])
	}
	uncommitted := consume(t, c, "out", false)
	t.Logf("read_committed sees %d records, each once; read_uncommitted sees %d (%d from aborted transactions)",
		len(got), len(uncommitted), len(uncommitted)-len(got))
}

// TestJobExactlyOnceWithFailures runs the word count through a real weir
// job that fails twice in the middle (a panic in an operator) and
// restarts from its checkpoints: the output topic, read with
// read_committed, holds each word,k exactly once.
func TestJobExactlyOnceWithFailures(t *testing.T) {
	c := newCluster(t, 3, "in", "out")
	lines, want := wordLines(6000, 1)
	produce(t, c, "in", 3, lines...)
	var fails atomic.Int32
	job := runWordCount(t, c, func(n int64) {
		if (n == 2000 || n == 4000) && fails.Add(1) <= 2 {
			panic("injected failure")
		}
	})
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if fails.Load() < 2 {
		t.Fatalf("%d failures injected, want 2", fails.Load())
	}
	checkExactlyOnce(t, c, want)
}

// TestJobExactlyOnceBrokerFaults injects faults at the broker while the
// job runs: produce requests that fail (connection dropped, and an error
// response), an EndTxn that fails once (the commit fails, the job
// restarts and commits again from the restored checkpoint), and a fenced
// producer (another producer takes a transactional id in use). The output
// must hold each word,k exactly once.
func TestJobExactlyOnceBrokerFaults(t *testing.T) {
	c := newCluster(t, 3, "in", "out")
	lines, want := wordLines(6000, 2)
	produce(t, c, "in", 3, lines...)

	var produces, endTxns atomic.Int32
	var mu sync.Mutex
	var txnToFence string
	fenced := make(chan string, 1)
	thiefDone := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if pr.TransactionID == nil {
			return nil, nil, false
		}
		switch produces.Add(1) {
		case 5:
			return nil, errors.New("injected: connection dropped"), true
		case 15:
			resp := pr.ResponseKind().(*kmsg.ProduceResponse)
			for _, tp := range pr.Topics {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic = tp.Topic
				for _, p := range tp.Partitions {
					rp := kmsg.NewProduceResponseTopicPartition()
					rp.Partition = p.Partition
					rp.ErrorCode = kerr.InvalidRecord.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil, true
		case 30:
			mu.Lock()
			txnToFence = *pr.TransactionID
			mu.Unlock()
			select {
			case fenced <- *pr.TransactionID:
				// Hold this produce until the thief took the id (its
				// request runs on another connection): the transaction
				// is then fenced while still open, before its
				// checkpoint could pre-commit it. Fenced after the
				// pre-commit, it could not be committed at all (data
				// loss by Kafka's rules, which the sink reports).
				c.SleepControl(func() { <-thiefDone })
			default:
			}
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		er := req.(*kmsg.EndTxnRequest)
		if !er.Commit || endTxns.Add(1) != 3 {
			return nil, nil, false
		}
		resp := er.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil, true
	})
	thief := newClient(t, c)
	go func() {
		defer close(thiefDone)
		id, ok := <-fenced
		if !ok {
			return
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		req.RequestWith(context.Background(), thief)
	}()
	// Slow the job down (about a second) and make the producer send small
	// requests, so that the faults land in the middle of the run.
	slow := func(n int64) {
		if n%6 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	job := runWordCount(t, c, slow, kgo.ProducerBatchMaxBytes(2000), kgo.MaxProduceRequestsInflightPerBroker(1))
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	close(fenced)
	if produces.Load() < 30 || endTxns.Load() < 3 {
		t.Fatalf("faults not all injected: %d transactional produce requests, %d EndTxn commits", produces.Load(), endTxns.Load())
	}
	mu.Lock()
	t.Logf("fenced %q; %d transactional produce requests, %d EndTxn commits", txnToFence, produces.Load(), endTxns.Load())
	mu.Unlock()
	checkExactlyOnce(t, c, want)
}
