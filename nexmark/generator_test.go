package nexmark

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestJavaRandom checks the port of java.util.Random against values printed
// by OpenJDK 17.
func TestJavaRandom(t *testing.T) {
	var r javaRandom
	r.setSeed(42)
	got := fmt.Sprint(r.nextInt(), r.intn(10), r.intn(1000), r.intn(1<<20), r.nextLong(), r.nextDouble())
	if want := "-1170105035 3 248 50268 5694868678511409995 0.27707849007413665"; got != want {
		t.Errorf("Random(42): %s, want %s", got, want)
	}
	r.setSeed(-7)
	got = fmt.Sprint(r.intn(13), r.intn(math.MaxInt32), r.nextLong(), r.nextDouble())
	if want := "6 1935951297 -6028743012628894217 0.5214896372918163"; got != want {
		t.Errorf("Random(-7): %s, want %s", got, want)
	}
}

func TestBeamBaseTime(t *testing.T) {
	if got, want := BeamBaseTime, time.Date(2015, 7, 15, 0, 0, 0, 0, time.UTC).UnixMilli(); got != want {
		t.Errorf("BeamBaseTime = %d, want %d", got, want)
	}
}

// referenceLine renders an event in the format of testdata/java_reference.txt.
func referenceLine(ev Event) string {
	switch ev.Type {
	case PersonEvent:
		p := ev.Person
		return fmt.Sprintf("P|%d|%s|%s|%s|%s|%s|%d|%d", p.ID, p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, p.DateTime, len(p.Extra))
	case AuctionEvent:
		a := ev.Auction
		return fmt.Sprintf("A|%d|%s|%s|%d|%d|%d|%d|%d|%d|%d", a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, a.DateTime, a.Expires, a.Seller, a.Category, len(a.Extra))
	default:
		b := ev.Bid
		return fmt.Sprintf("B|%d|%d|%d|%s|%d|%d", b.Auction, b.Bidder, b.Price, b.Channel, b.DateTime, len(b.Extra))
	}
}

