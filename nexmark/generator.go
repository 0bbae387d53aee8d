package nexmark

import (
	"math"
	"math/bits"
	"strconv"
	"sync"
)

// Word lists of PersonGenerator and BidGenerator.
var (
	usStates    = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities    = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames  = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames   = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	hotChannels = []string{"Google", "Facebook", "Baidu", "Apple"}
)

// personNames holds every "first last" name, indexed first*len(lastNames)+last,
// so that naming a person allocates nothing.
var personNames = func() []string {
	names := make([]string, 0, len(firstNames)*len(lastNames))
	for _, f := range firstNames {
		for _, l := range lastNames {
			names = append(names, f+" "+l)
		}
	}
	return names
}()

// channelNames holds "channel-i" for every non-hot channel i.
var channelNames = sync.OnceValue(func() []string {
	names := make([]string, numChannels)
	for i := range names {
		names[i] = "channel-" + strconv.Itoa(i)
	}
	return names
})

// defaultPadSize is the size of the string that extra fields are cut from,
// as Flink's 1 MiB pre-generated string.
const defaultPadSize = 1 << 20

var defaultPad = sync.OnceValue(func() string { return makePad(defaultPadSize) })

// makePad returns n pseudo-random letters a–z (always the same ones).
func makePad(n int) string {
	var r javaRandom
	r.setSeed(0x6e65786d61726b) // "nexmark"
	b := make([]byte, n)
	for i := 0; i < n; {
		v := uint32(r.nextInt())
		for j := 0; j < 6 && i < n; j++ { // 26^6 < 2^32
			b[i] = 'a' + byte(v%26)
			v /= 26
			i++
		}
	}
	return string(b)
}

// timeline maps event numbers to event IDs and timestamps: it is what a
// Flink/Beam GeneratorConfig is to a NexmarkGenerator.
type timeline struct {
	firstEventID int64
	// delayUs is interEventDelayUs: 1e6/rate·numEventGenerators, in the
	// floating point of Flink's GeneratorConfig (Beam rounds it to whole
	// microseconds, which makes every timestamp equal above 2M events/s).
	delayUs float64
}

// newTimeline returns the timeline of one of generators parallel generators
// of a resolved cfg whose IDs start at firstEventID.
func newTimeline(cfg *Config, firstEventID, generators int64) timeline {
	// The order of the operations is Flink's, for the same rounding.
	return timeline{firstEventID: firstEventID, delayUs: 1e6 / cfg.Rate * float64(generators)}
}

// Generator computes Nexmark events. Event n of a generator is a pure
// function of its Config and n: its random draws come from a
// java.util.Random seeded with the event ID (as in Beam), so events can be
// computed in any order, by any number of generators, and again after a
// restore.
//
// A Generator is not safe for concurrent use; make one per goroutine.
type Generator struct {
	cfg Config
	tl  timeline

	total, personProp, auctionProp int64
	// eventsForAuctions is how many events it takes to generate
	// NumInFlightAuctions auctions; it sets the auction length.
	eventsForAuctions int64
	// seedMix is XORed into an event ID to seed its draws.
	seedMix int64
	// pad is the string that extra fields are cut from.
	pad string
	// hotURLs are the URLs of hotChannels; channelURLs those of the other
	// channels, filled in as channels are first used.
	hotURLs     [4]string
	channelURLs []string

	rnd javaRandom
	buf []byte
}

// NewGenerator returns a generator of the whole stream that cfg describes,
// as a single generator makes it (the stream that a source splits among its
// subtasks). cfg.Events, Split, RateLimited and BatchSize play no part.
func NewGenerator(cfg Config) (*Generator, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	return newGenerator(cfg), nil
}

// newGenerator returns the single generator of a resolved cfg.
func newGenerator(cfg Config) *Generator {
	g := &Generator{
		cfg:         cfg,
		tl:          newTimeline(&cfg, cfg.FirstEventID, 1),
		personProp:  int64(cfg.PersonProportion),
		auctionProp: int64(cfg.AuctionProportion),
		total:       int64(cfg.PersonProportion + cfg.AuctionProportion + cfg.BidProportion),
		channelURLs: make([]string, numChannels),
	}
	g.eventsForAuctions = int64(cfg.NumInFlightAuctions) * g.total / g.auctionProp
	if cfg.Seed != 0 {
		g.seedMix = int64(mix64(uint64(cfg.Seed)))
	}
	g.pad = defaultPad()
	if need := maxExtraSize(max(cfg.AvgPersonByteSize, cfg.AvgAuctionByteSize, cfg.AvgBidByteSize)); need > len(g.pad) {
		g.pad = makePad(need)
	}
	for i := range g.hotURLs {
		g.hotURLs[i] = baseURL(g.auxRandom(auxHotURL, int64(i)))
	}
	return g
}

