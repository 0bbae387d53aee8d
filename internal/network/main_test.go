package network

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/weirstream/weir/codec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logBuffer collects a node's log lines for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newNode returns a node closed at the end of the test; listen says whether
// it listens on a loopback port.
func newNode(t testing.TB, o Options, listen bool) *Node {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	n, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if listen {
		if err := n.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// item is what a consumer saw: a record or an event.
type item struct {
	rec string
	ts  int64
	ev  *Event
}

func (i item) String() string {
	if i.ev != nil {
		return i.ev.String()
	}
	if i.ts != NoTimestamp {
		return fmt.Sprintf("%q@%d", i.rec, i.ts)
	}
	return fmt.Sprintf("%q", i.rec)
}

// drain polls in until end of partition or an error, resuming after
// aligned barriers, and returns what it saw.
func drain[T any](t testing.TB, g *Gate, in *InputChannel[T], conv func(T) string, timeout time.Duration) ([]item, error) {
	t.Helper()
	var got []item
	deadline := time.After(timeout)
	for {
		what, recs, ts, ev, err := in.Poll()
		switch what {
		case Records:
			for i, r := range recs {
				it := item{rec: conv(r), ts: NoTimestamp}
				if ts != nil {
					it.ts = ts[i]
				}
				got = append(got, it)
			}
			continue
		case Control:
			e := ev
			got = append(got, item{ev: &e})
			if ev.Kind == EndOfPartition {
				return got, nil
			}
			if ev.Kind == Barrier && ev.Aligned {
				in.Resume()
			}
			continue
		}
		if err != nil {
			return got, err
		}
		select {
		case <-g.Doorbell():
		case <-deadline:
			return got, fmt.Errorf("timed out after %d items", len(got))
		}
	}
}

func ident(s string) string { return s }

// TestRoundTrip sends records and events over one channel: they arrive in
// order, with their timestamps, events in place.
func TestRoundTrip(t *testing.T) {
	prod := newNode(t, Options{}, true)
	cons := newNode(t, Options{}, false)
	out, err := NewOutput(prod, "job/edge/0->0", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "job/edge/0->0", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	var want []item
	write := func(recs []string, ts []int64) {
		if err := out.Write(recs, ts); err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			it := item{rec: r, ts: NoTimestamp}
			if ts != nil {
				it.ts = ts[i]
			}
			want = append(want, it)
		}
	}
	emit := func(ev Event) {
		if err := out.Emit(ev); err != nil {
			t.Fatal(err)
		}
		want = append(want, item{ev: &ev})
	}
	write([]string{"a", "bb", ""}, nil)
	emit(Event{Kind: Watermark, Timestamp: 10})
	write([]string{"c", "d"}, []int64{11, NoTimestamp})
	emit(Event{Kind: Barrier, ID: 1, Timestamp: 99, Aligned: true})
	write([]string{strings.Repeat("x", 100_000)}, []int64{12}) // spans 4 buffers
	emit(Event{Kind: Barrier, ID: 2})
	emit(Event{Kind: CancelBarrier, ID: 2})
	emit(Event{Kind: WatermarkStatus, ID: 1})
	emit(Event{Kind: EndOfPartition})
	got, err := drain(t, g, in, ident, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", trunc(got), trunc(want))
	}
	if err := out.WriteRecord("late", NoTimestamp); !errors.Is(err, ErrFinished) {
		t.Fatalf("write after end of partition: %v, want ErrFinished", err)
	}
	s := out.Metrics().Snapshot()
	r := in.Metrics().Snapshot()
	if s.BuffersOut < 4 || s.BytesOut != r.BytesIn || s.BuffersOut != r.BuffersIn {
		t.Fatalf("metrics out %+v, in %+v: want >= 4 buffers, equal counts", s, r)
	}
}

func trunc(items []item) string {
	var b strings.Builder
	for _, i := range items {
		s := i.String()
		if len(s) > 20 {
			s = s[:20] + fmt.Sprintf("…(%d)", len(s))
		}
		b.WriteString(s + " ")
	}
	return b.String()
}

// TestChannelMetricsExport: the node's collector exports every live
// channel's figures under Flink-like names.
func TestChannelMetricsExport(t *testing.T) {
	prod := newNode(t, Options{}, true)
	cons := newNode(t, Options{}, false)
	g := cons.NewGate()
	in, err := Subscribe(g, prod.Addr(), "m", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewOutput(prod, "m", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out.Write([]string{strings.Repeat("z", 40_000)}, nil) // 2 buffers
	out.Flush()
	for got := 0; got < 1; {
		what, recs, _, _, err := in.Poll()
		if err != nil {
			t.Fatal(err)
		}
		if what == Records {
			got += len(recs)
			continue
		}
		<-g.Doorbell()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prod.Collector(), cons.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				if l.GetName() != "peer" {
					labels += l.GetName() + "=" + l.GetValue() + ","
				}
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			vals[strings.TrimPrefix(f.GetName(), channelPrefix)+"{"+labels+"}"] = v
		}
	}
	for key, want := range map[string]float64{
		"numBuffersOut{channel=m,direction=out,}": 2,
		"numBytesOut{channel=m,direction=out,}":   40_006, // 3 bytes of record header, 3 of string length
		"numBuffersIn{channel=m,direction=in,}":   2,
		"numBytesIn{channel=m,direction=in,}":     40_006,
		"credit{channel=m,direction=in,}":         2,
		"backlog{channel=m,direction=out,}":       0,
	} {
		if got, ok := vals[key]; !ok || got != want {
			t.Errorf("%s = %v (present %t), want %v; all: %v", key, got, ok, want, vals)
		}
	}
}
