package queries

import (
	"sync/atomic"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/nexmark"
	"github.com/weirstream/weir/state"
)

// day is DATE_FORMAT(dateTime, 'yyyy-MM-dd') in UTC.
func day(ms int64) string { return lastDay.format(ms) }

// minute is DATE_FORMAT(dateTime, 'HH:mm') in UTC.
func minute(ms int64) string { return lastMinute.format(ms) }

var (
	lastDay    = timeName{unit: 86_400_000, layout: "2006-01-02"}
	lastMinute = timeName{unit: 60_000, layout: "15:04"}
)

// timeName formats times by a layout that changes once per unit (a day, a
// minute), remembering the last name: consecutive bids mostly share it, so
// formatting costs one atomic load instead of a time.Format and a string.
// Subtasks share it.
type timeName struct {
	unit   int64
	layout string
	last   atomic.Pointer[indexedName]
}

type indexedName struct {
	index int64
	name  string
}

func (t *timeName) format(ms int64) string {
	i := floorDiv(ms, t.unit)
	if n := t.last.Load(); n != nil && n.index == i {
		return n.name
	}
	name := time.UnixMilli(i * t.unit).UTC().Format(t.layout)
	t.last.Store(&indexedName{i, name})
	return name
}

// Price ranks of q15–q17: rank 1 below 10 000, rank 2 below 1 000 000,
// rank 3 from there.
func priceRank(price int64) int {
	switch {
	case price < 10_000:
		return 1
	case price < 1_000_000:
		return 2
	}
	return 3
}

// BidStats are the counts of q15 and q16: bids, distinct bidders and
// distinct auctions, in total and per price rank (index 0 is the total).
type BidStats struct {
	Bids, Bidders, Auctions [4]int64
}

func (s *BidStats) format(r row) row {
	for _, v := range [][4]int64{s.Bids, s.Bidders, s.Auctions} {
		r = r.int(v[0]).int(v[1]).int(v[2]).int(v[3])
	}
	return r
}

// bidStats keeps a key's BidStats and the sets behind its distinct counts:
// for each bidder and auction, a bit per rank it was seen in (bit 0: any).
type bidStats struct {
	stats    state.Value[BidStats]
	bidders  state.Map[int64, uint8]
	auctions state.Map[int64, uint8]
}

func openBidStats[K comparable](s *bidStats, ctx *weir.KeyedContext[K]) (err error) {
	if s.bidders, err = weir.Map[int64, uint8](ctx, "bidders"); err != nil {
		return err
	}
	s.auctions, err = weir.Map[int64, uint8](ctx, "auctions")
	return err
}

// statBid is what q15 and q16 count of a bid. Their bids are projected to
// it (and their grouping columns) before the shuffle, as Flink's planner
// does (a Calc before the Exchange): the exchange then carries three
// integers and the key instead of the whole bid with its URL and extra
// columns, which over the network data plane are encoded and decoded.
type statBid struct{ Price, Bidder, Auction int64 }

func newStatBid(b *nexmark.Bid) statBid { return statBid{b.Price, b.Bidder, b.Auction} }

// add counts b into st.
func (s *bidStats) add(st *BidStats, b *statBid) {
	r := priceRank(b.Price)
	st.Bids[0]++
	st.Bids[r]++
	mark := func(set state.Map[int64, uint8], id int64, counts *[4]int64) {
		seen, _ := set.Get(id)
		bits := seen | 1 | 1<<r
		if bits == seen {
			return
		}
		set.Put(id, bits)
		if seen&1 == 0 {
			counts[0]++
		}
		if seen&(1<<r) == 0 {
			counts[r]++
		}
	}
	mark(s.bidders, b.Bidder, &st.Bidders)
	mark(s.auctions, b.Auction, &st.Auctions)
}

// --- q15 ----------------------------------------------------------------------

var statColumns = []string{"total_bids", "rank1_bids", "rank2_bids", "rank3_bids",
	"total_bidders", "rank1_bidders", "rank2_bidders", "rank3_bidders",
	"total_auctions", "rank1_auctions", "rank2_auctions", "rank3_auctions"}

// q15: per day, the number of bids, distinct bidders and distinct auctions,
// in total and per price rank.
var q15 = Query{
	Name: "q15", Title: "Bidding statistics report", Updating: true,
	Columns: append([]string{"day"}, statColumns...),
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q15-bids", events, func(b *nexmark.Bid, c weir.Collector[q15Bid]) {
			c.Collect(q15Bid{day(b.DateTime), newStatBid(b)})
		})
		rows := bs.KeyBy(func(b q15Bid) string { return b.Day }).Process("q15-agg", &q15Agg{}).UID("q15-agg")
		emit("q15", rows, out, changelog(func(dst []byte, r Q15Row) []byte {
			return r.Stats.format(row(dst).str(r.Day)).end()
		}))
	},
}

// Q15Row is a row of q15.
type Q15Row struct {
	Day   string
	Stats BidStats
}

// q15Bid is a bid of q15 as it crosses the shuffle.
type q15Bid struct {
	Day string
	Bid statBid
}

type q15Agg struct{ bidStats }

func (g *q15Agg) Open(ctx *weir.KeyedContext[string]) (err error) {
	if g.stats, err = weir.Value[BidStats](ctx, "stats"); err != nil {
		return err
	}
	return openBidStats(&g.bidStats, ctx)
}

