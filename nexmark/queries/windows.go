package queries

import (
	"math"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/nexmark"
	"github.com/weirstream/weir/state"
)

// The windowed queries are keyed process functions with event-time timers:
// a window [start, end) fires when the watermark reaches end-1, as Flink's
// window operators do, and records of windows that already fired are
// dropped as late.

const (
	windowSize = 10_000 // ms: TUMBLE, HOP size and SESSION gap of q5, q7, q8, q11, q12
	hopSlide   = 2_000  // ms: q5's HOP slide
)

// floorDiv is the window or pane index of t (floor, also before 1970).
func floorDiv(t, size int64) int64 {
	q := t / size
	if t%size != 0 && t < 0 {
		q--
	}
	return q
}

// late reports whether a window ending at end already fired.
func late[K comparable](ctx *weir.KeyedContext[K], end int64) bool {
	return end-1 <= ctx.TimerService().CurrentWatermark()
}

// --- q5 -----------------------------------------------------------------------

// q5: the auctions with the most bids in each sliding window (10 s, every
// 2 s). Bids are counted per auction in 2 s panes; each window sums its
// five panes when it fires, then a second step keyed by the window keeps the
// auctions whose count is the window's largest.
var q5 = Query{
	Name: "q5", Title: "Hot items",
	Columns: []string{"auction", "num"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q5-bids", events, func(b *nexmark.Bid, c weir.Collector[int64]) { c.Collect(b.Auction) })
		counts := bs.KeyBy(func(a int64) int64 { return a }).Process("q5-count", &q5Count{}).UID("q5-count")
		rows := counts.KeyBy(func(c q5WindowCount) int64 { return c.End }).Process("q5-max", &q5Max{}).UID("q5-max")
		emit("q5", rows, out, func(dst []byte, r Q5Row) []byte {
			return row(dst).int(r.Auction).int(r.Num).end()
		})
	},
}

// Q5Row is a row of q5.
type Q5Row struct{ Auction, Num int64 }

type q5WindowCount struct{ End, Auction, Num int64 }

type q5Count struct {
	panes state.Map[int64, int64] // pane start → bids
}

func (f *q5Count) Open(ctx *weir.KeyedContext[int64]) (err error) {
	f.panes, err = weir.Map[int64, int64](ctx, "panes")
	return err
}

func (f *q5Count) ProcessElement(ctx *weir.KeyedContext[int64], _ int64, _ weir.Collector[q5WindowCount]) error {
	t, _ := ctx.Timestamp()
	pane := floorDiv(t, hopSlide) * hopSlide
	// The pane belongs to the windows ending at pane+slide … pane+size.
	if late(ctx, pane+windowSize) {
		return nil
	}
	n, _ := f.panes.Get(pane)
	f.panes.Put(pane, n+1)
	if n > 0 {
		// The pane's first record registered the timers of its windows
		// that were not late then; none has fired since (a fired window's
		// end is late now).
		return nil
	}
	for end := pane + hopSlide; end <= pane+windowSize; end += hopSlide {
		if !late(ctx, end) {
			ctx.TimerService().RegisterEventTimeTimer(end - 1)
		}
	}
	return nil
}

func (f *q5Count) OnTimer(ctx *weir.OnTimerContext[int64], ts int64, out weir.Collector[q5WindowCount]) error {
	end := ts + 1
	var num int64
	var stale []int64
	for pane, n := range f.panes.All() {
		switch {
		case pane >= end-windowSize && pane < end:
			num += n
		}
		// No window still to fire needs a pane that starts before the
		// next window's start.
		if pane < end+hopSlide-windowSize {
			stale = append(stale, pane)
		}
	}
	for _, p := range stale {
		f.panes.Remove(p)
	}
	if num > 0 {
		out.Collect(q5WindowCount{End: end, Auction: ctx.CurrentKey(), Num: num})
	}
	return nil
}

type q5Max struct {
	max  state.Value[int64]
	best state.List[Q5Row] // the auctions whose count is max
}

func (f *q5Max) Open(ctx *weir.KeyedContext[int64]) (err error) {
	if f.max, err = weir.Value[int64](ctx, "max"); err != nil {
		return err
	}
	f.best, err = weir.List[Q5Row](ctx, "best")
	return err
}

