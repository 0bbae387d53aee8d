package queries_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/nexmark"
	"github.com/weirstream/weir/nexmark/queries"
)

// runEvents runs q at parallelism 1 over evs, in order, and returns its
// rows.
func runEvents(t *testing.T, name string, evs []nexmark.Event) []string {
	t.Helper()
	q, err := queries.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	env := weir.NewEnvironment(weir.Options{Parallelism: 1})
	sink := collect.Transactional[string]()
	q.Build(queries.Events(env, datagen.FromSlice(evs)), queries.Output{Sink: sink})
	if err := env.Execute(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return sink.Results()
}

func bid(auction, bidder, price, at int64, extra string) nexmark.Event {
	return nexmark.BidOf(nexmark.Bid{Auction: auction, Bidder: bidder, Price: price, Channel: "c", URL: "u", DateTime: at, Extra: extra})
}

// TestTopNTies: a bid with the price of the tenth ranks after it and stays
// out; an equal price ranks after the bids that came first.
func TestTopNTies(t *testing.T) {
	var evs []nexmark.Event
	for i := range int64(11) {
		evs = append(evs, bid(7, i, 500, 1000+i, "same"))
	}
	evs = append(evs, bid(7, 99, 600, 2000, "higher"))
	got := runEvents(t, "q19", evs)
	want := []string{
		"+I,7,0,500,c,u,1000,same,1", "+I,7,1,500,c,u,1001,same,2", "+I,7,2,500,c,u,1002,same,3",
		"+I,7,3,500,c,u,1003,same,4", "+I,7,4,500,c,u,1004,same,5", "+I,7,5,500,c,u,1005,same,6",
		"+I,7,6,500,c,u,1006,same,7", "+I,7,7,500,c,u,1007,same,8", "+I,7,8,500,c,u,1008,same,9",
		"+I,7,9,500,c,u,1009,same,10",
		// bidder 10 ties with the tenth and stays out; 99 takes rank 1 and
		// every other rank moves down one, the tenth falling out.
		"-U,7,0,500,c,u,1000,same,1", "+U,7,99,600,c,u,2000,higher,1",
	}
	for i := 1; i <= 9; i++ {
		prev, next := int64(i), int64(i-1)
		want = append(want,
			"-U,7,"+itoa(prev)+",500,c,u,"+itoa(1000+prev)+",same,"+itoa(int64(i+1)),
			"+U,7,"+itoa(next)+",500,c,u,"+itoa(1000+next)+",same,"+itoa(int64(i+1)))
	}
	if !slices.Equal(got, want) {
		t.Errorf("q19 rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDeduplicationTies: a later bid with an equal dateTime replaces the
// last one; an earlier one does not.
func TestDeduplicationTies(t *testing.T) {
	got := runEvents(t, "q18", []nexmark.Event{
		bid(7, 1, 100, 1000, "first"), bid(7, 1, 200, 1000, "second"), bid(7, 1, 300, 999, "late"),
	})
	want := []string{
		"+I,7,1,100,c,u,1000,first",
		"-U,7,1,100,c,u,1000,first", "+U,7,1,200,c,u,1000,second",
	}
	if !slices.Equal(got, want) {
		t.Errorf("q18 rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWinningBidTies: the highest price wins, then the earliest bid; of two
// equal bids the first stays; bids outside the auction's time do not count,
// also when they come before the auction.
func TestWinningBidTies(t *testing.T) {
	a := &nexmark.Auction{ID: 7, ItemName: "i", Description: "d", InitialBid: 1, Reserve: 2, DateTime: 1000, Expires: 2000, Seller: 3, Category: 10, Extra: "x"}
	got := runEvents(t, "q9", []nexmark.Event{
		bid(7, 1, 900, 2500, "expired"),
		nexmark.AuctionOf(a),
		bid(7, 2, 100, 1500, "b2"),
		bid(7, 3, 100, 1400, "b3-earlier"),
		bid(7, 4, 100, 1400, "b4-equal"),
		bid(7, 5, 50, 1100, "b5-lower"),
	})
	const auction = "7,i,d,1,2,1000,2000,3,10,x,"
	want := []string{
		"+I," + auction + "7,2,100,1500,b2",
		"-U," + auction + "7,2,100,1500,b2", "+U," + auction + "7,3,100,1400,b3-earlier",
	}
	if !slices.Equal(got, want) {
		t.Errorf("q9 rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAverageRetracts: q4's average follows the closing prices as they
// rise, retracting its earlier rows. Auctions and bids reach the join on
// two inputs, so the steps depend on which comes first; the changelog must
// replay to the final average either way.
func TestAverageRetracts(t *testing.T) {
	a1 := &nexmark.Auction{ID: 1, DateTime: 1000, Expires: 5000, Category: 10}
	a2 := &nexmark.Auction{ID: 2, DateTime: 1000, Expires: 5000, Category: 10}
	got := runEvents(t, "q4", []nexmark.Event{
		nexmark.AuctionOf(a1), nexmark.AuctionOf(a2),
		bid(1, 9, 100, 1100, ""),
		bid(2, 9, 300, 1200, ""),
		bid(1, 9, 50, 1300, ""),
		bid(1, 9, 500, 1400, ""),
		bid(2, 9, 700, 900, ""), // before auction 2 started
	})
	// Closing prices 500 and 300: average 400.
	live := map[string]int{}
	retracted := false
	for _, r := range got {
		kind, rest, _ := strings.Cut(r, ",")
		switch kind {
		case "+I", "+U":
			live[rest]++
		case "-U", "-D":
			if live[rest] == 0 {
				t.Fatalf("%q retracts a row that is not there; rows:\n%s", r, strings.Join(got, "\n"))
			}
			live[rest]--
			retracted = true
		}
	}
	var final []string
	for k, n := range live {
		for range n {
			final = append(final, k)
		}
	}
	if !slices.Equal(final, []string{"10,400"}) || !retracted {
		t.Errorf("q4 rows:\n%s\nreplay to %q, want [10,400] through retractions", strings.Join(got, "\n"), final)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestHighestBidWindowEdges: q7 joins a bid with the maximum of every window
// whose [end - 10 s, end] holds it, so a bid at a window's start also joins
// the window before, where it does not count toward the maximum.
func TestHighestBidWindowEdges(t *testing.T) {
	got := runEvents(t, "q7", []nexmark.Event{
		bid(1, 1, 10, 5000, "a"),
		bid(2, 2, 10, 10000, "b-edge"),
		bid(3, 3, 5, 12000, "c"),
		bid(4, 4, 99, 20000, "d-edge"), // the next window's maximum, above window 1's
	})
	slices.Sort(got)
	want := []string{"1,1,10,5000,a", "2,2,10,10000,b-edge", "2,2,10,10000,b-edge", "4,4,99,20000,d-edge"}
	if !slices.Equal(got, want) {
		t.Errorf("q7 rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