func (g *q15Agg) ProcessElement(ctx *weir.KeyedContext[string], b q15Bid, out weir.Collector[Change[Q15Row]]) error {
	old, had := g.stats.Value()
	next := old
	g.add(&next, &b.Bid)
	g.stats.Update(next)
	d := ctx.CurrentKey()
	update(out, Q15Row{d, old}, had, Q15Row{d, next})
	return nil
}

// --- q16 ----------------------------------------------------------------------

// q16: q15 per channel and day, with the latest minute of the day seen.
var q16 = Query{
	Name: "q16", Title: "Channel statistics report", Updating: true,
	Columns: append([]string{"channel", "day", "minute"}, statColumns...),
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q16-bids", events, func(b *nexmark.Bid, c weir.Collector[q16Bid]) {
			c.Collect(q16Bid{ChannelDay{b.Channel, day(b.DateTime)}, minute(b.DateTime), newStatBid(b)})
		})
		rows := bs.KeyBy(func(b q16Bid) ChannelDay { return b.Key }).
			Process("q16-agg", &q16Agg{}).UID("q16-agg")
		emit("q16", rows, out, changelog(func(dst []byte, r Q16Row) []byte {
			return r.Stats.format(row(dst).str(r.Key.Channel).str(r.Key.Day).str(r.Minute)).end()
		}))
	},
}

// ChannelDay is the grouping key of q16.
type ChannelDay struct{ Channel, Day string }

// Q16Row is a row of q16.
type Q16Row struct {
	Key    ChannelDay
	Minute string
	Stats  BidStats
}

// q16Bid is a bid of q16 as it crosses the shuffle.
type q16Bid struct {
	Key    ChannelDay
	Minute string
	Bid    statBid
}

type q16State struct {
	Minute string
	Stats  BidStats
}

type q16Agg struct {
	bidStats
	row state.Value[q16State]
}

func (g *q16Agg) Open(ctx *weir.KeyedContext[ChannelDay]) (err error) {
	if g.row, err = weir.Value[q16State](ctx, "row"); err != nil {
		return err
	}
	return openBidStats(&g.bidStats, ctx)
}

func (g *q16Agg) ProcessElement(ctx *weir.KeyedContext[ChannelDay], b q16Bid, out weir.Collector[Change[Q16Row]]) error {
	old, had := g.row.Value()
	next := old
	g.add(&next.Stats, &b.Bid)
	if b.Minute > next.Minute {
		next.Minute = b.Minute
	}
	g.row.Update(next)
	k := ctx.CurrentKey()
	update(out, Q16Row{k, old.Minute, old.Stats}, had, Q16Row{k, next.Minute, next.Stats})
	return nil
}

// --- q17 ----------------------------------------------------------------------

// q17: per auction and day, the number of bids in total and per price rank,
// and the minimum, maximum, average and sum of the prices.
var q17 = Query{
	Name: "q17", Title: "Auction statistics report", Updating: true,
	Columns: []string{"auction", "day", "total_bids", "rank1_bids", "rank2_bids", "rank3_bids",
		"min_price", "max_price", "avg_price", "sum_price"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q17-bids", events, func(b *nexmark.Bid, c weir.Collector[q17Bid]) {
			c.Collect(q17Bid{AuctionDay{b.Auction, day(b.DateTime)}, b.Price})
		})
		rows := bs.KeyBy(func(b q17Bid) AuctionDay { return b.Key }).Process("q17-agg", &q17Agg{}).UID("q17-agg")
		emit("q17", rows, out, changelog(func(dst []byte, r Q17Row) []byte {
			s := &r.Stats
			return row(dst).int(r.Key.Auction).str(r.Key.Day).int(s.Bids[0]).int(s.Bids[1]).int(s.Bids[2]).int(s.Bids[3]).
				int(s.Min).int(s.Max).int(s.Sum / s.Bids[0]).int(s.Sum).end()
		}))
	},
}

// AuctionDay is the grouping key of q17.
type AuctionDay struct {
	Auction int64
	Day     string
}

type q17Bid struct {
	Key   AuctionDay
	Price int64
}

// AuctionStats are the aggregates of q17 (the average is Sum / Bids[0]).
type AuctionStats struct {
	Bids          [4]int64
	Min, Max, Sum int64
}

// Q17Row is a row of q17.
type Q17Row struct {
	Key   AuctionDay
	Stats AuctionStats
}

type q17Agg struct {
	stats state.Value[AuctionStats]
}

func (g *q17Agg) Open(ctx *weir.KeyedContext[AuctionDay]) (err error) {
	g.stats, err = weir.Value[AuctionStats](ctx, "stats")
	return err
}

func (g *q17Agg) ProcessElement(ctx *weir.KeyedContext[AuctionDay], b q17Bid, out weir.Collector[Change[Q17Row]]) error {
	old, had := g.stats.Value()
	next := old
	if !had || b.Price < next.Min {
		next.Min = b.Price
	}
	if !had || b.Price > next.Max {
		next.Max = b.Price
	}
	next.Sum += b.Price
	next.Bids[0]++
	next.Bids[priceRank(b.Price)]++
	g.stats.Update(next)
	update(out, Q17Row{b.Key, old}, had, Q17Row{b.Key, next})
	return nil
}
