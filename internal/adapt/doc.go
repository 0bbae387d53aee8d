// Package adapt picks, while a job runs, the faster of two equivalent
// implementations of an operator's batch loop: micro-adaptivity, as
// Vectorwise does it (Răducanu, Boncz and Zukowski, "Micro Adaptivity in
// Vectorwise", SIGMOD 2013).
//
// The first user is the filter. Its branch-free loop stores every record
// and advances the count past the kept ones; its branching loop stores only
// the kept ones, behind a branch on the user's answer. When the answers
// follow a pattern the CPU predicts (all kept, none kept, every fifth
// dropped) the branching loop is about 10% faster; when they are random it
// is several times slower, since half its branches are mispredicted. Which
// case a job is in depends on its data, and may change as the data does,
// so the filter times both now and then and runs the faster.
//
// Chooser is the pure core: it is told the size of each batch and the time
// each timed batch took, and answers which flavor to run and whether to
// time it. It has no clock and no goroutines; the operator reads the clock.
//
// # Schedule
//
// An exploration runs Trials timed batches of each flavor, alternating, and
// keeps each flavor's lowest time per record (the minimum shrugs off a
// batch that was preempted or met a garbage collection). The faster flavor
// then runs Exploit batches untimed, after which the next exploration
// starts. Each exploration that confirms the choice doubles the exploit
// length, up to MaxExploit, so that a stable job spends almost nothing on
// trials; one that changes the choice resets it. Batches of fewer than
// MinRecords records run with the current choice and count for nothing:
// their times say little.
package adapt
