package queries

import (
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/nexmark"
)

// Bid columns shared by several queries.
var bidColumns = []string{"auction", "bidder", "price", "channel", "url", "dateTime", "extra"}

// q0: SELECT auction, bidder, price, dateTime, extra FROM bid.
var q0 = Query{
	Name: "q0", Title: "Pass through",
	Columns: []string{"auction", "bidder", "price", "dateTime", "extra"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		rows := bids("q0-bids", events, func(b *nexmark.Bid, c weir.Collector[Q0Row]) {
			c.Collect(Q0Row{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra})
		})
		emit("q0", rows, out, func(dst []byte, r Q0Row) []byte {
			return row(dst).int(r.Auction).int(r.Bidder).int(r.Price).int(r.DateTime).str(r.Extra).end()
		})
	},
}

// Q0Row is a row of q0.
type Q0Row struct {
	Auction, Bidder, Price, DateTime int64
	Extra                            string
}

// q1: the price converted to euros, 0.908 · price (DECIMAL, three digits
// after the point).
var q1 = Query{
	Name: "q1", Title: "Currency conversion",
	Columns: []string{"auction", "bidder", "price", "dateTime", "extra"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		rows := bids("q1-bids", events, func(b *nexmark.Bid, c weir.Collector[Q1Row]) {
			c.Collect(Q1Row{b.Auction, b.Bidder, euroMillis(b.Price), b.DateTime, b.Extra})
		})
		emit("q1", rows, out, func(dst []byte, r Q1Row) []byte {
			return row(dst).int(r.Auction).int(r.Bidder).decimal3(r.PriceMillis).int(r.DateTime).str(r.Extra).end()
		})
	},
}

// Q1Row is a row of q1; PriceMillis is the euro price in thousandths.
type Q1Row struct {
	Auction, Bidder, PriceMillis, DateTime int64
	Extra                                  string
}

// euroMillis is 0.908 · price exactly, in thousandths.
func euroMillis(price int64) int64 { return price * 908 }

// q2: SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0.
var q2 = Query{
	Name: "q2", Title: "Selection",
	Columns: []string{"auction", "price"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		rows := bids("q2-bids", events, func(b *nexmark.Bid, c weir.Collector[Q2Row]) {
			if b.Auction%123 == 0 {
				c.Collect(Q2Row{b.Auction, b.Price})
			}
		})
		emit("q2", rows, out, func(dst []byte, r Q2Row) []byte {
			return row(dst).int(r.Auction).int(r.Price).end()
		})
	},
}

// Q2Row is a row of q2.
type Q2Row struct{ Auction, Price int64 }

// q10: every bid with its date and minute, the partition columns of Flink's
// file sink (dt, hm). The job computes them for every row, also into the
// blackhole.
var q10 = Query{
	Name: "q10", Title: "Log to file system",
	Columns: []string{"auction", "bidder", "price", "dateTime", "extra", "dt", "hm"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		rows := bids("q10-bids", events, func(b *nexmark.Bid, c weir.Collector[Q10Row]) {
			c.Collect(Q10Row{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra, day(b.DateTime), minute(b.DateTime)})
		})
		emit("q10", rows, out, func(dst []byte, r Q10Row) []byte {
			return row(dst).int(r.Auction).int(r.Bidder).int(r.Price).int(r.DateTime).str(r.Extra).str(r.Dt).str(r.Hm).end()
		})
	},
}

// Q10Row is a row of q10.
type Q10Row struct {
	Auction, Bidder, Price, DateTime int64
	Extra, Dt, Hm                    string
}

// SideInputSize is the number of rows of q13's side table: key k in
// [0, SideInputSize) has the value strconv.Itoa(k), as the side tables the
// Flink suite's successors generate (RisingWave, DBSP).
const SideInputSize = 10_000

// q13: bids joined with a small static table on MOD(auction, 10000) = key,
// a lookup join (FOR SYSTEM_TIME AS OF the processing time). The table is
// loaded once per subtask in Open, as Flink's lookup join caches it.
var q13 = Query{
	Name: "q13", Title: "Bounded side input join",
	Columns: []string{"auction", "bidder", "price", "dateTime", "value"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		rows := events.Process("q13-join", &sideInputJoin{}).UID("q13-join")
		emit("q13", rows, out, func(dst []byte, r Q13Row) []byte {
			return row(dst).int(r.Auction).int(r.Bidder).int(r.Price).int(r.DateTime).str(r.Value).end()
		})
	},
}

// Q13Row is a row of q13.
type Q13Row struct {
	Auction, Bidder, Price, DateTime int64
	Value                            string
}

type sideInputJoin struct {
	table map[int64]string
}

func (j *sideInputJoin) Open(*weir.Context) error {
	j.table = make(map[int64]string, SideInputSize)
	for k := range int64(SideInputSize) {
		j.table[k] = strconv.FormatInt(k, 10)
	}
	return nil
}

func (j *sideInputJoin) ProcessElement(_ *weir.Context, ev nexmark.Event, out weir.Collector[Q13Row]) error {
	if ev.Type != nexmark.BidEvent {
		return nil
	}
	b := &ev.Bid
	// SQL's MOD keeps the sign of the dividend, as Go's % does.
	if v, ok := j.table[b.Auction%SideInputSize]; ok {
		out.Collect(Q13Row{b.Auction, b.Bidder, b.Price, b.DateTime, v})
	}
	return nil
}