func (f *q5Max) ProcessElement(ctx *weir.KeyedContext[int64], c q5WindowCount, _ weir.Collector[Q5Row]) error {
	if late(ctx, c.End) {
		return nil
	}
	max, had := f.max.Value()
	switch {
	case !had || c.Num > max:
		f.max.Update(c.Num)
		f.best.Update([]Q5Row{{c.Auction, c.Num}})
		ctx.TimerService().RegisterEventTimeTimer(c.End - 1)
	case c.Num == max:
		f.best.Add(Q5Row{c.Auction, c.Num})
	}
	return nil
}

func (f *q5Max) OnTimer(_ *weir.OnTimerContext[int64], _ int64, out weir.Collector[Q5Row]) error {
	for _, r := range f.best.Get() {
		out.Collect(r)
	}
	f.max.Clear()
	f.best.Clear()
	return nil
}

// --- q7 -----------------------------------------------------------------------

// q7: the bids with the highest price of each 10 s tumbling window. The SQL
// joins each bid with the maximum of every window whose [end - 10 s, end]
// holds its dateTime (both bounds included), so a bid exactly at a window's
// start also counts for the window before, where it may join but does not
// count toward the maximum.
var q7 = Query{
	Name: "q7", Title: "Highest bid",
	Columns: []string{"auction", "bidder", "price", "dateTime", "extra"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q7-bids", events, func(b *nexmark.Bid, c weir.Collector[q7Bid]) {
			w := floorDiv(b.DateTime, windowSize)
			c.Collect(q7Bid{Window: w, Counts: true, Bid: Q0Row{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra}})
			if b.DateTime == w*windowSize {
				c.Collect(q7Bid{Window: w - 1, Bid: Q0Row{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra}})
			}
		})
		rows := bs.KeyBy(func(b q7Bid) int64 { return b.Window }).Process("q7-max", &q7Max{}).UID("q7-max")
		emit("q7", rows, out, func(dst []byte, r Q0Row) []byte {
			return row(dst).int(r.Auction).int(r.Bidder).int(r.Price).int(r.DateTime).str(r.Extra).end()
		})
	},
}

type q7Bid struct {
	Window int64
	// Counts is false for the copy of a bid at a window's start sent to
	// the window before.
	Counts bool
	Bid    Q0Row
}

type q7Max struct {
	max  state.Value[int64]
	best state.List[Q0Row] // the window's bids at max
	edge state.List[Q0Row] // bids at the window's end (the next one's start)
}

func (f *q7Max) Open(ctx *weir.KeyedContext[int64]) (err error) {
	if f.max, err = weir.Value[int64](ctx, "max"); err != nil {
		return err
	}
	if f.best, err = weir.List[Q0Row](ctx, "best"); err != nil {
		return err
	}
	f.edge, err = weir.List[Q0Row](ctx, "edge")
	return err
}

func (f *q7Max) ProcessElement(ctx *weir.KeyedContext[int64], b q7Bid, _ weir.Collector[Q0Row]) error {
	end := (b.Window + 1) * windowSize
	if late(ctx, end) {
		return nil
	}
	if !b.Counts {
		f.edge.Add(b.Bid)
		return nil
	}
	max, had := f.max.Value()
	switch {
	case !had || b.Bid.Price > max:
		f.max.Update(b.Bid.Price)
		f.best.Update([]Q0Row{b.Bid})
		ctx.TimerService().RegisterEventTimeTimer(end - 1)
	case b.Bid.Price == max:
		f.best.Add(b.Bid)
	}
	return nil
}

func (f *q7Max) OnTimer(_ *weir.OnTimerContext[int64], _ int64, out weir.Collector[Q0Row]) error {
	if max, ok := f.max.Value(); ok {
		for _, b := range f.best.Get() {
			out.Collect(b)
		}
		for _, b := range f.edge.Get() {
			if b.Price == max {
				out.Collect(b)
			}
		}
	}
	f.max.Clear()
	f.best.Clear()
	f.edge.Clear()
	return nil
}

// --- q8 -----------------------------------------------------------------------

