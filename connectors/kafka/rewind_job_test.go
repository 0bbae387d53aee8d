package kafka

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/internal/storage"
)

// TestJobSourceRewindFromEveryCheckpoint runs a weir job that reads a
// topic of 3 partitions with checkpoints every 20 ms, keeps them all, and
// then restores a new job from each: it must read exactly the records at
// and after the offsets the checkpoint recorded for each partition, and
// nothing of partitions the checkpoint holds as finished.
func TestJobSourceRewindFromEveryCheckpoint(t *testing.T) {
	const n = 3000
	c := newCluster(t, 3, "in")
	all := values("v", n) // record i is at partition i%3, offset i/3
	produce(t, c, "in", 3, all...)
	dir := t.TempDir()
	opts := weir.Options{Parallelism: 2, JobID: "rw"}
	opts.Checkpointing.Interval = 20 * time.Millisecond
	opts.Checkpointing.Retained = 1000
	opts.Checkpointing.Storage = dir
	env := weir.NewEnvironment(opts)
	o := sourceOpts(c, "in")
	o.BatchSize = 50
	env.FromSource("in", NewSource(o, String())).UID("in").
		Map("slow", func(s string) string {
			if s[len(s)-1] == '0' {
				time.Sleep(time.Millisecond)
			}
			return s
		}).SinkTo("out", discard[string]{})
	job, err := env.ExecuteAsync(t.Context(), "rw")
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	_, hist := job.Checkpoints()
	var paths []string
	for _, h := range hist {
		if h.Status == weir.CheckpointCompleted {
			paths = append(paths, filepath.Join(dir, h.Path))
		}
	}
	if len(paths) < 4 {
		t.Fatalf("%d checkpoints completed, want at least 4", len(paths))
	}
	mid := 0
	for _, p := range paths {
		_, _, md, err := storage.ResolveRestore(context.Background(), p)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", p, err)
		}
		// The recorded position of each unfinished partition.
		pos := map[string]int64{}
		for _, op := range md.Operators {
			if op.UID != "in" {
				continue
			}
			for _, st := range op.Subtasks {
				for _, sp := range st.Splits {
					pos[sp.ID] = int64(binary.BigEndian.Uint64(sp.Position))
				}
			}
		}
		var want []string
		for i, v := range all {
			if at, ok := pos[splitID("in", int32(i%3))]; ok && int64(i/3) >= at {
				want = append(want, v)
			}
		}
		if len(want) > 0 && len(want) < n {
			mid++
		}
		ropts := weir.Options{Parallelism: 2, JobID: "rw-restore", Restore: p}
		renv := weir.NewEnvironment(ropts)
		out := collect.New[string]()
		renv.FromSource("in", NewSource(o, String())).UID("in").SinkTo("out", out)
		if err := renv.Execute(t.Context(), "restore"); err != nil {
			t.Fatalf("restore from %s: %v", p, err)
		}
		if got := sorted(out.Results()); !slices.Equal(got, want) {
			t.Fatalf("restored from %s (positions %v): read %d records, want %d", p, pos, len(got), len(want))
		}
	}
	if mid < 2 {
		t.Fatalf("only %d of %d checkpoints were taken in the middle of the input", mid, len(paths))
	}
	t.Logf("%d checkpoints restored, %d in the middle of the input", len(paths), mid)
}
