package queries

import (
	"slices"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/nexmark"
	"github.com/weirstream/weir/state"
)

func formatBid(r row, b *nexmark.Bid) row {
	return r.int(b.Auction).int(b.Bidder).int(b.Price).str(b.Channel).str(b.URL).int(b.DateTime).str(b.Extra)
}

// --- q18 ----------------------------------------------------------------------

// q18: the last bid of each bidder on each auction (ROW_NUMBER over
// dateTime DESC, rank 1): Flink's event-time deduplication keeping the last
// row, where a later bid with an equal dateTime replaces the earlier one.
var q18 = Query{
	Name: "q18", Title: "Find last bid", Updating: true,
	Columns: bidColumns,
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q18-bids", events, func(b *nexmark.Bid, c weir.Collector[nexmark.Bid]) { c.Collect(*b) })
		rows := bs.KeyBy(func(b nexmark.Bid) BidderAuction { return BidderAuction{b.Bidder, b.Auction} }).
			Process("q18-dedup", &q18Dedup{}).UID("q18-dedup")
		emit("q18", rows, out, changelog(func(dst []byte, b nexmark.Bid) []byte {
			return formatBid(row(dst), &b).end()
		}))
	},
}

// BidderAuction is the partition key of q18.
type BidderAuction struct{ Bidder, Auction int64 }

type q18Dedup struct {
	last state.Value[nexmark.Bid]
}

func (d *q18Dedup) Open(ctx *weir.KeyedContext[BidderAuction]) (err error) {
	d.last, err = weir.Value[nexmark.Bid](ctx, "last")
	return err
}

func (d *q18Dedup) ProcessElement(_ *weir.KeyedContext[BidderAuction], b nexmark.Bid, out weir.Collector[Change[nexmark.Bid]]) error {
	old, had := d.last.Value()
	if had && b.DateTime < old.DateTime {
		return nil
	}
	d.last.Update(b)
	update(out, old, had, b)
	return nil
}

// --- q19 ----------------------------------------------------------------------

// Q19TopN is the number of bids q19 keeps per auction.
const Q19TopN = 10

// q19: the ten highest bids of each auction, with their rank (ROW_NUMBER
// over price DESC, rank <= 10). As Flink's append-only Top-N, an equal price
// ranks after the bids that came before it, and every rank whose row
// changes is updated.
var q19 = Query{
	Name: "q19", Title: "Auction TOP-10 price", Updating: true,
	Columns: append(append([]string{}, bidColumns...), "rank_number"),
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		bs := bids("q19-bids", events, func(b *nexmark.Bid, c weir.Collector[nexmark.Bid]) { c.Collect(*b) })
		rows := bs.KeyBy(bidAuction).Process("q19-topn", &q19TopN{}).UID("q19-topn")
		emit("q19", rows, out, changelog(func(dst []byte, r Q19Row) []byte {
			return formatBid(row(dst), &r.Bid).int(r.Rank).end()
		}))
	},
}

// Q19Row is a row of q19.
type Q19Row struct {
	Bid  nexmark.Bid
	Rank int64
}

type q19TopN struct {
	// top holds the auction's best bids, best first. Its slices are never
	// changed in place: a snapshot may still hold them.
	top state.Value[[]nexmark.Bid]
}

func (t *q19TopN) Open(ctx *weir.KeyedContext[int64]) (err error) {
	t.top, err = weir.Value[[]nexmark.Bid](ctx, "top")
	return err
}

func (t *q19TopN) ProcessElement(_ *weir.KeyedContext[int64], b nexmark.Bid, out weir.Collector[Change[Q19Row]]) error {
	old, _ := t.top.Value()
	// The new bid goes after every bid with a price at least as high.
	pos := len(old)
	for i, o := range old {
		if o.Price < b.Price {
			pos = i
			break
		}
	}
	if pos >= Q19TopN {
		return nil
	}
	next := slices.Insert(slices.Clone(old), pos, b)
	if len(next) > Q19TopN {
		next = next[:Q19TopN]
	}
	t.top.Update(next)
	// Ranks pos+1 … len(next) now hold other rows.
	for i := pos; i < len(next); i++ {
		if i < len(old) {
			out.Collect(Change[Q19Row]{UpdateBefore, Q19Row{old[i], int64(i + 1)}})
			out.Collect(Change[Q19Row]{UpdateAfter, Q19Row{next[i], int64(i + 1)}})
		} else {
			out.Collect(Change[Q19Row]{Insert, Q19Row{next[i], int64(i + 1)}})
		}
	}
	return nil
}
