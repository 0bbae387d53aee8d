package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/internal/storage"
)

// writeLines appends n lines named after the file to it, from line from.
func writeLines(t *testing.T, dir, name string, from, n int) {
	t.Helper()
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "%s line %04d\n", name, i)
	}
	appendFile(t, filepath.Join(dir, name), b.String())
}

// linesAfter returns the lines of the file that start at or after offset.
func linesAfter(t *testing.T, path string, offset int64) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b[offset:]), "\n"), "\n")
}

// waitFor waits until out holds n records, then a little longer to catch
// extra ones.
func waitFor(t *testing.T, out *collect.Collector[string], n int, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for out.Len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d lines after 20s, want %d", what, out.Len(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(60 * time.Millisecond) // three watch intervals
}

// TestJobWatchRestoreEveryCheckpointRescaled runs a weir job at
// parallelism 2 on a watched directory that gets new files and lines
// while it runs, cancels it, adds files and lines while it is stopped,
// and restores a job from every checkpoint it completed, at parallelism
// 1, 3 and 4 in turn: each restored job reads exactly the lines after the
// offsets its checkpoint recorded, and the whole of every file the
// checkpoint does not hold (one that appeared later): no finished file is
// read again, no new one missed.
func TestJobWatchRestoreEveryCheckpointRescaled(t *testing.T) {
	dir := t.TempDir()
	for i := range 4 {
		writeLines(t, dir, fmt.Sprintf("f%d", i), 0, 150)
	}
	cpDir := t.TempDir()
	src := Lines(dir).WithOptions(LinesOptions{Watch: 20 * time.Millisecond, BatchSize: 7})
	opts := weir.Options{Parallelism: 2, JobID: "watch"}
	opts.Checkpointing.Interval = 15 * time.Millisecond
	opts.Checkpointing.Retained = 1000
	opts.Checkpointing.Storage = cpDir
	opts.Checkpointing.RetainOnCancel = true
	env := weir.NewEnvironment(opts)
	out := collect.New[string]()
	env.FromSource("in", src).UID("in").
		Map("slow", func(s string) string {
			if strings.HasSuffix(s, "0") {
				time.Sleep(time.Millisecond)
			}
			return s
		}).SinkTo("out", out)
	job, err := env.ExecuteAsync(t.Context(), "watch")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, 200, "first run, before new files")
	// While the job runs: new files, lines appended to read ones.
	writeLines(t, dir, "g0", 0, 100)
	writeLines(t, dir, "f1", 150, 50)
	time.Sleep(30 * time.Millisecond)
	writeLines(t, dir, "g1", 0, 100)
	writeLines(t, dir, "f2", 150, 50)
	waitFor(t, out, 4*150+2*50+2*100, "first run")
	job.Cancel()
	job.Wait()
	// While no job runs.
	writeLines(t, dir, "h0", 0, 60)
	writeLines(t, dir, "f0", 150, 20)
	writeLines(t, dir, "g0", 100, 20)

	_, hist := job.Checkpoints()
	var paths []string
	for _, h := range hist {
		if h.Status == weir.CheckpointCompleted {
			paths = append(paths, filepath.Join(cpDir, h.Path))
		}
	}
	if len(paths) < 4 {
		t.Fatalf("%d checkpoints completed, want at least 4", len(paths))
	}
	if len(paths) > 12 { // restoring them all takes long: keep 12, spread
		var keep []string
		for i := range 12 {
			keep = append(keep, paths[i*(len(paths)-1)/11])
		}
		paths = slices.Compact(keep)
	}
	files, _ := os.ReadDir(dir)
	withG1, withoutG1, progress := 0, 0, map[int]bool{}
	for i, p := range paths {
		_, _, md, err := storage.ResolveRestore(context.Background(), p)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", p, err)
		}
		offsets := map[string]int64{}
		for _, op := range md.Operators {
			if op.UID != "in" {
				continue
			}
			for _, st := range op.Subtasks {
				for _, sp := range st.Splits {
					wf, err := decodeFile(string(sp.Data), sp.Position)
					if err != nil {
						t.Fatalf("checkpoint %s: split %q: %v", p, sp.ID, err)
					}
					if _, dup := offsets[wf.path]; dup {
						t.Fatalf("checkpoint %s holds %s twice", p, wf.path)
					}
					offsets[wf.path] = wf.offset
				}
			}
		}
		var want []string
		for _, e := range files {
			path := filepath.Join(dir, e.Name())
			off := offsets[path] // 0 for a file the checkpoint does not hold
			if info, _ := os.Stat(path); off < info.Size() {
				want = append(want, linesAfter(t, path, off)...)
			}
		}
		if _, ok := offsets[filepath.Join(dir, "g1")]; ok {
			withG1++
		} else {
			withoutG1++
		}
		progress[len(want)] = true
		par := []int{1, 3, 4}[i%3]
		ropts := weir.Options{Parallelism: par, JobID: "watch-restore", Restore: p}
		renv := weir.NewEnvironment(ropts)
		rout := collect.New[string]()
		renv.FromSource("in", src).UID("in").SinkTo("out", rout)
		rjob, err := renv.ExecuteAsync(t.Context(), "watch-restore")
		if err != nil {
			t.Fatalf("restore from %s at parallelism %d: %v", p, par, err)
		}
		waitFor(t, rout, len(want), fmt.Sprintf("restored from %s at parallelism %d", p, par))
		rjob.Cancel()
		if err := rjob.Wait(); err != nil && !strings.Contains(err.Error(), "cancel") {
			t.Fatalf("restored job: %v", err)
		}
		got := slices.Sorted(slices.Values(rout.Results()))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("restored from %s at parallelism %d (%d files held): read %d lines, want %d", p, par, len(offsets), len(got), len(want))
		}
	}
	if withG1 == 0 || withoutG1 == 0 || len(progress) < 3 {
		t.Fatalf("of %d checkpoints, %d hold file g1 (added while the job ran) and %d do not, at %d stages of progress: the run shows nothing",
			len(paths), withG1, withoutG1, len(progress))
	}
	t.Logf("%d checkpoints restored at parallelisms 1, 3, 4; %d taken before g1 appeared", len(paths), withoutG1)
}
