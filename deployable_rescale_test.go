package weir_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/network"
)

// vertexShape describes a plan's vertices as "name:parallelism/max".
func vertexShape(p deploy.Plan) string {
	var s []string
	for _, v := range p.Vertices {
		s = append(s, fmt.Sprintf("%s:%d/%d", v.Name, v.Parallelism, v.MaxParallelism))
	}
	return strings.Join(s, " | ")
}

// TestDeployableRescaled: Rescaled(n) (reactive mode) builds the program
// at parallelism n: an operator without a parallelism of its own runs n
// subtasks, one that set its own min(n, its own), which is its vertex's
// MaxParallelism (chaining follows); two builds at the same n have the same
// fingerprint, another n another; n outside 1..MaxParallelism is refused.
// A rescaled build runs on two workers and its output is complete.
func TestDeployableRescaled(t *testing.T) {
	const n = 3000
	sink := collect.New[string]()
	opts := weir.Options{Parallelism: 2, MaxParallelism: 16, Restart: "none"}
	opts.Checkpointing.Storage = "file://" + t.TempDir()
	build := func() deploy.Job {
		env := weir.NewEnvironment(opts)
		env.FromSource("src", datagen.Generator(n, func(i int64) int64 { return i })).Parallelism(1).
			Map("triple", func(i int64) int64 { return 3 * i }).Parallelism(3).
			Rebalance().
			Map("fmt", func(i int64) string { return strconv.FormatInt(i, 10) }).
			SinkTo("out", sink)
		job, err := env.Deployable("rescale")
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	rescaled := func(j deploy.Job, n int) deploy.Job {
		t.Helper()
		r, err := j.Rescaled(n)
		if err != nil {
			t.Fatalf("Rescaled(%d): %v", n, err)
		}
		return r
	}
	job := build()
	for _, tc := range []struct {
		n    int
		want string
	}{
		{4, "src:1/1 | triple:3/3 | fmt -> out:4/16"},
		{2, "src:1/1 | triple:2/3 | fmt -> out:2/16"},
		{1, "src -> triple:1/1 | fmt -> out:1/16"},
		{16, "src:1/1 | triple:3/3 | fmt -> out:16/16"},
	} {
		if got := vertexShape(rescaled(job, tc.n).Plan()); got != tc.want {
			t.Errorf("at parallelism %d: %s, want %s", tc.n, got, tc.want)
		}
	}
	if a, b := rescaled(job, 4).Plan().Fingerprint, rescaled(build(), 4).Plan().Fingerprint; a != b {
		t.Errorf("two builds at parallelism 4: fingerprints %s and %s", a, b)
	}
	if a, b := rescaled(job, 4).Plan().Fingerprint, rescaled(job, 3).Plan().Fingerprint; a == b {
		t.Errorf("parallelism 4 and 3 have the same fingerprint %s", a)
	}
	for _, bad := range []int{0, 17} {
		if _, err := job.Rescaled(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("parallelism %d is not in 1..16", bad)) {
			t.Errorf("Rescaled(%d) = %v, want it refused", bad, err)
		}
	}

	// The JobManager's build and each worker's, rescaled to 2, on two
	// workers of one slot.
	c := &cluster{job: rescaled(build(), 2), logs: &syncBuffer{}}
	for i := range 2 {
		id := fmt.Sprintf("w%d", i+1)
		node, err := network.New(network.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := node.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close() })
		c.workers = append(c.workers, wireWorker{t, deploy.NewLocalWorker(id, rescaled(build(), 2), node, nil)})
		c.slots = append(c.slots, deploy.Slots{Worker: id, DataAddress: node.Addr(), Free: 1})
	}
	if err := c.run(t); err != nil {
		t.Fatalf("rescaled to 2 on two workers: %v", err)
	}
	var want []string
	for i := range int64(n) {
		want = append(want, strconv.FormatInt(3*i, 10))
	}
	got := sink.Results()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rescaled job's output: %d lines, want %d", len(got), len(want))
	}
}