// q8: the persons who created an auction in the 10 s tumbling window in
// which they registered: the distinct (id, name) of each window's persons
// joined with the distinct sellers of the same window.
var q8 = Query{
	Name: "q8", Title: "Monitor new users",
	Columns: []string{"id", "name", "stime"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		ps := events.FlatMap("q8-persons", func(ev nexmark.Event, c weir.Collector[q8Person]) {
			if ev.Type == nexmark.PersonEvent && ev.Person != nil {
				p := ev.Person
				c.Collect(q8Person{IDWindow{p.ID, floorDiv(p.DateTime, windowSize)}, p.Name})
			}
		}).UID("q8-persons")
		sellers := events.FlatMap("q8-sellers", func(ev nexmark.Event, c weir.Collector[IDWindow]) {
			if ev.Type == nexmark.AuctionEvent && ev.Auction != nil {
				c.Collect(IDWindow{ev.Auction.Seller, floorDiv(ev.Auction.DateTime, windowSize)})
			}
		}).UID("q8-sellers")
		rows := ps.KeyBy(func(p q8Person) IDWindow { return p.Key }).
			Connect(sellers.KeyBy(func(k IDWindow) IDWindow { return k })).
			Process("q8-join", &q8Join{}).UID("q8-join")
		emit("q8", rows, out, func(dst []byte, r Q8Row) []byte {
			return row(dst).int(r.ID).str(r.Name).int(r.StartTime).end()
		})
	},
}

// IDWindow is a person or seller id in a tumbling window (its index).
type IDWindow struct{ ID, Window int64 }

type q8Person struct {
	Key  IDWindow
	Name string
}

// Q8Row is a row of q8.
type Q8Row struct {
	ID        int64
	Name      string
	StartTime int64
}

type q8Join struct {
	names  state.Map[string, bool] // distinct names of the person in the window
	seller state.Value[bool]       // the person sold in the window
}

func (j *q8Join) Open(ctx *weir.KeyedContext[IDWindow]) (err error) {
	if j.names, err = weir.Map[string, bool](ctx, "names"); err != nil {
		return err
	}
	j.seller, err = weir.Value[bool](ctx, "seller")
	return err
}

func (j *q8Join) ProcessElement1(ctx *weir.KeyedContext[IDWindow], p q8Person, _ weir.Collector[Q8Row]) error {
	end := (p.Key.Window + 1) * windowSize
	if late(ctx, end) {
		return nil
	}
	j.names.Put(p.Name, true)
	ctx.TimerService().RegisterEventTimeTimer(end - 1)
	return nil
}

func (j *q8Join) ProcessElement2(ctx *weir.KeyedContext[IDWindow], k IDWindow, _ weir.Collector[Q8Row]) error {
	end := (k.Window + 1) * windowSize
	if late(ctx, end) {
		return nil
	}
	j.seller.Update(true)
	ctx.TimerService().RegisterEventTimeTimer(end - 1)
	return nil
}

func (j *q8Join) OnTimer(ctx *weir.OnTimerContext[IDWindow], _ int64, out weir.Collector[Q8Row]) error {
	k := ctx.CurrentKey()
	if sold, _ := j.seller.Value(); sold {
		for name := range j.names.Keys() {
			out.Collect(Q8Row{k.ID, name, k.Window * windowSize})
		}
	}
	j.names.Clear()
	j.seller.Clear()
	return nil
}

// --- q11 ----------------------------------------------------------------------

// q11: the number of bids of each bidder's sessions: a session ends 10 s
// after its last bid; sessions that come within 10 s of each other merge,
// as Flink's session windows do (windows that touch merge too).
var q11 = Query{
	Name: "q11", Title: "User sessions",
	Columns: []string{"bidder", "bid_count", "starttime", "endtime"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q11-bids", events, func(b *nexmark.Bid, c weir.Collector[int64]) { c.Collect(b.Bidder) })
		rows := bs.KeyBy(func(b int64) int64 { return b }).Process("q11-sessions", &q11Sessions{}).UID("q11-sessions")
		emit("q11", rows, out, func(dst []byte, r Q11Row) []byte {
			return row(dst).int(r.Bidder).int(r.Count).int(r.Start).int(r.End).end()
		})
	},
}

