package weir_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestExchangeTCP runs a keyed, checkpointed job with Options.Exchange
// "tcp": its records cross the network data plane on 127.0.0.1 (the log
// says how many channels and bytes), and the output is exactly the
// expected one. With WEIR_EXCHANGE=tcp the whole suite runs this way.
func TestExchangeTCP(t *testing.T) {
	const n = 20000
	logs := &syncBuffer{}
	opts := weir.Options{Parallelism: 2, Exchange: "tcp", Logger: slog.New(slog.NewTextHandler(logs, nil))}
	opts.Checkpointing.Interval = 20 * time.Millisecond
	env := weir.NewEnvironment(opts)
	src := datagen.Generator(n, func(i int64) string { return fmt.Sprint("k", i%37) })
	sink := collect.Transactional[string]()
	env.FromSource("src", src).Parallelism(1).
		KeyBy(func(s string) string { return s }).
		Process("count", &runningCount{}).
		SinkTo("out", sink)
	c, err := env.ExecuteAsync(context.Background(), "tcp")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	var want []string
	for i := range n {
		k := fmt.Sprint("k", i%37)
		counts[k]++
		want = append(want, fmt.Sprintf("%s,%d", k, counts[k]))
	}
	got := sink.Results()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	deadline := time.Now().Add(10 * time.Second)
	re := regexp.MustCompile(`exchange over tcp closed".* bytes=(\d+)`)
	for re.FindStringSubmatch(logs.String()) == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	m := re.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no tcp exchange in the log:\n%s", logs.String())
	}
	if b, _ := strconv.Atoi(m[1]); b < n*3 {
		t.Fatalf("the tcp exchange carried %d bytes for %d records: the records did not go through it", b, n)
	}
	if ok, _ := regexp.MatchString(`exchange over tcp" .*addr=127\.0\.0\.1:\d+ channels=[1-9]`, logs.String()); !ok {
		t.Fatalf("no bridged channel in the log:\n%s", logs.String())
	}
}

func TestExchangeOptionValidate(t *testing.T) {
	env := weir.NewEnvironment(weir.Options{Exchange: "carrier-pigeon"})
	env.FromSource("src", datagen.Generator(1, func(i int64) int64 { return i })).SinkTo("out", collect.Transactional[int64]())
	if _, err := env.ExecuteAsync(context.Background(), "bad"); err == nil || !regexp.MustCompile(`Options.Exchange is "carrier-pigeon".*want "local" or "tcp"`).MatchString(err.Error()) {
		t.Fatalf("got %v, want an error naming Options.Exchange", err)
	}
}
