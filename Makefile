# Every target sets the toolchain itself: machines start with Go 1.26 and
# GOTOOLCHAIN=local, and weir needs Go 1.27 (generic methods).
export GOTOOLCHAIN := go1.27.3
GO ?= go
# pipefail: a test run piped into its report still fails the target.
SHELL := /bin/bash
# gofmt of the selected toolchain: an older gofmt on PATH cannot parse
# generic methods.
# ($(shell) does not see exported variables in make 4.3: set it here too.)
GOFMT = $(shell GOTOOLCHAIN=$(GOTOOLCHAIN) $(GO) env GOROOT)/bin/gofmt

# Packages whose goroutines talk to each other: tested with the race detector.
RACE_PKGS := ./internal/runtime/... ./internal/network/... ./internal/cluster/... ./internal/deploy/... ./internal/jobmaster/... ./connectors/... ./codec/... .

.PHONY: all build demo test ci test-short test-tcp vet fmt bench bench-pgo pgo nexmark clean proto

all: build test

# A static binary (no cgo), as the container image needs: BENCHMARKS.md's
# Cluster section measures what that costs pebble.
build:
	CGO_ENABLED=0 $(GO) build -o bin/weir ./cmd/weir

# The control plane's Go code from proto/ (committed; needs protoc, and
# installs the two plugins at the versions of google.golang.org/protobuf
# and grpc that go.mod uses into out/protobin).
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
proto:
	mkdir -p out/protobin
	GOBIN=$(CURDIR)/out/protobin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$$($(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)
	GOBIN=$(CURDIR)/out/protobin $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH=$(CURDIR)/out/protobin:$$PATH protoc -I proto --go_out=. --go_opt=module=github.com/weirstream/weir \
		--go-grpc_out=. --go-grpc_opt=module=github.com/weirstream/weir proto/weir/cluster/v1/cluster.proto

demo: build
	./bin/weir demo

vet:
	$(GO) vet ./...
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod or go.sum is not tidy: run go mod tidy (go mod tidy -diff shows what it changes)"; exit 1; }
	@out=$$($(GOFMT) -l . 2>&1 | grep -v '^testdata/'); if [ -n "$$out" ]; then echo "gofmt needed (or failed):"; echo "$$out"; exit 1; fi

# The whole suite (about 20 minutes on two cores), then the race detector
# on the concurrent packages; it ends by listing the tests that skipped
# and why (no Chromium, no MinIO, ...). The output is go test's own.
test: vet
	@mkdir -p out && rm -f out/skipped.txt
	set -o pipefail; $(GO) test -count=1 -json ./... | $(GO) run ./internal/testutil/testreport -skipped out/skipped.txt
	set -o pipefail; $(GO) test -count=1 -race -json $(RACE_PKGS) | $(GO) run ./internal/testutil/testreport -skipped out/skipped.txt
	set -o pipefail; WEIR_EXCHANGE=tcp $(GO) test -count=1 -json -run '$(TCP_SLICE)' . ./nexmark/ | $(GO) run ./internal/testutil/testreport -skipped out/skipped.txt
	@$(GO) run ./internal/testutil/testreport -list out/skipped.txt

# A fast slice of the job tests rerun with every non-chained edge over the
# TCP data plane (WEIR_EXCHANGE=tcp): the exactly-once harness, windows,
# joins, timers, Nexmark's exactly-once job, and the unaligned harnesses
# (barriers overtaking the network's queues, rescaled restores).
TCP_SLICE = ^(TestExactlyOnceHarness|TestExactlyOnceHarnessUnaligned|TestExactlyOnceHarnessUnalignedRescaled|TestWindowsExactlyOnce|TestWindowJoinMatchesReference|TestIntervalJoinMatchesReference|TestTumblingEventTimeWindows|TestTimersExactlyOnce|TestJobExactlyOnce)$$

# The whole suite once more with every non-chained edge of every local job
# over TCP on 127.0.0.1 (the four synctest tests skip, see
# exchange_tcp_realtime_test.go); about as long as make test.
test-tcp:
	WEIR_EXCHANGE=tcp $(GO) test -count=1 ./...

# Exactly what CI runs: installs Chromium, builds MinIO (cached), requires
# both, then make test.
ci:
	bash .ci/run

fmt:
	$(GOFMT) -w .

test-short:
	$(GO) test -short ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 ./bench/

# The stateless chain built with profile-guided optimization (go test applies
# -pgo=auto to main packages only, so the profile is passed explicitly).
bench-pgo:
	$(GO) test -run '^$$' -bench BenchmarkStatelessChain -benchtime 1x -count 1 -pgo=bench/default.pgo ./bench/

# Regenerates bench/default.pgo from profiles of the weir side of the
# stateless chain, one with each of the filter's loops (so that the build
# has both devirtualized and the adaptive filter chooses between them as
# they are; a profile of the adaptive run would hold only the loop it chose
# without PGO). 40 rounds, so that the two-instruction map function gets
# samples of its own.
pgo:
	mkdir -p out
	$(GO) test -run '^$$' -bench BenchmarkStatelessChain -benchtime 1x -pgo=off -cpuprofile out/stateless-free.prof ./bench/ -stateless.rounds=40 -stateless.filterloop=branch-free
	$(GO) test -run '^$$' -bench BenchmarkStatelessChain -benchtime 1x -pgo=off -cpuprofile out/stateless-branching.prof ./bench/ -stateless.rounds=40 -stateless.filterloop=branching
	$(GO) tool pprof -proto -focus 'sourceDriver' out/stateless-free.prof out/stateless-branching.prof > bench/default.pgo

# Every Nexmark query (not q6) on 10M events, exactly-once checkpoints every
# 10 s, on heap and on pebble: a markdown table beside Flink's per-core
# figures (long: about an hour on two cores; NEXMARK_FLAGS=--queries=q0,q5
# narrows it). Pebble checkpoints incrementally, as RocksDB's do in the
# Nexmark project's Flink configuration.
NEXMARK_EVENTS ?= 10000000
nexmark: build
	mkdir -p out
	./bin/weir nexmark report --events $(NEXMARK_EVENTS) --checkpoint-interval 10s --state-backends heap,pebble --incremental $(NEXMARK_FLAGS) | tee out/nexmark.md

clean:
	rm -rf bin out