// TestJavaReference compares the generator with the output of a Java
// transcription of the Flink project's generators seeded per event as Beam
// seeds them (see the header of the file): every field but the letters of
// extra and the URLs must be the same.
func TestJavaReference(t *testing.T) {
	f, err := os.Open("testdata/java_reference.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var g *Generator
	var n int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "config "):
			// config <events> <rate> <firstEventID> <firstEventNumber> <outOfOrderGroupSize>
			var events, fid, fen int64
			var rate float64
			var ooo int
			if _, err := fmt.Sscan(line[len("config "):], &events, &rate, &fid, &fen, &ooo); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if g, err = NewGenerator(Config{Rate: rate, FirstEventID: fid, FirstEventNumber: fen, OutOfOrderGroupSize: ooo}); err != nil {
				t.Fatal(err)
			}
			n = 0
			continue
		}
		if got := referenceLine(g.Event(n)); got != line {
			t.Fatalf("event %d of %+v:\n got %s\nwant %s", n, g.cfg, got, line)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestDeterminism(t *testing.T) {
	write := func(cfg Config) []byte {
		var b bytes.Buffer
		if _, err := WriteJSON(&b, cfg, 5000); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b := write(Config{Seed: 7}), write(Config{Seed: 7})
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with seed 7 differ")
	}
	// Another seed changes the random draws, not the IDs, kinds or times.
	c := write(Config{Seed: 8})
	la, lc := strings.Split(string(a), "\n"), strings.Split(string(c), "\n")
	if len(la) != len(lc) {
		t.Fatalf("seeds 7 and 8 give %d and %d lines", len(la), len(lc))
	}
	same := 0
	for i := range la {
		if la[i] == lc[i] {
			same++
		}
	}
	if same > 1 { // the empty string after the last newline
		t.Errorf("seeds 7 and 8 give %d identical lines of %d", same, len(la))
	}
	if bytes.Equal(write(Config{}), a) {
		t.Error("seeds 0 and 7 give the same events")
	}
}

// stats are measured over a stream by scan.
type stats struct {
	counts                                  Counts
	hotAuction, hotBidder, hotSeller        int
	lowPrice                                int // < 10^4 cents: 2 of the 6 decades
	hotChannel                              int
	personSize, auctionSize, bidSize        float64
	auctionLength                           float64
	channelURL                              map[string]string
	channelsWithID, channelsWithoutID       int
	lastPerson, lastAuction, firstTimestamp int64
}

// scan checks the invariants of every event of the single-generator stream
// of cfg and measures it.
func scan(t *testing.T, cfg Config, n int64) *stats {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := g.cfg
	s := &stats{channelURL: map[string]string{}, lastPerson: FirstPersonID - 1, lastAuction: FirstAuctionID - 1}
	// Trimming may leave nothing of a string of spaces, as in the original.
	email := regexp.MustCompile(`^([a-z]([a-z ]*[a-z])?)?@([a-z]([a-z ]*[a-z])?)?\.com$`)
	card := regexp.MustCompile(`^\d{4} \d{4} \d{4} \d{4}$`)
	url := regexp.MustCompile(`^https://www\.nexmark\.com/[a-z_]{3,4}/[a-z_]{3,4}/[a-z_]{3,4}/item\.htm\?query=1(&channel_id=-?\d+)?$`)
	checkText := func(i int64, what, v string, maxLen int) {
		if len(v) > maxLen || strings.TrimSpace(v) != v || strings.Trim(v, "abcdefghijklmnopqrstuvwxyz ") != "" {
			t.Fatalf("event %d: %s %q is not up to %d letters and inner spaces", i, what, v, maxLen)
		}
	}
	prevTS := int64(math.MinInt64)
	for i := range n {
		ev := g.Event(i)
		s.counts.add(ev.Type)
		ts := ev.DateTime()
		if ts < prevTS && c.OutOfOrderGroupSize == 1 {
			t.Fatalf("event %d: time went back from %d to %d", i, prevTS, ts)
		}
		prevTS = ts
		if ts != g.Timestamp(i) {
			t.Fatalf("event %d: DateTime %d, Timestamp %d", i, ts, g.Timestamp(i))
		}
		// The newest person and auction at this event, from the kinds seen.
		id := g.eventID(&g.tl, c.FirstEventNumber+i)
		lastP, lastA := g.lastBase0PersonID(id)+FirstPersonID, g.lastBase0AuctionID(id)+FirstAuctionID
		switch ev.Type {
		case PersonEvent:
			p := ev.Person
			if c.OutOfOrderGroupSize == 1 && p.ID != s.lastPerson+1 && s.counts.Persons > 1 {
				t.Fatalf("event %d: person %d after person %d", i, p.ID, s.lastPerson)
			}
			s.lastPerson = p.ID
			if !slices.Contains(personNames, p.Name) || !slices.Contains(usCities, p.City) || !slices.Contains(usStates, p.State) ||
				!email.MatchString(p.EmailAddress) || !card.MatchString(p.CreditCard) {
				t.Fatalf("event %d: malformed person %+v", i, *p)
			}
			s.personSize += float64(8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State) + len(p.Extra))
		case AuctionEvent:
			a := ev.Auction
			if c.OutOfOrderGroupSize == 1 && a.ID != s.lastAuction+1 && s.counts.Auctions > 1 {
				t.Fatalf("event %d: auction %d after auction %d", i, a.ID, s.lastAuction)
			}
			s.lastAuction = a.ID
			checkText(i, "itemName", a.ItemName, 19)
			checkText(i, "description", a.Description, 99)
			hot := (lastP-FirstPersonID)/hotBatch*hotBatch + FirstPersonID
			if a.Seller == hot {
				s.hotSeller++
			} else if a.Seller < max(lastP-int64(c.NumActivePeople)+1, FirstPersonID) || a.Seller > lastP+personIDLead {
				t.Fatalf("event %d: seller %d is neither hot (%d) nor among the active people up to %d", i, a.Seller, hot, lastP)
			}
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories || a.Expires <= a.DateTime ||
				a.InitialBid < 100 || a.Reserve < a.InitialBid {
				t.Fatalf("event %d: malformed auction %+v", i, *a)
			}
			s.auctionSize += float64(8 + len(a.ItemName) + len(a.Description) + 40 + len(a.Extra))
			s.auctionLength += float64(a.Expires - a.DateTime)
		case BidEvent:
			b := ev.Bid
			hotA := (lastA-FirstAuctionID)/hotBatch*hotBatch + FirstAuctionID
			if b.Auction == hotA {
				s.hotAuction++
			} else if b.Auction < max(lastA-int64(c.NumInFlightAuctions), FirstAuctionID) || b.Auction > lastA+auctionIDLead {
				t.Fatalf("event %d: auction %d is neither hot (%d) nor in flight up to %d", i, b.Auction, hotA, lastA)
			}
			hotB := (lastP-FirstPersonID)/hotBatch*hotBatch + 1 + FirstPersonID
			if b.Bidder == hotB {
				s.hotBidder++
			} else if b.Bidder < max(lastP-int64(c.NumActivePeople)+1, FirstPersonID) || b.Bidder > lastP+personIDLead {
				t.Fatalf("event %d: bidder %d is neither hot (%d) nor among the active people up to %d", i, b.Bidder, hotB, lastP)
			}
			if b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("event %d: price %d out of [100, 1e8]", i, b.Price)
			}
			if b.Price < 10_000 {
				s.lowPrice++
			}
			if slices.Contains(hotChannels, b.Channel) {
				s.hotChannel++
			} else if !strings.HasPrefix(b.Channel, "channel-") {
				t.Fatalf("event %d: channel %q", i, b.Channel)
			}
			if u, ok := s.channelURL[b.Channel]; ok && u != b.URL {
				t.Fatalf("event %d: channel %q has URLs %q and %q", i, b.Channel, u, b.URL)
			} else if !ok {
				if !url.MatchString(b.URL) {
					t.Fatalf("event %d: url %q", i, b.URL)
				}
				s.channelURL[b.Channel] = b.URL
				if num, err := strconv.Atoi(strings.TrimPrefix(b.Channel, "channel-")); err == nil {
					if _, q, ok := strings.Cut(b.URL, "&channel_id="); ok {
						s.channelsWithID++
						// Math.abs(Integer.reverse(i)), Integer.MIN_VALUE staying negative.
						want := int32(bits.Reverse32(uint32(num)))
						if want < 0 {
							want = -want
						}
						if q != strconv.Itoa(int(want)) {
							t.Fatalf("event %d: channel %d has channel_id=%s, want %d", i, num, q, want)
						}
					} else {
						s.channelsWithoutID++
					}
				}
			}
			s.bidSize += float64(32 + len(b.Extra))
		}
	}
	return s
}

