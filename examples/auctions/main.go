// Command auctions counts the bids of each auction in sliding event-time
// windows of 10 s every 2 s while the job checkpoints, and drives the
// checkpoint API: a checkpoint by hand, a savepoint, and a stop with a
// savepoint. It prints what each step did and the busiest windows.
//
//	go run ./examples/auctions
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
)

// Bid is a bid on an auction at event time Time (Unix milliseconds).
type Bid struct {
	Auction int64
	Price   int64
	Time    int64
}

// AuctionCount is the number of bids of one auction in one window.
type AuctionCount struct {
	Auction int64
	Bids    int64
}

// countBids counts the bids of a window.
type countBids struct{}

func (countBids) CreateAccumulator() AuctionCount { return AuctionCount{} }
func (countBids) Add(b Bid, acc AuctionCount) AuctionCount {
	return AuctionCount{Auction: b.Auction, Bids: acc.Bids + 1}
}
func (countBids) GetResult(acc AuctionCount) AuctionCount { return acc }
func (countBids) Merge(a, b AuctionCount) AuctionCount {
	return AuctionCount{Auction: max(a.Auction, b.Auction), Bids: a.Bids + b.Bids}
}

func main() {
	dir, err := os.MkdirTemp("", "weir-auctions-")
	if err == nil {
		defer os.RemoveAll(dir)
		err = run(context.Background(), dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "auctions:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	opts := weir.Options{Parallelism: 2, JobID: "auctions"}
	opts.Checkpointing.Interval = 500 * time.Millisecond // ExactlyOnce by default
	opts.Checkpointing.Storage = "file://" + filepath.Join(dir, "ckpt")
	opts.Checkpointing.SavepointDir = filepath.Join(dir, "savepoints")
	env := weir.NewEnvironment(opts)

	// An endless stream of bids on 10 auctions, 100 ms of event time apart
	// and a little out of order.
	bids := datagen.Generator(-1, func(i int64) Bid {
		return Bid{Auction: i % 10, Price: 100 + i%37, Time: 1_700_000_000_000 + i*100 - (i%7)*300}
	}).WithOptions(datagen.Options{RecordsPerSecond: 5000})

	src := env.FromSource("bids", bids, weir.ForBoundedOutOfOrderness[Bid](4*time.Second).
		WithTimestampAssigner(func(b Bid, _ int64) int64 { return b.Time }))
	counts := src.KeyBy(func(b Bid) int64 { return b.Auction }).
		Window(weir.SlidingEventTimeWindows(10*time.Second, 2*time.Second)).
		Aggregate("bids-per-auction", countBids{}) // one pane update per record
	results := collect.New[AuctionCount]()
	counts.SinkTo("counts", results)

	job, err := env.ExecuteAsync(ctx, "auctions")
	if err != nil {
		return err
	}
	time.Sleep(time.Second) // let it run and checkpoint a little

	id, err := job.TriggerCheckpoint(ctx) // by hand
	if err != nil {
		return err
	}
	fmt.Printf("checkpoint %d taken by hand\n", id)
	path, err := job.TriggerSavepoint(ctx, filepath.Join(dir, "backups")) // portable, never deleted by weir
	if err != nil {
		return err
	}
	fmt.Printf("savepoint %s\n", filepath.Base(path))
	path, err = job.StopWithSavepoint(ctx, "") // sinks commit, then the job stops
	if err != nil {
		return err
	}
	fmt.Printf("stopped with savepoint %s\n", filepath.Base(path))
	if err := job.Wait(); err != nil {
		return err
	}
	summary, history := job.Checkpoints() // per checkpoint and per subtask figures
	fmt.Printf("checkpoints: %d completed, %d failed; %d in the history\n", summary.Completed, summary.Failed, len(history))

	windows := results.Results()
	if len(windows) == 0 {
		return fmt.Errorf("no window fired")
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i].Bids > windows[j].Bids })
	fmt.Printf("%d windows fired; the busiest: auction %d with %d bids in 10 s\n", len(windows), windows[0].Auction, windows[0].Bids)
	return nil
}
