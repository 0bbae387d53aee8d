package queries

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/nexmark"
)

// Query is one Nexmark query.
type Query struct {
	// Name is the query's name, "q0" … "q22".
	Name string
	// Title is its name in the Nexmark suite, e.g. "Currency conversion".
	Title string
	// Updating queries write a changelog: each row starts with +I, -U, +U
	// or -D (see the package documentation).
	Updating bool
	// Columns are the columns of the query's sink table, in order (without
	// the changelog kind).
	Columns []string

	build func(events *weir.Stream[nexmark.Event], out Output)
}

// Build adds the query's operators to the environment of events and sends
// its rows to out. Operators get stable uids ("qN-…"), so that a job
// restored from a checkpoint finds its state.
func (q Query) Build(events *weir.Stream[nexmark.Event], out Output) { q.build(events, out) }

// Output says where a query's rows go.
type Output struct {
	// Sink receives the rows as CSV lines (without the line break).
	// Default nil: a blackhole that counts the rows and formats nothing.
	Sink connector.Sink[string]
	// Rows, when set, counts the rows that reached the blackhole (Sink nil).
	Rows *atomic.Int64
}

var registry = []Query{
	q0, q1, q2, q3, q4, q5, q7, q8, q9, q10, q11, q12, q13, q14, q15, q16, q17, q18, q19, q20, q21, q22,
}

// All returns the queries this package implements, in the order of their
// numbers.
func All() []Query { return slices.Clone(registry) }

// Names returns the names of the queries this package implements.
func Names() []string {
	names := make([]string, len(registry))
	for i, q := range registry {
		names[i] = q.Name
	}
	return names
}

// notYet are the queries of the suite that are not implemented.
var notYet = map[string]string{
	"q6": "Flink does not run it either (FLINK-19059)",
}

// Lookup returns the query named name ("q3"; "3" is accepted too).
func Lookup(name string) (Query, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "q") {
		n = "q" + n
	}
	for _, q := range registry {
		if q.Name == n {
			return q, nil
		}
	}
	if why, ok := notYet[n]; ok {
		return Query{}, fmt.Errorf("query %q is not implemented yet: %s; available: %s", name, why, strings.Join(Names(), ", "))
	}
	return Query{}, fmt.Errorf("unknown query %q: use one of %s", name, strings.Join(Names(), ", "))
}

// WatermarkDelay is how far the watermark trails the largest dateTime seen:
// WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND.
const WatermarkDelay = 4 * time.Second

// Events adds src to env as the Nexmark event table: records are stamped
// with their dateTime and the watermark trails it by WatermarkDelay; at the
// end of bounded input the watermark jumps to the maximum.
func Events(env *weir.Environment, src connector.Source[nexmark.Event]) *weir.Stream[nexmark.Event] {
	strategy := weir.ForBoundedOutOfOrderness[nexmark.Event](WatermarkDelay).
		WithTimestampAssigner(func(ev nexmark.Event, _ int64) int64 { return ev.DateTime() })
	return env.FromSource("nexmark", src, strategy).UID("nexmark")
}

// emit sends rows to out: formatted by format into a sink, or counted by a
// blackhole.
func emit[T any](name string, s *weir.Stream[T], out Output, format func([]byte, T) []byte) {
	if out.Sink == nil {
		s.SinkTo(name+"-sink", &Blackhole[T]{Rows: out.Rows}).UID(name + "-sink")
		return
	}
	s.FlatMap(name+"-csv", func(r T, c weir.Collector[string]) {
		c.Collect(string(format(nil, r)))
	}).UID(name+"-csv").SinkTo(name+"-sink", out.Sink).UID(name + "-sink")
}

// bids is the bid view of the event table, projected by fn.
func bids[T any](name string, events *weir.Stream[nexmark.Event], fn func(*nexmark.Bid, weir.Collector[T])) *weir.Stream[T] {
	return events.FlatMap(name, func(ev nexmark.Event, c weir.Collector[T]) {
		if ev.Type == nexmark.BidEvent {
			fn(&ev.Bid, c)
		}
	}).UID(name)
}

// --- the changelog ----------------------------------------------------------

// RowKind is the kind of a row of a changelog, as Flink's RowKind.
type RowKind uint8

const (
	Insert RowKind = iota
	UpdateBefore
	UpdateAfter
	Delete
)

// String returns the short form Flink prints: +I, -U, +U, -D.
func (k RowKind) String() string {
	switch k {
	case Insert:
		return "+I"
	case UpdateBefore:
		return "-U"
	case UpdateAfter:
		return "+U"
	case Delete:
		return "-D"
	}
	return fmt.Sprintf("RowKind(%d)", uint8(k))
}

// Change is a row of a changelog.
type Change[T any] struct {
	Kind RowKind
	Row  T
}

// changelog formats a change as its kind, then the row.
func changelog[T any](format func([]byte, T) []byte) func([]byte, Change[T]) []byte {
	return func(b []byte, c Change[T]) []byte {
		return format(append(append(b, c.Kind.String()...), ','), c.Row)
	}
}

// update emits the changes that turn old (when had) into new.
func update[T any](out weir.Collector[Change[T]], old T, had bool, new T) {
	if had {
		out.Collect(Change[T]{Kind: UpdateBefore, Row: old})
		out.Collect(Change[T]{Kind: UpdateAfter, Row: new})
		return
	}
	out.Collect(Change[T]{Kind: Insert, Row: new})
}

// --- CSV ----------------------------------------------------------------------

// row appends CSV fields, each followed by a comma; end drops the last one.
type row []byte

func (r row) int(v int64) row { return append(strconv.AppendInt(r, v, 10), ',') }

// decimal3 appends v/1000 with exactly three digits after the point.
func (r row) decimal3(v int64) row {
	if v < 0 {
		r = append(r, '-')
		v = -v
	}
	r = strconv.AppendInt(r, v/1000, 10)
	frac := v % 1000
	return append(r, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10), ',')
}

// str appends s, quoted when it holds a comma, a quote or a line break (RFC
// 4180), or when it is empty, which keeps it apart from NULL.
func (r row) str(s string) row {
	if s != "" && !strings.ContainsAny(s, ",\"\r\n") {
		return append(append(r, s...), ',')
	}
	r = append(r, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			r = append(r, '"')
		}
		r = append(r, s[i])
	}
	return append(r, '"', ',')
}

// nullable appends s, or an empty field (NULL) when ok is false.
func (r row) nullable(s string, ok bool) row {
	if !ok {
		return append(r, ',')
	}
	return r.str(s)
}

// end drops the comma after the last field.
func (r row) end() []byte { return r[:len(r)-1] }
