package nexmark

import (
	"fmt"
	"math"
)

// Constants of the Nexmark generators (GeneratorConfig, PersonGenerator,
// AuctionGenerator and BidGenerator in Beam and in nexmark/nexmark).
const (
	// FirstPersonID is the ID of the first person; person IDs are dense from it.
	FirstPersonID = 1000
	// FirstAuctionID is the ID of the first auction; auction IDs are dense from it.
	FirstAuctionID = 1000
	// FirstCategoryID is the smallest category; there are NumCategories.
	FirstCategoryID = 10
	// NumCategories is the number of auction categories.
	NumCategories = 5

	// hotBatch is HOT_SELLER_RATIO = HOT_AUCTION_RATIO = HOT_BIDDER_RATIO:
	// a hot ID is the first (second, for bidders) of the batch of hotBatch
	// IDs that holds the newest one.
	hotBatch = 100
	// personIDLead and auctionIDLead are PERSON_ID_LEAD and AUCTION_ID_LEAD:
	// a random pick may name up to this many IDs not generated yet.
	personIDLead  = 10
	auctionIDLead = 10

	// hotChannelsRatio, numChannels: Flink's HOT_CHANNELS_RATIO and
	// CHANNELS_NUMBER.
	hotChannelsRatio = 2
	numChannels      = 10_000
)

// BeamBaseTime is the default Config.BaseTime: Beam's NexmarkUtils.BASE_TIME,
// 2015-07-15T00:00:00Z, in milliseconds since the Unix epoch.
const BeamBaseTime int64 = 1_436_918_400_000

// Defaults of the Config fields (Flink's NexmarkConfiguration; Beam's match).
const (
	DefaultRate                = 10_000
	DefaultPersonProportion    = 1
	DefaultAuctionProportion   = 3
	DefaultBidProportion       = 46
	DefaultAvgPersonByteSize   = 200
	DefaultAvgAuctionByteSize  = 500
	DefaultAvgBidByteSize      = 100
	DefaultHotAuctionRatio     = 2
	DefaultHotSellersRatio     = 4
	DefaultHotBiddersRatio     = 4
	DefaultNumInFlightAuctions = 100
	DefaultNumActivePeople     = 1000
	DefaultOutOfOrderGroupSize = 1
	DefaultBatchSize           = 1024
)

// Limits of the Config fields.
const (
	// MinRate is the smallest accepted Rate, which keeps timestamps far from
	// overflowing.
	MinRate = 1e-3
	// MaxByteSize bounds the Avg*ByteSize fields.
	MaxByteSize = 1 << 24
	// MaxBatchSize bounds BatchSize.
	MaxBatchSize = 1 << 16
	// maxProportion bounds each proportion, so that their sum times the
	// largest event ID cannot overflow.
	maxProportion = 1 << 20
)

// SplitMode says how a source cuts the event stream among its subtasks.
type SplitMode int8

const (
	// SplitInterleaved (the default) gives subtask k of p the event numbers
	// k, k+p, k+2p, … of the one stream that a single generator makes, with
	// their IDs and timestamps. The union of the subtasks' events is that
	// stream whatever the parallelism, so query results do not depend on it,
	// and all subtasks advance through event time together.
	SplitInterleaved SplitMode = iota
	// SplitFlink cuts the stream as Flink's Nexmark source does
	// (GeneratorConfig.split with numEventGenerators = parallelism): subtask k
	// gets its own contiguous range of event IDs, of Events/p events, and
	// every subtask starts at the same event number, on a timeline whose
	// inter-event delay is p/Rate. The data then depend on the parallelism,
	// as in Flink.
	SplitFlink
)

func (m SplitMode) String() string {
	switch m {
	case SplitInterleaved:
		return "interleaved"
	case SplitFlink:
		return "flink"
	}
	return fmt.Sprintf("SplitMode(%d)", int8(m))
}

