package nexmark

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/weirstream/weir/connector"
)

var _ connector.Source[Event] = (*generatorSource)(nil)

// Source returns a source of the Nexmark events that cfg describes. Its
// splits share the stream among the subtasks as cfg.Split says; a split's
// position is the event number of its next event, so a job restored from a
// checkpoint generates exactly the events that followed it. Events carry
// their DateTime as their timestamp. An invalid cfg is reported by Splits
// and NewReader.
func Source(cfg Config) connector.Source[Event] {
	return &generatorSource{cfg: cfg}
}

type generatorSource struct {
	cfg Config
}

func (s *generatorSource) Boundedness() connector.Boundedness {
	if s.cfg.Events == 0 {
		return connector.Unbounded
	}
	return connector.Bounded
}

// unboundedMaxEvents is what Flink's GeneratorConfig takes for maxEvents
// when none is given (scaled so that size estimates do not overflow); its
// split cuts that range among the generators.
func unboundedMaxEvents(cfg *Config) int64 {
	total := int64(cfg.PersonProportion + cfg.AuctionProportion + cfg.BidProportion)
	return math.MaxInt64 / (total * int64(max(cfg.AvgPersonByteSize, cfg.AvgAuctionByteSize, cfg.AvgBidByteSize)))
}

func (s *generatorSource) Splits(ctx context.Context, parallelism int) ([]connector.SplitState, error) {
	cfg, err := s.cfg.resolved()
	if err != nil {
		return nil, err
	}
	if parallelism < 1 {
		return nil, fmt.Errorf("nexmark: parallelism must be >= 1, got %d", parallelism)
	}
	return planSplits(&cfg, int64(parallelism)), nil
}

// planSplits cuts the stream of a resolved cfg into p splits; splits without
// events are left out.
func planSplits(cfg *Config, p int64) []connector.SplitState {
	hash := configHash(cfg)
	var splits []connector.SplitState
	if cfg.Split == SplitInterleaved {
		end := int64(unboundedEnd)
		if cfg.Events > 0 {
			end = cfg.Events
		}
		for k := range p {
			if end != unboundedEnd && k >= end {
				break
			}
			sp := splitSpec{firstEventID: cfg.FirstEventID, firstEventNumber: cfg.FirstEventNumber, start: k, step: p, end: end, generators: 1, configHash: hash}
			splits = append(splits, sp.state(splitID(k)))
		}
		return splits
	}
	// GeneratorConfig.split: contiguous ID ranges, the last one taking what
	// the division leaves, all on the same event numbers.
	maxEvents := cfg.Events
	if maxEvents == 0 {
		maxEvents = unboundedMaxEvents(cfg)
	}
	sub := maxEvents / p
	firstID := cfg.FirstEventID
	for k := range p {
		if k == p-1 {
			sub = maxEvents - sub*(p-1)
		}
		if sub > 0 {
			sp := splitSpec{firstEventID: firstID, firstEventNumber: cfg.FirstEventNumber, start: 0, step: 1, end: sub, generators: p, configHash: hash}
			splits = append(splits, sp.state(splitID(k)))
		}
		firstID += sub
	}
	return splits
}

func (s *generatorSource) NewReader(ctx connector.ReaderContext) (connector.Reader[Event], error) {
	cfg, err := s.cfg.resolved()
	if err != nil {
		return nil, err
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return nil, fmt.Errorf("nexmark: invalid reader context: subtask %d of parallelism %d", ctx.Subtask, ctx.Parallelism)
	}
	return &generatorReader{
		gen:   newGenerator(cfg),
		hash:  configHash(&cfg),
		batch: cfg.BatchSize,
		paced: cfg.RateLimited,
		ids:   make(map[string]bool),
	}, nil
}

// unboundedEnd is the end of a split that never ends.
const unboundedEnd = -1

// splitSpec is a split's Data: the indexes start, start+step, … below end
// (forever when end is unboundedEnd) of a timeline on which index i has the
// event number firstEventNumber+i and event number e the ID
// firstEventID+adjust(e), of generators parallel generators.
type splitSpec struct {
	firstEventID, firstEventNumber int64
	start, step, end               int64
	generators                     int64
	// configHash identifies the Config that made the split: a reader of
	// another configuration would generate other events.
	configHash uint64
}