// q14: bids whose euro price is in (1e6, 5e7), with the time of day of the
// bid and the number of 'c' in extra (the UDF count_char).
var q14 = Query{
	Name: "q14", Title: "Calculation",
	Columns: []string{"auction", "bidder", "price", "bidTimeType", "dateTime", "extra", "c_counts"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		rows := bids("q14-bids", events, func(b *nexmark.Bid, c weir.Collector[Q14Row]) {
			euros := euroMillis(b.Price)
			if euros > 1_000_000*1000 && euros < 50_000_000*1000 {
				c.Collect(Q14Row{b.Auction, b.Bidder, euros, bidTimeType(b.DateTime), b.DateTime, b.Extra, int64(strings.Count(b.Extra, "c"))})
			}
		})
		emit("q14", rows, out, func(dst []byte, r Q14Row) []byte {
			return row(dst).int(r.Auction).int(r.Bidder).decimal3(r.PriceMillis).str(r.BidTimeType).
				int(r.DateTime).str(r.Extra).int(r.CCounts).end()
		})
	},
}

// Q14Row is a row of q14; PriceMillis is the euro price in thousandths.
type Q14Row struct {
	Auction, Bidder, PriceMillis int64
	BidTimeType                  string
	DateTime                     int64
	Extra                        string
	CCounts                      int64
}

// bidTimeType is q14's CASE on HOUR(dateTime).
func bidTimeType(ms int64) string {
	switch h := time.UnixMilli(ms).UTC().Hour(); {
	case h >= 8 && h <= 18:
		return "dayTime"
	case h <= 6 || h >= 20:
		return "nightTime"
	}
	return "otherTime"
}

// q21: the channel id of a bid: fixed for the four hot channels, else the
// channel_id parameter of its URL; bids with neither are left out.
var q21 = Query{
	Name: "q21", Title: "Add channel id",
	Columns: []string{"auction", "bidder", "price", "channel", "channel_id"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		rows := bids("q21-bids", events, func(b *nexmark.Bid, c weir.Collector[Q21Row]) {
			if id, ok := channelID(b.Channel, b.URL); ok {
				c.Collect(Q21Row{b.Auction, b.Bidder, b.Price, b.Channel, id})
			}
		})
		emit("q21", rows, out, func(dst []byte, r Q21Row) []byte {
			return row(dst).int(r.Auction).int(r.Bidder).int(r.Price).str(r.Channel).str(r.ChannelID).end()
		})
	},
}

// Q21Row is a row of q21.
type Q21Row struct {
	Auction, Bidder, Price int64
	Channel, ChannelID     string
}

// channelID is q21's CASE, and false when its WHERE drops the bid.
func channelID(channel, url string) (string, bool) {
	switch strings.ToLower(channel) {
	case "apple":
		return "0", true
	case "google":
		return "1", true
	case "facebook":
		return "2", true
	case "baidu":
		return "3", true
	}
	return extractChannelID(url)
}

// extractChannelID is REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2):
// the value of the first channel_id parameter at the start of url or after
// an '&', up to the next '&'; false (NULL) when there is none.
func extractChannelID(url string) (string, bool) {
	const param = "channel_id="
	for i := 0; i+len(param) <= len(url); i++ {
		if (i == 0 || url[i-1] == '&') && strings.HasPrefix(url[i:], param) {
			v := url[i+len(param):]
			if j := strings.IndexByte(v, '&'); j >= 0 {
				v = v[:j]
			}
			return v, true
		}
	}
	return "", false
}

// q22: the first three directories of a bid's URL.
var q22 = Query{
	Name: "q22", Title: "URL directories",
	Columns: []string{"auction", "bidder", "price", "channel", "dir1", "dir2", "dir3"},
	build: func(events *weir.Stream[nexmark.Event], out Output) {
		rows := bids("q22-bids", events, func(b *nexmark.Bid, c weir.Collector[Q22Row]) {
			r := Q22Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel}
			r.Dir1, r.HasDir1 = splitIndex(b.URL, '/', 3)
			r.Dir2, r.HasDir2 = splitIndex(b.URL, '/', 4)
			r.Dir3, r.HasDir3 = splitIndex(b.URL, '/', 5)
			c.Collect(r)
		})
		emit("q22", rows, out, func(dst []byte, r Q22Row) []byte {
			return row(dst).int(r.Auction).int(r.Bidder).int(r.Price).str(r.Channel).
				nullable(r.Dir1, r.HasDir1).nullable(r.Dir2, r.HasDir2).nullable(r.Dir3, r.HasDir3).end()
		})
	},
}

// Q22Row is a row of q22; a Dir is NULL unless its Has is set.
type Q22Row struct {
	Auction, Bidder, Price    int64
	Channel                   string
	Dir1, Dir2, Dir3          string
	HasDir1, HasDir2, HasDir3 bool
}

// splitIndex is SPLIT_INDEX(s, sep, i): the i-th (from 0) of the fields of s
// split at sep, and false (NULL) when there are not that many.
func splitIndex(s string, sep byte, i int) (string, bool) {
	for ; i > 0; i-- {
		j := strings.IndexByte(s, sep)
		if j < 0 {
			return "", false
		}
		s = s[j+1:]
	}
	if j := strings.IndexByte(s, sep); j >= 0 {
		s = s[:j]
	}
	return s, true
}