// Config configures the generator and the sources built on it. The zero value
// gives the defaults of Flink's and Beam's Nexmark configuration, and a stream
// that is deterministic: the same Config gives the same events, byte for
// byte. Every zero field stands for its default.
type Config struct {
	// Events is the number of events the source generates, over all its
	// subtasks; >= 0. Default 0: unbounded.
	Events int64
	// Rate is the event rate of the whole stream in event time, in events per
	// second (Flink's firstEventRate, the "tps" of its suites): event n has
	// the timestamp BaseTime + n·1000/Rate ms. It does not limit how fast
	// events are produced; RateLimited does. Finite and >= MinRate. Default
	// 0: 10000.
	Rate float64
	// BaseTime is the timestamp of event number 0, in milliseconds since the
	// Unix epoch. Default 0: BeamBaseTime (Flink uses the wall-clock time at
	// start, which is not reproducible).
	BaseTime int64
	// FirstEventID and FirstEventNumber offset the event IDs (which choose
	// the kind of each event and seed its random draws) and the event numbers
	// (which give its timestamp); >= 0. Default 0 for both, as in Beam's
	// standard configuration; Flink's table source uses 1 and 1.
	FirstEventID     int64
	FirstEventNumber int64

	// PersonProportion, AuctionProportion and BidProportion set the mix of
	// event kinds: of every Person+Auction+Bid consecutive event IDs, the
	// first PersonProportion are persons, the next AuctionProportion
	// auctions, the rest bids. Each in [1, 2^20]. Defaults 1, 3 and 46.
	PersonProportion  int
	AuctionProportion int
	BidProportion     int

	// AvgPersonByteSize, AvgAuctionByteSize and AvgBidByteSize are the
	// average sizes the extra field pads each kind of record to, in
	// [1, MaxByteSize]. Defaults 200, 500 and 100.
	AvgPersonByteSize  int
	AvgAuctionByteSize int
	AvgBidByteSize     int

	// HotAuctionRatio, HotSellersRatio and HotBiddersRatio make a bid go to a
	// hot auction, an auction come from a hot seller and a bid come from a
	// hot bidder with probability 1 - 1/ratio; >= 1 (1: never hot).
	// Defaults 2, 4 and 4.
	HotAuctionRatio int
	HotSellersRatio int
	HotBiddersRatio int

	// NumInFlightAuctions is the window of recent auctions a non-hot bid
	// picks from; it also sets the average auction length. >= 1. Default
	// 100.
	NumInFlightAuctions int
	// NumActivePeople is the window of recent persons a non-hot seller or
	// bidder is picked from; >= 1. Default 1000.
	NumActivePeople int
	// OutOfOrderGroupSize, when > 1, permutes the events within each group of
	// that many event numbers (event number e takes the ID and timestamp of
	// (e/G)·G + (e·953)%G), so event time goes back and forth within a group.
	// >= 1. Default 1: events in timestamp order.
	OutOfOrderGroupSize int

	// Seed chooses the random draws. Seed 0 seeds each event's
	// java.util.Random with its event ID, as Beam does; another seed XORs a
	// hash of the seed into the event ID first. Default 0.
	Seed int64
	// Split is how a source shares the stream among its subtasks. Default
	// SplitInterleaved.
	Split SplitMode

	// RateLimited makes a source emit events no faster than their timestamps
	// advance (Flink with maxEmitSpeed false): each reader emits its events
	// in wall-clock time at the pace of their event time. Default false:
	// emit as fast as possible (Flink's default).
	RateLimited bool
	// BatchSize is the most events a reader emits in one Poll, in
	// [1, MaxBatchSize]. Default 0: 1024.
	BatchSize int
}