// maxExtraSize bounds the length of an extra field padding to avg.
func maxExtraSize(avg int) int { return avg + int(math.Ceil(float64(avg)*0.2)) + 1 }

// Event returns event n of the stream (n >= 0): the event with event number
// Config.FirstEventNumber + n.
func (g *Generator) Event(n int64) Event { return g.event(&g.tl, g.cfg.FirstEventNumber+n) }

// Timestamp returns the event time of event n, in milliseconds since the
// Unix epoch.
func (g *Generator) Timestamp(n int64) int64 {
	return g.tl.timestamp(g.cfg.BaseTime, g.adjust(g.cfg.FirstEventNumber+n))
}

// Watermark returns a lower bound of the event times of events n, n+1, …:
// the event time of the first event number of n's out-of-order group.
func (g *Generator) Watermark(n int64) int64 {
	e := g.cfg.FirstEventNumber + n
	size := int64(g.cfg.OutOfOrderGroupSize)
	return g.tl.timestamp(g.cfg.BaseTime, e/size*size)
}

// timestamp is GeneratorConfig.timestampForEvent.
func (tl *timeline) timestamp(baseTime, eventNumber int64) int64 {
	return baseTime + int64(float64(eventNumber)*tl.delayUs)/1000
}

// adjust is GeneratorConfig.nextAdjustedEventNumber: the event number whose
// ID and timestamp event number e takes, which permutes each out-of-order
// group.
func (g *Generator) adjust(e int64) int64 {
	size := int64(g.cfg.OutOfOrderGroupSize)
	if size == 1 {
		return e
	}
	return e/size*size + e*953%size
}

// eventID returns the ID of event number e on tl.
func (g *Generator) eventID(tl *timeline, e int64) int64 { return tl.firstEventID + g.adjust(e) }

// event is NexmarkGenerator.nextEvent for the event with event number e.
func (g *Generator) event(tl *timeline, e int64) Event {
	adjusted := g.adjust(e)
	id := tl.firstEventID + adjusted
	ts := tl.timestamp(g.cfg.BaseTime, adjusted)
	g.rnd.setSeed(id ^ g.seedMix)
	switch rem := id % g.total; {
	case rem < g.personProp:
		return Event{Type: PersonEvent, Person: g.person(id, ts)}
	case rem < g.personProp+g.auctionProp:
		return Event{Type: AuctionEvent, Auction: g.auction(tl, id, adjusted, ts)}
	default:
		return Event{Type: BidEvent, Bid: g.bid(id, ts)}
	}
}

// lastBase0PersonID is the ID, less FirstPersonID, of the newest person at
// event ID id (the person itself if id is a person's).
func (g *Generator) lastBase0PersonID(id int64) int64 {
	epoch, offset := id/g.total, id%g.total
	if offset >= g.personProp {
		offset = g.personProp - 1
	}
	return epoch*g.personProp + offset
}

// lastBase0AuctionID is the ID, less FirstAuctionID, of the newest auction
// at event ID id (the auction itself if id is an auction's).
func (g *Generator) lastBase0AuctionID(id int64) int64 {
	epoch, offset := id/g.total, id%g.total
	switch {
	case offset < g.personProp:
		epoch--
		offset = g.auctionProp - 1
	case offset >= g.personProp+g.auctionProp:
		offset = g.auctionProp - 1
	default:
		offset -= g.personProp
	}
	return epoch*g.auctionProp + offset
}

// nextBase0PersonID picks one of the NumActivePeople newest persons, or one
// of the personIDLead next ones.
func (g *Generator) nextBase0PersonID(id int64) int64 {
	numPeople := g.lastBase0PersonID(id) + 1
	active := min(numPeople, int64(g.cfg.NumActivePeople))
	return numPeople - active + g.rnd.longn(active+personIDLead)
}

