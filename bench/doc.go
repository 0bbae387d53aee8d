// Package bench holds weir's throughput and memory benchmarks and the
// workloads they run, each next to the hand-written Go loop it is compared
// with. The results, with the commands that produced them, are in
// BENCHMARKS.md at the root of the repository.
//
// Each workload comes in two forms that do the same per-record work and
// return the same checksum:
//
//   - Stateless chain: source → map → filter → sink, parallelism 1, chained
//     into one task (RunStateless), against StatelessBaseline.
//   - Keyed running count: a hash shuffle into a keyed process function that
//     keeps a count per key in value state and emits it (RunKeyed), against
//     KeyedBaseline, a single-goroutine loop over a Go map.
//   - Backpressure: a fast source feeding a deliberately slow sink in another
//     task (RunSlowSink), whose peak memory must not grow with the input.
//
// Sinks consume records by adding them up (SumSink), and the baselines add
// up the same values, so that neither side can be optimized away and the
// checksums prove that both did the same work.
//
// # Usage
//
//	make bench                                  # every benchmark, once
//	go test -run '^$' -bench Keyed -benchtime 1x ./bench/ -records=5000000
//	go run ./bench/cmd/slowsink -records 10000000
package bench
