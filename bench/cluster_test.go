package bench

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/network"
)

var (
	workersRecords = flag.Int64("workers.records", 5_000_000, "records of BenchmarkKeyedCountTwoWorkers")
	workersKeys    = flag.Int64("workers.keys", 100_000, "distinct keys of BenchmarkKeyedCountTwoWorkers")
)

// spreadScheduler places every attempt with deploy.Spread over fixed
// workers.
type spreadScheduler struct {
	workers []deploy.Worker
	slots   []deploy.Slots
}

func (s spreadScheduler) Place(ctx context.Context, plan deploy.Plan, attempt int) (deploy.Placement, []deploy.Worker, error) {
	p, err := deploy.Spread(plan, s.slots)
	return p, s.workers, err
}

// runKeyedTwoWorkers runs RunKeyed's job on two workers of this process,
// each with its own build of the job and its own network.Node on
// 127.0.0.1: with parallelism 2, each worker runs one source and one
// counter subtask, and half of the hash shuffle crosses TCP.
func runKeyedTwoWorkers(ctx context.Context, n int64, key func(int64) int64, opts weir.Options) (int64, error) {
	sink := new(SumSink)
	mk := func() (deploy.Job, error) {
		env := weir.NewEnvironment(opts)
		env.FromSource("keys", datagen.Generator(n, key)).
			KeyBy(func(k int64) int64 { return k }).
			Process("count", &runningCount[int64]{}).
			SinkTo("sum", sink)
		return env.Deployable("bench-keyed")
	}
	job, err := mk()
	if err != nil {
		return 0, err
	}
	var s spreadScheduler
	for i := range 2 {
		node, err := network.New(network.Options{})
		if err != nil {
			return 0, err
		}
		defer node.Close()
		if err := node.Listen("127.0.0.1:0"); err != nil {
			return 0, err
		}
		wj, err := mk()
		if err != nil {
			return 0, err
		}
		id := fmt.Sprint("w", i)
		s.workers = append(s.workers, deploy.NewLocalWorker(id, wj, node, nil))
		s.slots = append(s.slots, deploy.Slots{Worker: id, DataAddress: node.Addr(), Free: 1})
	}
	jmOpts, err := job.Master()
	if err != nil {
		return 0, err
	}
	jm, err := jobmaster.New(jmOpts, deploy.NewGateway(job.Plan(), s, nil))
	if err != nil {
		return 0, err
	}
	if err := jm.Run(ctx); err != nil {
		return 0, err
	}
	return sink.Sum(), nil
}

// BenchmarkKeyedCountTwoWorkers compares CPU per record of the keyed
// running count at parallelism 2 in local mode (in-process channels) and
// on two workers of this process whose shuffle crosses loopback TCP
// (target: cpu-ratio, two workers over local, <= 1.5).
func BenchmarkKeyedCountTwoWorkers(b *testing.B) {
	n, keys := *workersRecords, *workersKeys
	key := func(i int64) int64 { return IntKey(i, keys) }
	want := KeyedBaselineInt(n, keys)
	var local, workers elapsed
	for range b.N {
		got, d := timed(b, func() (int64, error) { return RunKeyed(context.Background(), n, key, jobOptions(2)) })
		checkSum(b, "local", got, want)
		local.wall, local.cpu = local.wall+d.wall, local.cpu+d.cpu
		opts := jobOptions(2)
		opts.Checkpointing.Storage = "file://" + b.TempDir()
		got, d = timed(b, func() (int64, error) { return runKeyedTwoWorkers(context.Background(), n, key, opts) })
		checkSum(b, "two workers", got, want)
		workers.wall, workers.cpu = workers.wall+d.wall, workers.cpu+d.cpu
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n*int64(b.N)) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(per(local.cpu), "local-cpu-ns/rec")
	b.ReportMetric(per(workers.cpu), "workers-cpu-ns/rec")
	b.ReportMetric(per(local.wall), "local-wall-ns/rec")
	b.ReportMetric(per(workers.wall), "workers-wall-ns/rec")
	b.ReportMetric(per(workers.cpu)/per(local.cpu), "cpu-ratio")
}