const (
	splitVersion = 1
	splitSpecLen = 1 + 7*8
)

func splitID(k int64) string { return fmt.Sprintf("nexmark-%d", k) }

// state returns a split state with the spec as its Data.
func (sp splitSpec) state(id string) connector.SplitState {
	data := make([]byte, 0, splitSpecLen)
	data = append(data, splitVersion)
	for _, v := range []int64{sp.firstEventID, sp.firstEventNumber, sp.start, sp.step, sp.end, sp.generators, int64(sp.configHash)} {
		data = binary.BigEndian.AppendUint64(data, uint64(v))
	}
	return connector.SplitState{ID: id, Data: data}
}

// limit is the exclusive upper bound of the split's indexes.
func (sp *splitSpec) limit() int64 {
	if sp.end == unboundedEnd {
		return math.MaxInt64
	}
	return sp.end
}

// decodeSplit checks a split state made for a configuration with the given
// hash and returns its spec and the index of its next event.
func decodeSplit(st connector.SplitState, hash uint64) (splitSpec, int64, error) {
	if len(st.Data) != splitSpecLen || st.Data[0] != splitVersion {
		return splitSpec{}, 0, fmt.Errorf("split %q: Data is not a version-%d nexmark split (%d bytes, want %d); was the state written by another source?", st.ID, splitVersion, len(st.Data), splitSpecLen)
	}
	var v [7]int64
	for i := range v {
		v[i] = int64(binary.BigEndian.Uint64(st.Data[1+8*i:]))
	}
	sp := splitSpec{firstEventID: v[0], firstEventNumber: v[1], start: v[2], step: v[3], end: v[4], generators: v[5], configHash: uint64(v[6])}
	switch {
	case sp.configHash != hash:
		return splitSpec{}, 0, fmt.Errorf("split %q was made by a nexmark source of another configuration: restore it with the Config that made it", st.ID)
	case sp.firstEventID < 0 || sp.firstEventNumber < 0 || sp.start < 0 || sp.step < 1 || sp.generators < 1 ||
		(sp.end != unboundedEnd && sp.end < sp.start):
		return splitSpec{}, 0, fmt.Errorf("split %q: malformed split %+v", st.ID, sp)
	}
	next := sp.start
	switch len(st.Position) {
	case 0:
	case 8:
		next = int64(binary.BigEndian.Uint64(st.Position)) - sp.firstEventNumber
	default:
		return splitSpec{}, 0, fmt.Errorf("split %q: Position has %d bytes, want 8 (the next event number) or none", st.ID, len(st.Position))
	}
	if next < sp.start || next > sp.limit() || (next-sp.start)%sp.step != 0 {
		return splitSpec{}, 0, fmt.Errorf("split %q: event number %d is not one of the split's (start %d, step %d, end %d)",
			st.ID, next+sp.firstEventNumber, sp.start+sp.firstEventNumber, sp.step, sp.end)
	}
	return sp, next, nil
}

// configHash hashes the fields of a resolved Config that decide what the
// events are.
func configHash(cfg *Config) uint64 {
	h := fnv.New64a()
	var b []byte
	for _, v := range []int64{
		int64(math.Float64bits(cfg.Rate)), cfg.BaseTime, cfg.FirstEventID, cfg.FirstEventNumber,
		int64(cfg.PersonProportion), int64(cfg.AuctionProportion), int64(cfg.BidProportion),
		int64(cfg.AvgPersonByteSize), int64(cfg.AvgAuctionByteSize), int64(cfg.AvgBidByteSize),
		int64(cfg.HotAuctionRatio), int64(cfg.HotSellersRatio), int64(cfg.HotBiddersRatio),
		int64(cfg.NumInFlightAuctions), int64(cfg.NumActivePeople), int64(cfg.OutOfOrderGroupSize),
		cfg.Seed, int64(cfg.Split),
	} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	h.Write(b)
	return h.Sum64()
}

var errClosed = errors.New("nexmark: reader is closed")
