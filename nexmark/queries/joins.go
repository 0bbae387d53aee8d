package queries

import (
	"github.com/weirstream/weir"
	"github.com/weirstream/weir/nexmark"
	"github.com/weirstream/weir/state"
)

// auctions is the auction view of the event table, with the rows that keep
// returns true for.
func auctions(name string, events *weir.Stream[nexmark.Event], keep func(*nexmark.Auction) bool) *weir.Stream[nexmark.Auction] {
	return events.FlatMap(name, func(ev nexmark.Event, c weir.Collector[nexmark.Auction]) {
		if ev.Type == nexmark.AuctionEvent && ev.Auction != nil && keep(ev.Auction) {
			c.Collect(*ev.Auction)
		}
	}).UID(name)
}

func auctionID(a nexmark.Auction) int64 { return a.ID }
func bidAuction(b nexmark.Bid) int64    { return b.Auction }

// --- q3 -----------------------------------------------------------------------

// q3: auctions of category 10 joined with their sellers from Oregon, Idaho
// or California. A regular inner join: both sides stay in keyed state.
var q3 = Query{
	Name: "q3", Title: "Local item suggestion",
	Columns: []string{"name", "city", "state", "id"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		as := events.FlatMap("q3-auctions", func(ev nexmark.Event, c weir.Collector[q3Auction]) {
			if ev.Type == nexmark.AuctionEvent && ev.Auction != nil && ev.Auction.Category == 10 {
				c.Collect(q3Auction{ID: ev.Auction.ID, Seller: ev.Auction.Seller})
			}
		}).UID("q3-auctions")
		ps := events.FlatMap("q3-persons", func(ev nexmark.Event, c weir.Collector[q3Person]) {
			if ev.Type != nexmark.PersonEvent || ev.Person == nil {
				return
			}
			if p := ev.Person; p.State == "OR" || p.State == "ID" || p.State == "CA" {
				c.Collect(q3Person{ID: p.ID, Name: p.Name, City: p.City, State: p.State})
			}
		}).UID("q3-persons")
		rows := as.KeyBy(func(a q3Auction) int64 { return a.Seller }).
			Connect(ps.KeyBy(func(p q3Person) int64 { return p.ID })).
			Process("q3-join", &q3Join{}).UID("q3-join")
		emit("q3", rows, out, func(dst []byte, r Q3Row) []byte {
			return row(dst).str(r.Name).str(r.City).str(r.State).int(r.ID).end()
		})
	},
}

// Q3Row is a row of q3: the seller's name, city and state, the auction's id.
type Q3Row struct {
	Name, City, State string
	ID                int64
}

type q3Auction struct{ ID, Seller int64 }

type q3Person struct {
	ID                int64
	Name, City, State string
}

type q3Join struct {
	auctions state.List[int64]
	persons  state.List[q3Person]
}

func (j *q3Join) Open(ctx *weir.KeyedContext[int64]) (err error) {
	if j.auctions, err = weir.List[int64](ctx, "auctions"); err != nil {
		return err
	}
	j.persons, err = weir.List[q3Person](ctx, "persons")
	return err
}

func (j *q3Join) ProcessElement1(_ *weir.KeyedContext[int64], a q3Auction, out weir.Collector[Q3Row]) error {
	for _, p := range j.persons.Get() {
		out.Collect(Q3Row{p.Name, p.City, p.State, a.ID})
	}
	j.auctions.Add(a.ID)
	return nil
}

func (j *q3Join) ProcessElement2(_ *weir.KeyedContext[int64], p q3Person, out weir.Collector[Q3Row]) error {
	for _, id := range j.auctions.Get() {
		out.Collect(Q3Row{p.Name, p.City, p.State, id})
	}
	j.persons.Add(p)
	return nil
}

// --- q20 ----------------------------------------------------------------------

// q20: every bid joined with its auction, for auctions of category 10. A
// regular inner join: both sides stay in keyed state.
var q20 = Query{
	Name: "q20", Title: "Expand bid with auction",
	Columns: append(append([]string{}, bidColumns...),
		"itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category", "extra"),
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q20-bids", events, func(b *nexmark.Bid, c weir.Collector[nexmark.Bid]) { c.Collect(*b) })
		as := auctions("q20-auctions", events, func(a *nexmark.Auction) bool { return a.Category == 10 })
		rows := bs.KeyBy(bidAuction).Connect(as.KeyBy(auctionID)).Process("q20-join", &q20Join{}).UID("q20-join")
		emit("q20", rows, out, func(dst []byte, r Q20Row) []byte {
			b, a := &r.Bid, &r.Auction
			return row(dst).int(b.Auction).int(b.Bidder).int(b.Price).str(b.Channel).str(b.URL).int(b.DateTime).str(b.Extra).
				str(a.ItemName).str(a.Description).int(a.InitialBid).int(a.Reserve).int(a.DateTime).int(a.Expires).
				int(a.Seller).int(a.Category).str(a.Extra).end()
		})
	},
}