// nextBase0AuctionID picks one of the auctions in flight, or one of the
// auctionIDLead next ones.
func (g *Generator) nextBase0AuctionID(id int64) int64 {
	maxAuction := g.lastBase0AuctionID(id)
	minAuction := max(maxAuction-int64(g.cfg.NumInFlightAuctions), 0)
	return minAuction + g.rnd.longn(maxAuction-minAuction+1+auctionIDLead)
}

// person is PersonGenerator.nextPerson.
func (g *Generator) person(id, ts int64) *Person {
	name := personNames[int(g.rnd.intn(int32(len(firstNames))))*len(lastNames)+int(g.rnd.intn(int32(len(lastNames))))]
	// The email address and the credit card share one allocation.
	b := appendString(&g.rnd, g.buf[:0], 7, ' ')
	b = append(b, '@')
	b = appendString(&g.rnd, b, 5, ' ')
	b = append(b, ".com"...)
	emailEnd := len(b)
	for i := range 4 {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendDigits4(b, g.rnd.intn(10_000))
	}
	g.buf = b
	s := string(b)
	p := &Person{
		ID:           g.lastBase0PersonID(id) + FirstPersonID,
		Name:         name,
		EmailAddress: s[:emailEnd],
		CreditCard:   s[emailEnd:],
		City:         usCities[g.rnd.intn(int32(len(usCities)))],
		State:        usStates[g.rnd.intn(int32(len(usStates)))],
		DateTime:     ts,
	}
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = g.extra(size, g.cfg.AvgPersonByteSize)
	return p
}