// TestDistributions measures a million events against the spec: the mix of
// kinds, the hot ratios (P(hot) = 1 - 1/ratio, plus the chance that a
// random pick hits the hot ID), the log-uniform price, the record sizes
// that extra pads to, the auction length and the channels.
func TestDistributions(t *testing.T) {
	if testing.Short() {
		t.Skip("a million events")
	}
	const n = 1_000_000
	s := scan(t, Config{}, n)
	if want := (Counts{Persons: n / 50, Auctions: 3 * n / 50, Bids: 46 * n / 50}); s.counts != want {
		t.Errorf("counts = %+v, want %+v", s.counts, want)
	}
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %.4f, want %.4f ± %.4f", what, got, want, tol)
		}
	}
	bids, auctions, persons := float64(s.counts.Bids), float64(s.counts.Auctions), float64(s.counts.Persons)
	// A random auction pick covers about NumInFlightAuctions+1+lead IDs, a
	// random person pick NumActivePeople+lead.
	near("P(hot auction)", float64(s.hotAuction)/bids, 0.5+0.5/111, 0.005)
	near("P(hot bidder)", float64(s.hotBidder)/bids, 0.75+0.25/1010, 0.005)
	near("P(hot seller)", float64(s.hotSeller)/auctions, 0.75+0.25/1010, 0.01)
	near("P(price < 10^4)", float64(s.lowPrice)/bids, 1.0/3, 0.005)
	near("P(hot channel)", float64(s.hotChannel)/bids, 0.5, 0.005)
	// extra's length is uniform in [d - δ, d + δ), whose mean is d - 1/2.
	near("person size", s.personSize/persons, 199.5, 1)
	near("auction size", s.auctionSize/auctions, 499.5, 1)
	near("bid size", s.bidSize/bids, 99.5, 0.2)
	// 1 + U[0, 2h) with h the time of NumInFlightAuctions·50/3 events.
	near("auction length (ms)", s.auctionLength/auctions, 1+(166-1)/1.0, 3)
	withID := float64(s.channelsWithID) / float64(s.channelsWithID+s.channelsWithoutID)
	near("P(channel URL has channel_id)", withID, 0.9, 0.02)
	if len(s.channelURL) < 10_000 {
		t.Errorf("%d channels seen, want the 4 hot ones and most of the 10000 others", len(s.channelURL))
	}
}