// Q20Row is a row of q20: a bid and its auction.
type Q20Row struct {
	Bid     nexmark.Bid
	Auction nexmark.Auction
}

type q20Join struct {
	bids     state.List[nexmark.Bid]
	auctions state.List[nexmark.Auction]
}

func (j *q20Join) Open(ctx *weir.KeyedContext[int64]) (err error) {
	if j.bids, err = weir.List[nexmark.Bid](ctx, "bids"); err != nil {
		return err
	}
	j.auctions, err = weir.List[nexmark.Auction](ctx, "auctions")
	return err
}

func (j *q20Join) ProcessElement1(_ *weir.KeyedContext[int64], b nexmark.Bid, out weir.Collector[Q20Row]) error {
	for _, a := range j.auctions.Get() {
		out.Collect(Q20Row{b, a})
	}
	j.bids.Add(b)
	return nil
}

func (j *q20Join) ProcessElement2(_ *weir.KeyedContext[int64], a nexmark.Auction, out weir.Collector[Q20Row]) error {
	for _, b := range j.bids.Get() {
		out.Collect(Q20Row{b, a})
	}
	j.auctions.Add(a)
	return nil
}

// --- q4 -----------------------------------------------------------------------

// q4: the average closing price per category, where the closing price of an
// auction is its highest bid between its start and its expiry. Three steps,
// as Flink's plan: a regular join of auctions and bids (both kept), MAX per
// (auction, category) with retractions, and AVG per category over that
// changelog.
var q4 = Query{
	Name: "q4", Title: "Average price for a category", Updating: true,
	Columns: []string{"id", "final"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q4-bids", events, func(b *nexmark.Bid, c weir.Collector[q4Bid]) {
			c.Collect(q4Bid{Auction: b.Auction, Price: b.Price, DateTime: b.DateTime})
		})
		as := auctions("q4-auctions", events, func(*nexmark.Auction) bool { return true })
		finals := as.KeyBy(auctionID).
			Connect(bs.KeyBy(func(b q4Bid) int64 { return b.Auction })).
			Process("q4-max", &q4Max{}).UID("q4-max")
		rows := finals.KeyBy(func(c Change[q4Final]) int64 { return c.Row.Category }).
			Process("q4-avg", &q4Avg{}).UID("q4-avg")
		emit("q4", rows, out, changelog(func(dst []byte, r Q4Row) []byte {
			return row(dst).int(r.Category).int(r.Final).end()
		}))
	},
}

// Q4Row is a row of q4: a category and the average closing price of its
// auctions (truncated, as AVG of a BIGINT is).
type Q4Row struct{ Category, Final int64 }

type q4Bid struct{ Auction, Price, DateTime int64 }

type q4Window struct{ Category, DateTime, Expires int64 }

// q4Final is the closing price of an auction in a category.
type q4Final struct{ Category, Final int64 }

type q4Max struct {
	auctions state.List[q4Window]
	bids     state.List[q4Bid]
	// max is MAX(price) per category of the auctions with this id (one,
	// unless an input repeats an auction id).
	max state.Map[int64, int64]
}

func (m *q4Max) Open(ctx *weir.KeyedContext[int64]) (err error) {
	if m.auctions, err = weir.List[q4Window](ctx, "auctions"); err != nil {
		return err
	}
	if m.bids, err = weir.List[q4Bid](ctx, "bids"); err != nil {
		return err
	}
	m.max, err = weir.Map[int64, int64](ctx, "max")
	return err
}

func (m *q4Max) ProcessElement1(_ *weir.KeyedContext[int64], a nexmark.Auction, out weir.Collector[Change[q4Final]]) error {
	w := q4Window{a.Category, a.DateTime, a.Expires}
	best, found := int64(0), false
	for _, b := range m.bids.Get() {
		if b.DateTime >= w.DateTime && b.DateTime <= w.Expires && (!found || b.Price > best) {
			best, found = b.Price, true
		}
	}
	if found {
		m.offer(w.Category, best, out)
	}
	m.auctions.Add(w)
	return nil
}

func (m *q4Max) ProcessElement2(_ *weir.KeyedContext[int64], b q4Bid, out weir.Collector[Change[q4Final]]) error {
	for _, w := range m.auctions.Get() {
		if b.DateTime >= w.DateTime && b.DateTime <= w.Expires {
			m.offer(w.Category, b.Price, out)
		}
	}
	m.bids.Add(b)
	return nil
}

// offer updates the category's maximum with price and emits the change, if
// any (an unchanged aggregate emits nothing, as in Flink).
func (m *q4Max) offer(category, price int64, out weir.Collector[Change[q4Final]]) {
	old, had := m.max.Get(category)
	if had && old >= price {
		return
	}
	m.max.Put(category, price)
	update(out, q4Final{category, old}, had, q4Final{category, price})
}

// q4Acc is AVG's accumulator.
type q4Acc struct{ Sum, Count int64 }

