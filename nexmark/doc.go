// Package nexmark is the Nexmark benchmark for weir: its event model (Person,
// Auction and Bid in one stream of Event), a port of its generator, a source
// that runs the generator in weir jobs, and the JSON-lines format of the
// Flink Nexmark DDL with a writer and a source that reads it back.
//
// # Generator
//
// Generator ports the generator of the Flink Nexmark project
// (nexmark/nexmark, itself derived from Beam's): the person/auction/bid mix
// (1:3:46 of every 50 event IDs), the derivation of person and auction IDs
// from the event ID, hot sellers, auctions and bidders, the log-uniform
// price, the strings, the extra field that pads each kind of record to its
// average size, the auction length, the channels and URLs of bids, and the
// timestamps baseTime + eventNumber·interEventDelay with optional
// out-of-order groups. It follows Beam where the two differ in determinism:
// each event draws from a java.util.Random (ported exactly) seeded with its
// event ID, so event n is a pure function of the Config and n, and the same
// Config gives the same stream byte for byte. A Java transcription of the
// original generators produces the same fields (testdata/java_reference.txt).
//
// Deliberate differences from the Flink project, each for determinism or
// speed:
//
//   - Bid.Bidder is offset by FirstPersonID once, as in Beam; Flink adds it
//     twice (nexmark/nexmark issue #30).
//   - Extra's length follows the original; its letters are cut from a fixed
//     pre-generated string at a random offset, as Flink does to save time
//     (Beam draws every letter).
//   - The URLs of the hot and the other channels are drawn from random
//     streams derived from Config.Seed; Flink draws them from unseeded
//     randoms once per JVM.
//   - Config.BaseTime defaults to Beam's BASE_TIME (2015-07-15T00:00:00Z)
//     where Flink takes the wall-clock time at start, and FirstEventID and
//     FirstEventNumber default to Beam's 0 (Flink's table source uses 1).
//   - Rate shapes (firstEventRate ≠ nextEventRate) are not ported: Flink's
//     GeneratorConfig uses only firstEventRate. The inter-event delay is a
//     float64, as in Flink (Beam's whole microseconds make every timestamp
//     equal above 2M events/s).
//
// # Source
//
// Source runs the generator in a job. Config.Split chooses how its subtasks
// share the stream: SplitInterleaved (the default) gives subtask k of p the
// event numbers k, k+p, … of the single-generator stream, so that the union
// of the subtasks' events is that stream whatever the parallelism;
// SplitFlink cuts it as Flink's source does, into contiguous ID ranges on
// parallel timelines (numEventGenerators = parallelism). A split's position
// is the event number of its next event: a restored job generates exactly
// the events that followed the checkpoint, also with another parallelism (a
// reader given several splits merges them in event-time order). By default
// a source emits as fast as it can (Flink's maxEmitSpeed); with
// Config.RateLimited it emits each event when its event time comes, counted
// from the reader's first event.
//
// # JSON lines
//
// AppendJSON writes an event as one JSON object with the column names of the
// Flink DDL (event_type, and person, auction or bid), times as milliseconds
// since the Unix epoch; WriteJSON and WriteJSONFile write the first n events
// of a stream (weir nexmark gen). ParseJSON and the JSONFile source read
// them back, strictly, reporting the line and column of a malformed or
// truncated line.
//
// # Queries
//
// The queries q0–q22 (but q6, which Flink does not run either) are in the
// subpackage nexmark/queries, as DataStream programs; weir nexmark run runs
// one and reports its throughput per CPU core, weir nexmark report runs many
// and prints a table beside Flink's published figures.
//
// # Usage
//
//	cfg := nexmark.Config{Events: 10_000_000, Rate: 1_000_000}
//	events := env.FromSource("nexmark", nexmark.Source(cfg)).UID("nexmark")
//	bids := events.Filter("bids", func(ev nexmark.Event) bool { return ev.Type == nexmark.BidEvent })
//
//	g, _ := nexmark.NewGenerator(nexmark.Config{})
//	first := g.Event(0) // a Person: event IDs 0, 50, 100, … are persons
package nexmark