// Q11Row is a row of q11: a session [Start, End) of Bidder with Count bids.
type Q11Row struct{ Bidder, Count, Start, End int64 }

type session struct{ Start, End, Count int64 }

type q11Sessions struct {
	// sessions are the bidder's open sessions; the slices are never changed
	// in place, as a snapshot may hold them.
	sessions state.Value[[]session]
}

func (f *q11Sessions) Open(ctx *weir.KeyedContext[int64]) (err error) {
	f.sessions, err = weir.Value[[]session](ctx, "sessions")
	return err
}

func (f *q11Sessions) ProcessElement(ctx *weir.KeyedContext[int64], _ int64, _ weir.Collector[Q11Row]) error {
	t, _ := ctx.Timestamp()
	merged := session{Start: t, End: t + windowSize, Count: 1}
	old, _ := f.sessions.Value()
	next := make([]session, 0, len(old)+1)
	for _, s := range old {
		if s.Start <= merged.End && s.End >= merged.Start {
			merged = session{Start: min(s.Start, merged.Start), End: max(s.End, merged.End), Count: s.Count + merged.Count}
		} else {
			next = append(next, s)
		}
	}
	if late(ctx, merged.End) {
		return nil
	}
	f.sessions.Update(append(next, merged))
	ctx.TimerService().RegisterEventTimeTimer(merged.End - 1)
	return nil
}

func (f *q11Sessions) OnTimer(ctx *weir.OnTimerContext[int64], ts int64, out weir.Collector[Q11Row]) error {
	old, _ := f.sessions.Value()
	var keep []session
	for _, s := range old {
		if s.End-1 <= ts {
			out.Collect(Q11Row{ctx.CurrentKey(), s.Count, s.Start, s.End})
		} else {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		f.sessions.Clear()
	} else if len(keep) != len(old) {
		f.sessions.Update(keep)
	}
	return nil
}

// --- q12 ----------------------------------------------------------------------

// q12: the number of bids of each bidder in 10 s tumbling windows of
// processing time. Windows fire on processing-time timers; at the end of
// bounded input (the final watermark) the windows still open fire too, so
// that no bid is lost (Flink's bounded runs would drop them).
var q12 = Query{
	Name: "q12", Title: "Processing time windows",
	Columns: []string{"bidder", "bid_count", "starttime", "endtime"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q12-bids", events, func(b *nexmark.Bid, c weir.Collector[int64]) { c.Collect(b.Bidder) })
		rows := bs.KeyBy(func(b int64) int64 { return b }).Process("q12-windows", &q12Windows{}).UID("q12-windows")
		emit("q12", rows, out, func(dst []byte, r Q11Row) []byte {
			return row(dst).int(r.Bidder).int(r.Count).int(r.Start).int(r.End).end()
		})
	},
}

type q12Windows struct {
	counts state.Map[int64, int64] // window start → bids
}

func (f *q12Windows) Open(ctx *weir.KeyedContext[int64]) (err error) {
	f.counts, err = weir.Map[int64, int64](ctx, "counts")
	return err
}

func (f *q12Windows) ProcessElement(ctx *weir.KeyedContext[int64], _ int64, _ weir.Collector[Q11Row]) error {
	ts := ctx.TimerService()
	start := floorDiv(ts.CurrentProcessingTime(), windowSize) * windowSize
	n, _ := f.counts.Get(start)
	f.counts.Put(start, n+1)
	if n > 0 {
		// The window's first record registered both timers, and the
		// window has not fired (a fired window is removed).
		return nil
	}
	ts.RegisterProcessingTimeTimer(start + windowSize - 1)
	ts.RegisterEventTimeTimer(math.MaxInt64)
	return nil
}

func (f *q12Windows) OnTimer(ctx *weir.OnTimerContext[int64], ts int64, out weir.Collector[Q11Row]) error {
	var fired []int64
	for start, n := range f.counts.All() {
		if ctx.TimeDomain() == weir.EventTime || start+windowSize-1 <= ts {
			out.Collect(Q11Row{ctx.CurrentKey(), n, start, start + windowSize})
			fired = append(fired, start)
		}
	}
	for _, s := range fired {
		f.counts.Remove(s)
	}
	return nil
}