func (a q4Acc) avg() int64 { return a.Sum / a.Count }

type q4Avg struct {
	acc state.Value[q4Acc]
}

func (g *q4Avg) Open(ctx *weir.KeyedContext[int64]) (err error) {
	g.acc, err = weir.Value[q4Acc](ctx, "avg")
	return err
}

func (g *q4Avg) ProcessElement(ctx *weir.KeyedContext[int64], c Change[q4Final], out weir.Collector[Change[Q4Row]]) error {
	prev, _ := g.acc.Value()
	next := prev
	switch c.Kind {
	case Insert, UpdateAfter:
		next.Sum += c.Row.Final
		next.Count++
	default:
		next.Sum -= c.Row.Final
		next.Count--
	}
	if next.Count == 0 {
		g.acc.Clear()
	} else {
		g.acc.Update(next)
	}
	// GroupAggFunction: a retraction of the last row deletes the result, a
	// first row inserts it, and an unchanged result emits nothing.
	cat := ctx.CurrentKey()
	switch {
	case prev.Count > 0 && next.Count == 0:
		out.Collect(Change[Q4Row]{Delete, Q4Row{cat, prev.avg()}})
	case prev.Count == 0 && next.Count > 0:
		out.Collect(Change[Q4Row]{Insert, Q4Row{cat, next.avg()}})
	case prev.Count > 0 && prev.avg() != next.avg():
		update(out, Q4Row{cat, prev.avg()}, true, Q4Row{cat, next.avg()})
	}
	return nil
}

// --- q9 -----------------------------------------------------------------------

// q9: the winning bid of each auction: among the bids between its start and
// expiry, the highest price, then the earliest. A regular join (both kept)
// followed by a Top-1 per auction; ties keep the row that came first.
var q9 = Query{
	Name: "q9", Title: "Winning bids", Updating: true,
	Columns: []string{"id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category", "extra",
		"auction", "bidder", "price", "bid_dateTime", "bid_extra"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q9-bids", events, func(b *nexmark.Bid, c weir.Collector[q9Bid]) {
			c.Collect(q9Bid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra})
		})
		as := auctions("q9-auctions", events, func(*nexmark.Auction) bool { return true })
		rows := as.KeyBy(auctionID).
			Connect(bs.KeyBy(func(b q9Bid) int64 { return b.Auction })).
			Process("q9-top1", &q9Top1{}).UID("q9-top1")
		emit("q9", rows, out, changelog(func(dst []byte, r Q9Row) []byte {
			a := &r.Auction
			return row(dst).int(a.ID).str(a.ItemName).str(a.Description).int(a.InitialBid).int(a.Reserve).
				int(a.DateTime).int(a.Expires).int(a.Seller).int(a.Category).str(a.Extra).
				int(r.Bid.Auction).int(r.Bid.Bidder).int(r.Bid.Price).int(r.Bid.DateTime).str(r.Bid.Extra).end()
		}))
	},
}

// Q9Row is a row of q9: an auction and its winning bid.
type Q9Row struct {
	Auction nexmark.Auction
	Bid     q9Bid
}

type q9Bid struct {
	Auction, Bidder, Price, DateTime int64
	Extra                            string
}

type q9Top1 struct {
	auctions state.List[nexmark.Auction]
	bids     state.List[q9Bid]
	best     state.Value[Q9Row]
}

func (t *q9Top1) Open(ctx *weir.KeyedContext[int64]) (err error) {
	if t.auctions, err = weir.List[nexmark.Auction](ctx, "auctions"); err != nil {
		return err
	}
	if t.bids, err = weir.List[q9Bid](ctx, "bids"); err != nil {
		return err
	}
	t.best, err = weir.Value[Q9Row](ctx, "best")
	return err
}

func (t *q9Top1) ProcessElement1(_ *weir.KeyedContext[int64], a nexmark.Auction, out weir.Collector[Change[Q9Row]]) error {
	for _, b := range t.bids.Get() {
		t.offer(a, b, out)
	}
	t.auctions.Add(a)
	return nil
}

func (t *q9Top1) ProcessElement2(_ *weir.KeyedContext[int64], b q9Bid, out weir.Collector[Change[Q9Row]]) error {
	for _, a := range t.auctions.Get() {
		t.offer(a, b, out)
	}
	t.bids.Add(b)
	return nil
}

// offer ranks the joined row (a, b), if b falls in a's time range, against
// the current winner: ORDER BY price DESC, dateTime ASC, the first come
// first among equals.
func (t *q9Top1) offer(a nexmark.Auction, b q9Bid, out weir.Collector[Change[Q9Row]]) {
	if b.DateTime < a.DateTime || b.DateTime > a.Expires {
		return
	}
	old, had := t.best.Value()
	if had && (b.Price < old.Bid.Price || (b.Price == old.Bid.Price && b.DateTime >= old.Bid.DateTime)) {
		return
	}
	next := Q9Row{a, b}
	t.best.Update(next)
	update(out, old, had, next)
}