// EnsureDefaults replaces zero fields by their defaults and returns c.
func (c *Config) EnsureDefaults() *Config {
	setDefault := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.BaseTime == 0 {
		c.BaseTime = BeamBaseTime
	}
	setDefault(&c.PersonProportion, DefaultPersonProportion)
	setDefault(&c.AuctionProportion, DefaultAuctionProportion)
	setDefault(&c.BidProportion, DefaultBidProportion)
	setDefault(&c.AvgPersonByteSize, DefaultAvgPersonByteSize)
	setDefault(&c.AvgAuctionByteSize, DefaultAvgAuctionByteSize)
	setDefault(&c.AvgBidByteSize, DefaultAvgBidByteSize)
	setDefault(&c.HotAuctionRatio, DefaultHotAuctionRatio)
	setDefault(&c.HotSellersRatio, DefaultHotSellersRatio)
	setDefault(&c.HotBiddersRatio, DefaultHotBiddersRatio)
	setDefault(&c.NumInFlightAuctions, DefaultNumInFlightAuctions)
	setDefault(&c.NumActivePeople, DefaultNumActivePeople)
	setDefault(&c.OutOfOrderGroupSize, DefaultOutOfOrderGroupSize)
	setDefault(&c.BatchSize, DefaultBatchSize)
	return c
}

// Validate reports the first field that holds a value out of its range. Zero
// fields are valid: they stand for their defaults.
func (c *Config) Validate() error {
	if c.Events < 0 {
		return fmt.Errorf("nexmark: Config.Events must be >= 0 (0 means unbounded), got %d", c.Events)
	}
	if math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) || c.Rate < 0 {
		return fmt.Errorf("nexmark: Config.Rate must be a finite number of events per second > 0 (0 means %d), got %v", DefaultRate, c.Rate)
	}
	if c.Rate != 0 && c.Rate < MinRate {
		return fmt.Errorf("nexmark: Config.Rate must be at least %v events per second, got %v", MinRate, c.Rate)
	}
	if c.FirstEventID < 0 {
		return fmt.Errorf("nexmark: Config.FirstEventID must be >= 0, got %d", c.FirstEventID)
	}
	if c.FirstEventNumber < 0 {
		return fmt.Errorf("nexmark: Config.FirstEventNumber must be >= 0, got %d", c.FirstEventNumber)
	}
	ranges := []struct {
		name     string
		v, lo, h int
	}{
		{"PersonProportion", c.PersonProportion, 1, maxProportion},
		{"AuctionProportion", c.AuctionProportion, 1, maxProportion},
		{"BidProportion", c.BidProportion, 1, maxProportion},
		{"AvgPersonByteSize", c.AvgPersonByteSize, 1, MaxByteSize},
		{"AvgAuctionByteSize", c.AvgAuctionByteSize, 1, MaxByteSize},
		{"AvgBidByteSize", c.AvgBidByteSize, 1, MaxByteSize},
		{"HotAuctionRatio", c.HotAuctionRatio, 1, math.MaxInt32},
		{"HotSellersRatio", c.HotSellersRatio, 1, math.MaxInt32},
		{"HotBiddersRatio", c.HotBiddersRatio, 1, math.MaxInt32},
		{"NumInFlightAuctions", c.NumInFlightAuctions, 1, math.MaxInt32},
		{"NumActivePeople", c.NumActivePeople, 1, math.MaxInt32},
		{"OutOfOrderGroupSize", c.OutOfOrderGroupSize, 1, math.MaxInt32},
		{"BatchSize", c.BatchSize, 1, MaxBatchSize},
	}
	for _, r := range ranges {
		if r.v != 0 && (r.v < r.lo || r.v > r.h) {
			return fmt.Errorf("nexmark: Config.%s must be in [%d, %d] (0 means the default), got %d", r.name, r.lo, r.h, r.v)
		}
	}
	if c.Split != SplitInterleaved && c.Split != SplitFlink {
		return fmt.Errorf("nexmark: Config.Split must be SplitInterleaved or SplitFlink, got %v", c.Split)
	}
	return nil
}

// resolved returns a validated copy of c with its defaults filled in.
func (c Config) resolved() (Config, error) {
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	c.EnsureDefaults()
	return c, nil
}