// TestInvariantsOtherConfigs checks the ID derivation with Flink's first
// event ID and number, other proportions and out-of-order groups.
func TestInvariantsOtherConfigs(t *testing.T) {
	for _, cfg := range []Config{
		{FirstEventID: 1, FirstEventNumber: 1},
		{PersonProportion: 3, AuctionProportion: 5, BidProportion: 12, NumActivePeople: 50, NumInFlightAuctions: 20},
		{Seed: -99, HotAuctionRatio: 1, HotBiddersRatio: 1, HotSellersRatio: 1, AvgBidByteSize: 20},
		{OutOfOrderGroupSize: 50, Rate: 1234.5},
	} {
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) {
			s := scan(t, cfg, 50_000)
			c := cfg
			c.EnsureDefaults()
			total := int64(c.PersonProportion + c.AuctionProportion + c.BidProportion)
			if got, want := s.counts.Persons*total/50_000, int64(c.PersonProportion); got != want {
				t.Errorf("persons per %d events = %d, want %d", total, got, want)
			}
			if c.HotAuctionRatio == 1 && int64(s.hotAuction) > s.counts.Bids/50 {
				t.Errorf("%d of %d bids go to the hot auction with HotAuctionRatio 1", s.hotAuction, s.counts.Bids)
			}
		})
	}
}

func TestTimestamps(t *testing.T) {
	// At 1000 events/s, event n is n ms after the base time.
	g, err := NewGenerator(Config{Rate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{0, 1, 2, 999, 1000, 123_456_789} {
		if got, want := g.Event(n).DateTime(), BeamBaseTime+n; got != want {
			t.Errorf("rate 1000: event %d at %d, want %d", n, got, want)
		}
	}
	// At the default 10000 events/s, ten events share a millisecond.
	g, _ = NewGenerator(Config{BaseTime: 5})
	for n := range int64(100_000) {
		if got, want := g.Timestamp(n), 5+n/10; got != want {
			t.Fatalf("rate 10000: event %d at %d, want %d", n, got, want)
		}
	}
	// Out-of-order groups permute IDs and times within each group, never
	// below the watermark.
	const size = 50
	g, _ = NewGenerator(Config{OutOfOrderGroupSize: size, Rate: 100})
	for group := range int64(20) {
		var ids, times []int64
		for n := group * size; n < (group+1)*size; n++ {
			ids = append(ids, g.eventID(&g.tl, n))
			ts := g.Timestamp(n)
			times = append(times, ts)
			if wm := g.Watermark(n); ts < wm || wm != BeamBaseTime+group*size*10 {
				t.Fatalf("event %d at %d, watermark %d", n, ts, wm)
			}
		}
		slices.Sort(ids)
		for j, id := range ids {
			if id != group*size+int64(j) {
				t.Fatalf("group %d: IDs %v are not a permutation of the group", group, ids)
			}
		}
		if slices.IsSorted(times) {
			t.Errorf("group %d: times %v are in order", group, times)
		}
	}
}