// auction is AuctionGenerator.nextAuction; adjusted is the event number
// that gives its timestamp ts.
func (g *Generator) auction(tl *timeline, id, adjusted, ts int64) *Auction {
	a := &Auction{ID: g.lastBase0AuctionID(id) + FirstAuctionID, DateTime: ts}
	if g.rnd.intn(int32(g.cfg.HotSellersRatio)) > 0 {
		a.Seller = g.lastBase0PersonID(id) / hotBatch * hotBatch
	} else {
		a.Seller = g.nextBase0PersonID(id)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(g.rnd.intn(NumCategories))
	a.InitialBid = g.price()
	// The auction lasts on average as long as it takes to generate
	// NumInFlightAuctions more auctions.
	horizon := tl.timestamp(g.cfg.BaseTime, adjusted+g.eventsForAuctions) - ts
	a.Expires = ts + 1 + g.rnd.longn(max(2*horizon, 1))
	b := appendString(&g.rnd, g.buf[:0], 20, ' ')
	nameEnd := len(b)
	b = appendString(&g.rnd, b, 100, ' ')
	g.buf = b
	s := string(b)
	a.ItemName, a.Description = s[:nameEnd], s[nameEnd:]
	a.Reserve = a.InitialBid + g.price()
	size := 8 + len(a.ItemName) + len(a.Description) + 8 + 8 + 8 + 8 + 8
	a.Extra = g.extra(size, g.cfg.AvgAuctionByteSize)
	return a
}

// bid is BidGenerator.nextBid of the Flink project, with the bidder ID
// offset by FirstPersonID once, as in Beam: Flink adds it twice
// (nexmark/nexmark issue #30), which names persons that do not exist.
func (g *Generator) bid(id, ts int64) Bid {
	b := Bid{DateTime: ts}
	if g.rnd.intn(int32(g.cfg.HotAuctionRatio)) > 0 {
		b.Auction = g.lastBase0AuctionID(id) / hotBatch * hotBatch
	} else {
		b.Auction = g.nextBase0AuctionID(id)
	}
	b.Auction += FirstAuctionID
	if g.rnd.intn(int32(g.cfg.HotBiddersRatio)) > 0 {
		// The second person of the batch, so that hot bidders and hot
		// sellers differ.
		b.Bidder = g.lastBase0PersonID(id)/hotBatch*hotBatch + 1
	} else {
		b.Bidder = g.nextBase0PersonID(id)
	}
	b.Bidder += FirstPersonID
	b.Price = g.price()
	if g.rnd.intn(hotChannelsRatio) > 0 {
		i := g.rnd.intn(int32(len(hotChannels)))
		b.Channel, b.URL = hotChannels[i], g.hotURLs[i]
	} else {
		i := g.rnd.intn(numChannels)
		b.Channel, b.URL = channelNames()[i], g.channelURL(i)
	}
	b.Extra = g.extra(8+8+8+8, g.cfg.AvgBidByteSize)
	return b
}

// price is PriceGenerator.nextPrice: log-uniform in [100, 10^8] cents.
func (g *Generator) price() int64 {
	return int64(math.Floor(math.Pow(10, g.rnd.nextDouble()*6)*100 + 0.5))
}

// appendString is StringsGenerator.nextString(random, maxLength, special):
// 3 to maxLength-1 letters a–z, each replaced by special with probability
// 1/13, trimmed of spaces at both ends as Java's String.trim does.
func appendString(r *javaRandom, dst []byte, maxLength int32, special byte) []byte {
	start := len(dst)
	for n := 3 + r.intn(maxLength-3); n > 0; n-- {
		if r.intn(13) == 0 {
			dst = append(dst, special)
		} else {
			dst = append(dst, 'a'+byte(r.intn(26)))
		}
	}
	if special != ' ' {
		return dst
	}
	for len(dst) > start && dst[len(dst)-1] == ' ' {
		dst = dst[:len(dst)-1]
	}
	lead := 0
	for start+lead < len(dst) && dst[start+lead] == ' ' {
		lead++
	}
	if lead > 0 {
		dst = append(dst[:start], dst[start+lead:]...)
	}
	return dst
}

// extra is StringsGenerator.nextExtra: a string that brings a record of
// currentSize bytes to avgSize bytes on average. Its length follows the
// original (avgSize-currentSize ± 20%); its letters are cut from a
// pre-generated string at a random offset, as the Flink project does, so
// that padding allocates nothing.
func (g *Generator) extra(currentSize, avgSize int) string {
	if currentSize > avgSize {
		return ""
	}
	desired := avgSize - currentSize
	delta := int(math.Floor(float64(desired)*0.2 + 0.5))
	size := desired - delta
	if delta != 0 {
		size += int(g.rnd.intn(int32(2 * delta)))
	}
	if size == 0 {
		return ""
	}
	off := int(g.rnd.intn(int32(len(g.pad) - size + 1)))
	return g.pad[off : off+size]
}

// Kinds of auxiliary random streams, which make the channel URLs. Flink
// draws them from unseeded Randoms once per JVM; here they follow the seed.
const (
	auxHotURL int64 = iota + 1
	auxChannelURL
)

func (g *Generator) auxRandom(kind, i int64) *javaRandom {
	r := &javaRandom{}
	r.setSeed(int64(mix64(uint64(g.cfg.Seed) ^ uint64(kind)<<56 ^ uint64(i))))
	return r
}

// baseURL is BidGenerator.getBaseUrl.
func baseURL(r *javaRandom) string {
	b := make([]byte, 0, 64)
	b = append(b, "https://www.nexmark.com/"...)
	for range 3 {
		b = appendString(r, b, 5, '_')
		b = append(b, '/')
	}
	b = append(b, "item.htm?query=1"...)
	return string(b)
}

// channelURL is BidGenerator.getNextChannelAndurl: the URL of channel i,
// which names the channel in 9 of 10 channels.
func (g *Generator) channelURL(i int32) string {
	if u := g.channelURLs[i]; u != "" {
		return u
	}
	r := g.auxRandom(auxChannelURL, int64(i))
	u := baseURL(r)
	if r.intn(10) > 0 {
		// Math.abs(Integer.reverse(i)): for channel 1 that is
		// Integer.MIN_VALUE, which abs leaves negative.
		id := int32(bits.Reverse32(uint32(i)))
		if id < 0 {
			id = -id
		}
		u += "&channel_id=" + strconv.Itoa(int(id))
	}
	g.channelURLs[i] = u
	return u
}

// appendDigits4 is String.format("%04d", v) for v in [0, 9999].
func appendDigits4(dst []byte, v int32) []byte {
	return append(dst, '0'+byte(v/1000), '0'+byte(v/100%10), '0'+byte(v/10%10), '0'+byte(v%10))
}

// mix64 is the finalizer of SplitMix64: a bijective hash of 64 bits.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
