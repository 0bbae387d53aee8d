package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/weirstream/weir/connector"
)

// twoPhaseWriter is the writer of an exactly-once sink as the runtime sees it.
type twoPhaseWriter interface {
	connector.Writer[string]
	connector.PreCommitter
}

func newTwoPhaseWriter(t *testing.T, s *ExactlyOnceSink[string], subtask, parallelism, attempt int) twoPhaseWriter {
	t.Helper()
	w, ok := newWriter(t, s, subtask, parallelism, attempt).(twoPhaseWriter)
	if !ok {
		t.Fatal("the exactly-once writer is not a connector.PreCommitter")
	}
	return w
}

func write(t *testing.T, w connector.Writer[string], recs ...string) {
	t.Helper()
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatalf("Write(%q): %v", rec, err)
		}
	}
}

// checkpoint does what the runtime does at checkpoint id: Flush(false),
// then PreCommit. It returns the committable as the checkpoint stores it.
func checkpoint(t *testing.T, w twoPhaseWriter, subtask int, id int64) connector.Committable {
	t.Helper()
	if err := w.Flush(false); err != nil {
		t.Fatalf("Flush(false) before checkpoint %d: %v", id, err)
	}
	data, err := w.PreCommit(id)
	if err != nil {
		t.Fatalf("PreCommit(%d): %v", id, err)
	}
	return connector.Committable{CheckpointID: id, Subtask: subtask, Data: data}
}

func commit(t *testing.T, s connector.Committer, cms ...connector.Committable) {
	t.Helper()
	if err := s.Commit(t.Context(), cms); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// visible reads the directory back with the Lines source, which skips
// hidden names as every reader of the directory must, and returns the
// records sorted: exactly-once is about the multiset of records.
func visible(t *testing.T, dir string) []string {
	t.Helper()
	recs := runSource(t, Lines(dir), 1)[0]
	slices.Sort(recs)
	return recs
}

func checkVisible(t *testing.T, dir string, want ...string) {
	t.Helper()
	want = slices.Clone(want)
	slices.Sort(want)
	if got := visible(t, dir); !slices.Equal(got, want) {
		t.Errorf("visible records = %q, want %q", got, want)
	}
}

// names lists the directory: visible names, and hidden ones apart.
func names(t *testing.T, dir string) (shown, hidden []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			hidden = append(hidden, e.Name())
		} else {
			shown = append(shown, e.Name())
		}
	}
	return shown, hidden
}

func checkNames(t *testing.T, dir string, want ...string) {
	t.Helper()
	if got, _ := names(t, dir); !slices.Equal(got, want) {
		t.Errorf("visible files = %q, want %q", got, want)
	}
}

// hiddenOfKind returns the hidden names ending with suffix.
func hiddenOfKind(t *testing.T, dir, suffix string) []string {
	t.Helper()
	_, hidden := names(t, dir)
	var out []string
	for _, n := range hidden {
		if strings.HasSuffix(n, suffix) {
			out = append(out, n)
		}
	}
	return out
}

func TestExactlyOnceCommitsPerCheckpoint(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)

	write(t, w, "a", "b")
	c1 := checkpoint(t, w, 0, 1)
	write(t, w, "c", "")
	c2 := checkpoint(t, w, 0, 2)
	write(t, w, "d")
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	checkVisible(t, dir)

	commit(t, sink, c1)
	checkVisible(t, dir, "a", "b")
	checkNames(t, dir, ExactlyOnceFileName(0, 0, 1))

	commit(t, sink, c2)
	commit(t, sink, c2)
	commit(t, sink, c1, c2)
	checkVisible(t, dir, "a", "b", "c", "")
	checkNames(t, dir, ExactlyOnceFileName(0, 0, 1), ExactlyOnceFileName(0, 0, 2))
	if got := readFile(t, filepath.Join(dir, ExactlyOnceFileName(0, 0, 2))); got != "c\n\n" {
		t.Errorf("file of checkpoint 2 = %q, want %q", got, "c\n\n")
	}
	if p := hiddenOfKind(t, dir, pendingSuffix); len(p) != 0 {
		t.Errorf("pending files left after every commit: %q", p)
	}

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkVisible(t, dir, "a", "b", "c", "")
	if _, hidden := names(t, dir); len(hidden) != 0 {
		t.Errorf("hidden files left after Close: %q", hidden)
	}
}

// TestExactlyOnceRuntimeSequence drives the writer and the committer
// through the exact calls the runtime makes, commits arriving late as
// checkpoint-complete notifications do, and checks what a reader of the
// directory sees after each step.
func TestExactlyOnceRuntimeSequence(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out") // NewWriter creates it
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	var sinkIface connector.Sink[string] = sink
	committer, ok := sinkIface.(connector.Committer)
	if !ok {
		t.Fatal("the exactly-once sink is not a connector.Committer")
	}
	w, err := sinkIface.NewWriter(writerContext(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	pc, ok := w.(connector.PreCommitter)
	if !ok {
		t.Fatal("the exactly-once writer is not a connector.PreCommitter")
	}
	step := func(name string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	preCommit := func(id int64) connector.Committable {
		t.Helper()
		data, err := pc.PreCommit(id)
		step(fmt.Sprintf("PreCommit(%d)", id), err)
		return connector.Committable{CheckpointID: id, Subtask: 0, Data: data}
	}

	write(t, w, "1a", "1b")
	step("Flush(false)", w.Flush(false))
	c1 := preCommit(1)
	write(t, w, "2a")
	checkVisible(t, dir)

	step("Flush(false)", w.Flush(false))
	c2 := preCommit(2)
	write(t, w, "3a")
	step("Commit([c1])", committer.Commit(t.Context(), []connector.Committable{c1}))
	checkVisible(t, dir, "1a", "1b")

	step("Commit([c2])", committer.Commit(t.Context(), []connector.Committable{c2}))
	checkVisible(t, dir, "1a", "1b", "2a")

	// End of input: the final checkpoint commits the rest.
	write(t, w, "3b")
	step("Flush(true)", w.Flush(true))
	checkVisible(t, dir, "1a", "1b", "2a")
	final := preCommit(3)
	checkVisible(t, dir, "1a", "1b", "2a")
	step("Commit([final])", committer.Commit(t.Context(), []connector.Committable{final}))
	step("Close", w.Close())

	checkVisible(t, dir, "1a", "1b", "2a", "3a", "3b")
	checkNames(t, dir, ExactlyOnceFileName(0, 0, 1), ExactlyOnceFileName(0, 0, 2), ExactlyOnceFileName(0, 0, 3))
	if _, hidden := names(t, dir); len(hidden) != 0 {
		t.Errorf("hidden files left at the end: %q", hidden)
	}
}

func TestExactlyOnceEmptyCheckpoints(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)

	empty := checkpoint(t, w, 0, 1)
	if empty.Data != nil {
		t.Errorf("PreCommit of an empty checkpoint = %q, want nil", empty.Data)
	}
	commit(t, sink, empty) // Commit accepts what PreCommit returned
	write(t, w, "")        // an empty record is a record
	c3 := checkpoint(t, w, 0, 3)
	if c3.Data == nil {
		t.Fatal("PreCommit of a checkpoint holding one empty record = nil")
	}
	commit(t, sink, c3)
	for id := int64(4); id < 7; id++ {
		if c := checkpoint(t, w, 0, id); c.Data != nil {
			t.Errorf("PreCommit(%d) after everything was committed = %q, want nil", id, c.Data)
		}
	}
	checkVisible(t, dir, "")
	checkNames(t, dir, ExactlyOnceFileName(0, 0, 3))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, hidden := names(t, dir); len(hidden) != 0 {
		t.Errorf("hidden files left: %q", hidden)
	}
}

// TestExactlyOnceAbortedCheckpoint: checkpoint 1 is pre-committed, then
// aborted (never committed). The sources' positions in checkpoint 2 lie
// after the records of checkpoint 1, so committing checkpoint 2 must make
// them visible too.
func TestExactlyOnceAbortedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "a")
	checkpoint(t, w, 0, 1) // aborted: its committable is dropped
	write(t, w, "b")
	c2 := checkpoint(t, w, 0, 2)
	commit(t, sink, c2)
	checkVisible(t, dir, "a", "b")
	// Once the writer sees checkpoint 1 committed, it stops carrying it.
	write(t, w, "c")
	c3 := checkpoint(t, w, 0, 3)
	c, err := decodeCommittable(c3.Data)
	if err != nil {
		t.Fatal(err)
	}
	if want := []pendingFile{{Pending: pendingFileName(ExactlyOnceFileName(0, 0, 3)), Final: ExactlyOnceFileName(0, 0, 3), Bytes: 2}}; !slices.Equal(c.Files, want) {
		t.Errorf("committable of checkpoint 3 = %+v, want %+v", c.Files, want)
	}
}

// TestExactlyOnceCrashAndRestore: attempt 0 pre-commits checkpoints 1 and 2
// and writes on; it dies (no Close) before checkpoint 2 completes, so the
// job restores checkpoint 1: the runtime re-commits its committable, cleans
// up, and attempt 1 replays the records that followed checkpoint 1.
func TestExactlyOnceCrashAndRestore(t *testing.T) {
	for _, committedBeforeCrash := range []bool{false, true} {
		t.Run(fmt.Sprintf("committedBeforeCrash=%v", committedBeforeCrash), func(t *testing.T) {
			dir := t.TempDir()
			sink := ExactlyOnce(dir, ExactlyOnceOptions{})
			w0 := newTwoPhaseWriter(t, sink, 0, 1, 0)
			write(t, w0, "a", "b")
			c1 := checkpoint(t, w0, 0, 1)
			if committedBeforeCrash {
				commit(t, sink, c1)
			}
			write(t, w0, "c")
			checkpoint(t, w0, 0, 2) // checkpoint 2 never completes
			write(t, w0, "d")
			if err := w0.Flush(false); err != nil {
				t.Fatal(err)
			}
			// Crash: w0 is dropped without Close.
			if got := hiddenOfKind(t, dir, inProgressSuffix); len(got) != 1 {
				t.Fatalf("in-progress files at the crash = %q, want the one of attempt 0", got)
			}

			// Restore from checkpoint 1.
			commit(t, sink, c1)
			checkVisible(t, dir, "a", "b")
			if err := sink.Cleanup(t.Context(), []connector.Committable{c1}); err != nil {
				t.Fatal(err)
			}
			if _, hidden := names(t, dir); len(hidden) != 0 {
				t.Errorf("hidden files left by Cleanup: %q", hidden)
			}
			w1 := newTwoPhaseWriter(t, sink, 0, 1, 1)
			write(t, w1, "c", "d") // replayed
			c2 := checkpoint(t, w1, 0, 2)
			write(t, w1, "e")
			c3 := checkpoint(t, w1, 0, 3)
			commit(t, sink, c2, c3)
			checkVisible(t, dir, "a", "b", "c", "d", "e")
			checkNames(t, dir, ExactlyOnceFileName(0, 0, 1), ExactlyOnceFileName(0, 1, 2), ExactlyOnceFileName(0, 1, 3))
		})
	}
}

// TestExactlyOnceNewWriterKeepsPendingFiles: a new writer removes the
// in-progress files of earlier attempts, but not their pending files,
// which a restored checkpoint may still commit.
func TestExactlyOnceNewWriterKeepsPendingFiles(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w0 := newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w0, "a")
	c1 := checkpoint(t, w0, 0, 1)
	write(t, w0, "uncommitted")
	if err := w0.Flush(false); err != nil {
		t.Fatal(err)
	}
	oldInProgress := hiddenOfKind(t, dir, inProgressSuffix)

	newTwoPhaseWriter(t, sink, 0, 1, 1) // crash of w0, restart
	if got := hiddenOfKind(t, dir, pendingSuffix); !slices.Equal(got, []string{pendingFileName(ExactlyOnceFileName(0, 0, 1))}) {
		t.Errorf("pending files after NewWriter = %q, want the one of checkpoint 1", got)
	}
	inProgress := hiddenOfKind(t, dir, inProgressSuffix)
	if len(inProgress) != 1 || slices.Contains(oldInProgress, inProgress[0]) {
		t.Errorf("in-progress files after NewWriter = %q, want only the new writer's (the old one was %q)", inProgress, oldInProgress)
	}
	commit(t, sink, c1) // the restore re-commits checkpoint 1
	checkVisible(t, dir, "a")
}

// TestExactlyOnceRescaleRemovesEveryInProgressFile: after parallelism 3
// becomes 2, subtask 0 cleans the files of old subtasks 0 and 2.
func TestExactlyOnceRescaleRemovesEveryInProgressFile(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	for k := range 3 {
		w := newTwoPhaseWriter(t, sink, k, 3, 0)
		write(t, w, fmt.Sprintf("lost %d", k))
		if err := w.Flush(false); err != nil {
			t.Fatal(err)
		}
	}
	if got := hiddenOfKind(t, dir, inProgressSuffix); len(got) != 3 {
		t.Fatalf("in-progress files = %q, want 3", got)
	}
	newTwoPhaseWriter(t, sink, 0, 2, 1)
	newTwoPhaseWriter(t, sink, 1, 2, 1)
	got := hiddenOfKind(t, dir, inProgressSuffix)
	if len(got) != 2 || !strings.HasPrefix(got[0], ".part-00000-0001-") || !strings.HasPrefix(got[1], ".part-00001-0001-") {
		t.Errorf("in-progress files after the rescale = %q, want only those of the two new writers", got)
	}
	checkVisible(t, dir)
}

func TestExactlyOnceSubtasksShareADirectory(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnceOf(dir, func(n int) string { return fmt.Sprint(n) }, ExactlyOnceOptions{})
	const parallelism = 3
	var (
		mu   sync.Mutex
		cms  []connector.Committable
		want []string
		wg   sync.WaitGroup
	)
	for k := range parallelism {
		want = append(want, fmt.Sprint(k), fmt.Sprint(100+k), fmt.Sprint(200+k))
		// One goroutine per subtask, as the runtime runs them.
		w, err := sink.NewWriter(writerContext(k, parallelism, 0))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer w.Close()
			pc := w.(connector.PreCommitter)
			for id := int64(1); id <= 3; id++ {
				if err := errors.Join(w.Write(int(id-1)*100+k), w.Flush(false)); err != nil {
					t.Error(err)
					return
				}
				data, err := pc.PreCommit(id)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				cms = append(cms, connector.Committable{CheckpointID: id, Subtask: k, Data: data})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	commit(t, sink, cms...)
	checkVisible(t, dir, want...)
	shown, hidden := names(t, dir)
	if len(shown) != parallelism*3 || len(hidden) != 0 {
		t.Errorf("files = %q, hidden %q; want 9 distinct visible files and no hidden one", shown, hidden)
	}
}

// TestExactlyOnceNamesNeverCollide: every attempt may reuse checkpoint ids
// after a restore from an older checkpoint; no committed file is ever
// replaced.
func TestExactlyOnceNamesNeverCollide(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	var want []string
	seen := make(map[string]bool)
	for attempt := range 3 {
		for k := range 2 {
			w := newTwoPhaseWriter(t, sink, k, 2, attempt)
			for id := int64(1); id <= 2; id++ {
				rec := fmt.Sprintf("attempt %d subtask %d checkpoint %d", attempt, k, id)
				write(t, w, rec)
				want = append(want, rec)
				cm := checkpoint(t, w, k, id)
				c, err := decodeCommittable(cm.Data)
				if err != nil {
					t.Fatal(err)
				}
				final := c.Files[len(c.Files)-1].Final
				if seen[final] {
					t.Errorf("final name %q used twice", final)
				}
				seen[final] = true
				commit(t, sink, cm)
			}
			w.Close()
		}
	}
	checkVisible(t, dir, want...)
}

// TestExactlyOnceSameAttemptTwice: a runtime that restarts a job without a
// new Attempt gets a clear error instead of a replaced file.
func TestExactlyOnceSameAttemptTwice(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "first run")
	commit(t, sink, checkpoint(t, w, 0, 1))
	w.Close()

	w = newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "second run")
	_, err := w.PreCommit(1)
	if err == nil || !strings.Contains(err.Error(), "exists already") || !strings.Contains(err.Error(), "Attempt") {
		t.Errorf("PreCommit of a checkpoint committed by an earlier run of the same attempt: err = %v", err)
	}
	if err := w.Write("more"); err == nil {
		t.Error("Write after a failed PreCommit succeeded; the writer must stay failed")
	}
	w.Close()
	checkVisible(t, dir, "first run")
	if _, hidden := names(t, dir); len(hidden) != 0 {
		t.Errorf("hidden files left: %q", hidden)
	}
}

func TestExactlyOnceCommitLostFiles(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "a")
	c1 := checkpoint(t, w, 0, 1)
	final := ExactlyOnceFileName(0, 0, 1)

	if err := os.Remove(filepath.Join(dir, pendingFileName(final))); err != nil {
		t.Fatal(err)
	}
	err := sink.Commit(t.Context(), []connector.Committable{c1})
	if !errors.Is(err, ErrPendingFileLost) || !strings.Contains(err.Error(), final) ||
		!strings.Contains(err.Error(), "lost") || !strings.Contains(err.Error(), "checkpoint 1") {
		t.Errorf("Commit with both files gone: err = %v, want ErrPendingFileLost naming %q and checkpoint 1", err, final)
	}

	// Committed, then the final file removed: the same.
	write(t, w, "b")
	c2 := checkpoint(t, w, 0, 2)
	commit(t, sink, c2)
	if err := os.Remove(filepath.Join(dir, ExactlyOnceFileName(0, 0, 2))); err != nil {
		t.Fatal(err)
	}
	if err := sink.Commit(t.Context(), []connector.Committable{c2}); !errors.Is(err, ErrPendingFileLost) {
		t.Errorf("re-commit after the final file was removed: err = %v, want ErrPendingFileLost", err)
	}
}

func TestExactlyOnceCommitRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "mine")
	c1 := checkpoint(t, w, 0, 1)
	final := filepath.Join(dir, ExactlyOnceFileName(0, 0, 1))
	writeFile(t, final, "someone else's\n")

	err := sink.Commit(t.Context(), []connector.Committable{c1})
	if err == nil || !strings.Contains(err.Error(), "does not overwrite") {
		t.Errorf("Commit onto an existing final file: err = %v, want a refusal", err)
	}
	if got := readFile(t, final); got != "someone else's\n" {
		t.Errorf("the existing final file was changed to %q", got)
	}
	// Moved away, the commit goes through.
	if err := os.Remove(final); err != nil {
		t.Fatal(err)
	}
	commit(t, sink, c1)
	checkVisible(t, dir, "mine")
}

func TestExactlyOnceCommitChangedFiles(t *testing.T) {
	// A pending file that changed size is not committed.
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "a")
	c1 := checkpoint(t, w, 0, 1)
	writeFile(t, filepath.Join(dir, pendingFileName(ExactlyOnceFileName(0, 0, 1))), "a\ntampered\n")
	if err := sink.Commit(t.Context(), []connector.Committable{c1}); err == nil || !strings.Contains(err.Error(), "changed after its pre-commit") {
		t.Errorf("Commit of a changed pending file: err = %v", err)
	}
	checkVisible(t, dir)

	// A committed file that changed size fails a re-commit.
	dir = t.TempDir()
	sink = ExactlyOnce(dir, ExactlyOnceOptions{})
	w = newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "b")
	c1 = checkpoint(t, w, 0, 1)
	commit(t, sink, c1)
	writeFile(t, filepath.Join(dir, ExactlyOnceFileName(0, 0, 1)), "b\nappended\n")
	if err := sink.Commit(t.Context(), []connector.Committable{c1}); err == nil || !strings.Contains(err.Error(), "changed after its commit") {
		t.Errorf("re-commit of a changed final file: err = %v", err)
	}
}

func TestExactlyOnceCommitConcurrently(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	var cms []connector.Committable
	var want []string
	for id := int64(1); id <= 20; id++ {
		rec := fmt.Sprint(id)
		want = append(want, rec)
		write(t, w, rec)
		cms = append(cms, checkpoint(t, w, 0, id))
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := sink.Commit(context.Background(), cms); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	checkVisible(t, dir, want...)
}

// TestExactlyOnceCommitRacesAnotherCommit makes another committer rename
// the file at each point where a concurrent Commit of the same committable
// can get in between.
func TestExactlyOnceCommitRacesAnotherCommit(t *testing.T) {
	for _, point := range []string{"lstat", "rename"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			fsys := newFaultFS(nil)
			sink := sinkWithFS(dir, fsys, ExactlyOnceOptions{})
			w := newTwoPhaseWriter(t, sink, 0, 1, 0)
			write(t, w, "a")
			c1 := checkpoint(t, w, 0, 1)
			final := filepath.Join(dir, ExactlyOnceFileName(0, 0, 1))
			pending := filepath.Join(dir, pendingFileName(ExactlyOnceFileName(0, 0, 1)))
			raced := false
			fsys.setFail(func(op, path string) error {
				if op == point && path == final && !raced {
					raced = true
					if err := os.Rename(pending, final); err != nil {
						t.Error(err)
					}
				}
				return nil
			})
			commit(t, sink, c1)
			if !raced {
				t.Fatalf("Commit never did %s on the final file", point)
			}
			checkVisible(t, dir, "a")
		})
	}
}

func TestExactlyOnceCommitContextCancelled(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "a")
	c1 := checkpoint(t, w, 0, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := sink.Commit(ctx, []connector.Committable{c1}); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit with a cancelled context: err = %v", err)
	}
	checkVisible(t, dir)
	commit(t, sink, c1)
	checkVisible(t, dir, "a")
}

func TestExactlyOnceMalformedCommittables(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	tests := []struct {
		name, data, wantErr string
	}{
		{"not JSON", "tx-17", "not one of the exactly-once file sink"},
		{"unknown version", `{"v":2,"files":[]}`, "version 2"},
		{"outside the directory", `{"v":1,"files":[{"pending":".p","final":"../escape","bytes":1}]}`, "not a plain file name"},
		{"hidden final name", `{"v":1,"files":[{"pending":".p","final":".part","bytes":1}]}`, "readers would skip"},
		{"underscore final name", `{"v":1,"files":[{"pending":".p","final":"_SUCCESS","bytes":1}]}`, "readers would skip"},
		{"visible pending name", `{"v":1,"files":[{"pending":"p","final":"part","bytes":1}]}`, "readers would not skip"},
		{"negative size", `{"v":1,"files":[{"pending":".p","final":"part","bytes":-1}]}`, "negative size"},
	}
	for _, tt := range tests {
		cm := connector.Committable{CheckpointID: 4, Subtask: 2, Data: []byte(tt.data)}
		err := sink.Commit(t.Context(), []connector.Committable{cm})
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "checkpoint 4 of subtask 2") {
			t.Errorf("%s: Commit err = %v, want %q", tt.name, err, tt.wantErr)
		}
		if err := sink.Cleanup(t.Context(), []connector.Committable{cm}); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: Cleanup err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestExactlyOnceCleanup(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "kept")
	kept := checkpoint(t, w, 0, 1)
	write(t, w, "orphan")
	checkpoint(t, w, 0, 2) // carries checkpoint 1's file too
	write(t, w, "in progress")
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	// w crashes. Files the sink did not make stay.
	foreign := []string{".gitkeep", "_SUCCESS", ".part-x.pending", ".part-1-2-3-4.pending", "notes.txt", ".part-00000-0000-XYZ.inprogress"}
	for _, name := range foreign {
		writeFile(t, filepath.Join(dir, name), "")
	}

	if err := sink.Cleanup(t.Context(), []connector.Committable{kept, {CheckpointID: 5}}); err != nil {
		t.Fatal(err)
	}
	_, hidden := names(t, dir)
	wantHidden := []string{".gitkeep", ".part-00000-0000-0000000001.pending", ".part-00000-0000-XYZ.inprogress", ".part-1-2-3-4.pending", ".part-x.pending", "_SUCCESS"}
	if !slices.Equal(hidden, wantHidden) {
		t.Errorf("hidden files after Cleanup = %q, want %q", hidden, wantHidden)
	}
	commit(t, sink, kept)
	if err := sink.Cleanup(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	checkVisible(t, dir, "kept")

	if err := ExactlyOnce(filepath.Join(dir, "missing"), ExactlyOnceOptions{}).Cleanup(t.Context(), nil); err != nil {
		t.Errorf("Cleanup of a directory that does not exist: %v", err)
	}
}

func TestExactlyOnceCloseDropsUncommitted(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	write(t, w, "a")
	c1 := checkpoint(t, w, 0, 1)
	write(t, w, "b")
	if err := w.Flush(true); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checkVisible(t, dir)
	if got := hiddenOfKind(t, dir, inProgressSuffix); len(got) != 0 {
		t.Errorf("in-progress files after Close: %q", got)
	}
	commit(t, sink, c1) // a pre-committed file survives Close
	checkVisible(t, dir, "a")

	for name, err := range map[string]error{
		"Write":     w.Write("x"),
		"Flush":     w.Flush(true),
		"PreCommit": func() error { _, err := w.PreCommit(2); return err }(),
	} {
		if !errors.Is(err, errWriterClosed) {
			t.Errorf("%s after Close: err = %v", name, err)
		}
	}
}

func TestExactlyOnceCheckpointIDsMustIncrease(t *testing.T) {
	w := newTwoPhaseWriter(t, ExactlyOnce(t.TempDir(), ExactlyOnceOptions{}), 0, 1, 0)
	write(t, w, "a")
	checkpoint(t, w, 0, 5)
	for _, id := range []int64{5, 4} {
		if _, err := w.PreCommit(id); err == nil || !strings.Contains(err.Error(), "must increase") {
			t.Errorf("PreCommit(%d) after PreCommit(5): err = %v", id, err)
		}
	}
	w = newTwoPhaseWriter(t, ExactlyOnce(t.TempDir(), ExactlyOnceOptions{}), 0, 1, 0)
	if _, err := w.PreCommit(-1); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("PreCommit(-1): err = %v", err)
	}
}

func TestExactlyOnceSmallBufferLongRecords(t *testing.T) {
	dir := t.TempDir()
	sink := ExactlyOnce(dir, ExactlyOnceOptions{BufferSize: 3})
	w := newTwoPhaseWriter(t, sink, 0, 1, 0)
	var want []string
	var cms []connector.Committable
	for i := range 50 {
		rec := strings.Repeat(fmt.Sprint(i%10), i%17)
		want = append(want, rec)
		write(t, w, rec)
		if i%7 == 6 {
			cms = append(cms, checkpoint(t, w, 0, int64(i)))
		}
	}
	cms = append(cms, checkpoint(t, w, 0, 100))
	commit(t, sink, cms...)
	checkVisible(t, dir, want...)
}

func TestExactlyOnceUnwritableDirectory(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "a-file")
	writeFile(t, blocker, "")
	dir := filepath.Join(blocker, "out")
	_, err := ExactlyOnce(dir, ExactlyOnceOptions{}).NewWriter(writerContext(0, 1, 0))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("directory %q", dir)) {
		t.Errorf("NewWriter under a file: err = %v, want one naming directory %q", err, dir)
	}
}

func TestExactlyOnceReadOnlyDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into directories whatever their mode; see TestExactlyOnceReadOnlyFileSystem")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	_, err := ExactlyOnce(dir, ExactlyOnceOptions{}).NewWriter(writerContext(0, 1, 0))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("directory %q", dir)) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("NewWriter in a read-only directory: err = %v, want a permission error naming %q", err, dir)
	}
}

// faultFS wraps the real file system and fails the operations fail picks.
type faultFS struct {
	sinkFS
	mu    sync.Mutex
	fail  func(op, path string) error
	calls map[string]int
}

func newFaultFS(fail func(op, path string) error) *faultFS {
	return &faultFS{sinkFS: osFS{}, fail: fail, calls: make(map[string]int)}
}

func (f *faultFS) check(op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	if f.fail == nil {
		return nil
	}
	if err := f.fail(op, path); err != nil {
		return &fs.PathError{Op: op, Path: path, Err: err}
	}
	return nil
}

func (f *faultFS) setFail(fail func(op, path string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

func (f *faultFS) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *faultFS) Create(path string) (sinkFile, error) {
	if err := f.check("create", path); err != nil {
		return nil, err
	}
	file, err := f.sinkFS.Create(path)
	if err != nil {
		return nil, err
	}
	return &faultFile{sinkFile: file, fs: f, path: path}, nil
}

func (f *faultFS) Rename(from, to string) error {
	if err := f.check("rename", to); err != nil {
		return err
	}
	return f.sinkFS.Rename(from, to)
}

func (f *faultFS) Remove(path string) error {
	if err := f.check("remove", path); err != nil {
		return err
	}
	return f.sinkFS.Remove(path)
}

func (f *faultFS) Lstat(path string) (fs.FileInfo, error) {
	if err := f.check("lstat", path); err != nil {
		return nil, err
	}
	return f.sinkFS.Lstat(path)
}

func (f *faultFS) SyncDir(dir string) error {
	if err := f.check("syncdir", dir); err != nil {
		return err
	}
	return f.sinkFS.SyncDir(dir)
}

type faultFile struct {
	sinkFile
	fs   *faultFS
	path string
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.check("write", f.path); err != nil {
		return 0, err
	}
	return f.sinkFile.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.check("sync", f.path); err != nil {
		return err
	}
	return f.sinkFile.Sync()
}

func failOp(op string, err error) func(string, string) error {
	return func(o, _ string) error {
		if o == op {
			return err
		}
		return nil
	}
}

func sinkWithFS(dir string, fsys sinkFS, opts ExactlyOnceOptions) *ExactlyOnceSink[string] {
	s := ExactlyOnce(dir, opts)
	s.fs = fsys
	return s
}

// TestExactlyOnceReadOnlyFileSystem runs for root too: the file system,
// not the mode, refuses.
func TestExactlyOnceReadOnlyFileSystem(t *testing.T) {
	dir := t.TempDir()
	sink := sinkWithFS(dir, newFaultFS(failOp("create", syscall.EROFS)), ExactlyOnceOptions{})
	_, err := sink.NewWriter(writerContext(0, 1, 0))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("directory %q", dir)) || !errors.Is(err, syscall.EROFS) {
		t.Errorf("NewWriter on a read-only file system: err = %v, want EROFS naming directory %q", err, dir)
	}
}

func TestExactlyOnceSyncs(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		fsys := newFaultFS(nil)
		sink := sinkWithFS(t.TempDir(), fsys, ExactlyOnceOptions{NoSync: noSync})
		w := newTwoPhaseWriter(t, sink, 0, 1, 0)
		write(t, w, "a")
		commit(t, sink, checkpoint(t, w, 0, 1))
		want := map[string]int{"sync": 1, "syncdir": 2} // the file; the directory at pre-commit and commit
		if noSync {
			want = map[string]int{"sync": 0, "syncdir": 0}
		}
		for op, n := range want {
			if got := fsys.count(op); got != n {
				t.Errorf("NoSync=%v: %d calls of %s, want %d", noSync, got, op, n)
			}
		}
	}
}

// TestExactlyOncePreCommitFaults: a pre-commit that fails at any step fails
// the writer, makes nothing visible, and leaves nothing that a later
// Cleanup would not remove.
func TestExactlyOncePreCommitFaults(t *testing.T) {
	for _, op := range []string{"write", "sync", "rename", "syncdir"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			fsys := newFaultFS(nil)
			sink := sinkWithFS(dir, fsys, ExactlyOnceOptions{})
			w := newTwoPhaseWriter(t, sink, 0, 1, 0)
			write(t, w, "a")
			fsys.setFail(failOp(op, syscall.EIO))
			_, err := w.PreCommit(1)
			if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "checkpoint 1") {
				t.Errorf("PreCommit with %s failing: err = %v", op, err)
			}
			fsys.setFail(nil)
			if _, err := w.PreCommit(2); !errors.Is(err, syscall.EIO) {
				t.Errorf("PreCommit after a failed one: err = %v, want the first error again", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := sink.Cleanup(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			if shown, hidden := names(t, dir); len(shown)+len(hidden) != 0 {
				t.Errorf("files left: %q %q", shown, hidden)
			}
		})
	}
}

func TestExactlyOnceWriteFault(t *testing.T) {
	fsys := newFaultFS(failOp("write", syscall.ENOSPC))
	w := newTwoPhaseWriter(t, sinkWithFS(t.TempDir(), fsys, ExactlyOnceOptions{BufferSize: 1}), 0, 1, 0)
	if err := w.Write("ab"); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Write on a full disk: err = %v", err)
	}
	fsys.setFail(nil)
	if err := w.Flush(false); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Flush after a failed Write: err = %v, want the Write's error", err)
	}
}

// TestExactlyOnceCommitFaults: a commit that fails can be retried, and the
// retry commits each file once.
func TestExactlyOnceCommitFaults(t *testing.T) {
	for _, op := range []string{"rename", "syncdir"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			fsys := newFaultFS(nil)
			sink := sinkWithFS(dir, fsys, ExactlyOnceOptions{})
			w := newTwoPhaseWriter(t, sink, 0, 1, 0)
			write(t, w, "a")
			c1 := checkpoint(t, w, 0, 1)
			write(t, w, "b")
			c2 := checkpoint(t, w, 0, 2)
			fsys.setFail(func(o, path string) error {
				if o == op && (op == "syncdir" || strings.HasSuffix(path, ExactlyOnceFileName(0, 0, 2))) {
					return syscall.EIO
				}
				return nil
			})
			err := sink.Commit(t.Context(), []connector.Committable{c1, c2})
			if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), fmt.Sprintf("directory %q", dir)) {
				t.Errorf("Commit with %s failing: err = %v, want EIO naming directory %q", op, err, dir)
			}
			fsys.setFail(nil)
			commit(t, sink, c1, c2)
			checkVisible(t, dir, "a", "b")
		})
	}
}

func TestExactlyOnceOf(t *testing.T) {
	type wordCount struct {
		word  string
		count int
	}
	dir := t.TempDir()
	sink := ExactlyOnceOf(dir, func(c wordCount) string { return fmt.Sprintf("%s,%d", c.word, c.count) }, ExactlyOnceOptions{})
	w := newWriter(t, sink, 0, 1, 0)
	for _, c := range []wordCount{{"to", 2}, {"be", 2}} {
		if err := w.Write(c); err != nil {
			t.Fatal(err)
		}
	}
	data, err := w.(connector.PreCommitter).PreCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Commit(t.Context(), []connector.Committable{{CheckpointID: 1, Data: data}}); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, filepath.Join(dir, ExactlyOnceFileName(0, 0, 1))), "to,2\nbe,2\n"; got != want {
		t.Errorf("file = %q, want %q", got, want)
	}
}

func TestExactlyOnceInvalidConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		sink    *ExactlyOnceSink[string]
		ctx     connector.WriterContext
		wantErr string
	}{
		{"negative buffer", ExactlyOnce(dir, ExactlyOnceOptions{BufferSize: -1}), writerContext(0, 1, 0), "ExactlyOnceOptions.BufferSize must be in [1,"},
		{"huge buffer", ExactlyOnce(dir, ExactlyOnceOptions{BufferSize: MaxWriteBufferSize + 1}), writerContext(0, 1, 0), "ExactlyOnceOptions.BufferSize"},
		{"nil format", ExactlyOnceOf[string](dir, nil, ExactlyOnceOptions{}), writerContext(0, 1, 0), "non-nil format"},
		{"no directory", ExactlyOnce("", ExactlyOnceOptions{}), writerContext(0, 1, 0), "needs a directory"},
		{"subtask out of range", ExactlyOnce(dir, ExactlyOnceOptions{}), writerContext(2, 2, 0), "subtask 2 of parallelism 2"},
		{"negative attempt", ExactlyOnce(dir, ExactlyOnceOptions{}), writerContext(0, 1, -1), "attempt -1"},
	}
	for _, tt := range tests {
		if _, err := tt.sink.NewWriter(tt.ctx); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
	var o ExactlyOnceOptions
	if o.EnsureDefaults(); o.BufferSize != DefaultWriteBufferSize || o.NoSync {
		t.Errorf("EnsureDefaults() = %+v", o)
	}
}

func TestParseHiddenPart(t *testing.T) {
	tests := []struct {
		name, suffix string
		subtask      int
		ok           bool
	}{
		{pendingFileName(ExactlyOnceFileName(3, 1, 42)), pendingSuffix, 3, true},
		{inProgressFileName(12, 0, "00ff"), inProgressSuffix, 12, true},
		{pendingFileName(ExactlyOnceFileName(123456, 0, 1)), pendingSuffix, 123456, true},
		{inProgressFileName(3, 1, "00ff"), pendingSuffix, 0, false},
		{".part-00003-0001-00ff.pending", pendingSuffix, 0, false}, // not a checkpoint id
		{".part-00003-0001-XY.inprogress", inProgressSuffix, 0, false},
		{".part-00003-0001.pending", pendingSuffix, 0, false},
		{".part-+3-0001-1.pending", pendingSuffix, 0, false},
		{"part-00003-0001-0000000001", pendingSuffix, 0, false},
		{".part-00003-0001-0000000001.pending.tmp", pendingSuffix, 0, false},
	}
	for _, tt := range tests {
		subtask, ok := parseHiddenPart(tt.name, tt.suffix)
		if subtask != tt.subtask || ok != tt.ok {
			t.Errorf("parseHiddenPart(%q, %q) = %d, %v; want %d, %v", tt.name, tt.suffix, subtask, ok, tt.subtask, tt.ok)
		}
	}
}

// TestExactlyOnceRollBackAfter: a restore from checkpoint 2 undoes the part
// files that checkpoints 3 and 4 committed, removed or (KeepRolledBack)
// moved to .rolled-back/, and touches nothing else.
func TestExactlyOnceRollBackAfter(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("KeepRolledBack=", keep), func(t *testing.T) {
			dir := t.TempDir()
			sink := ExactlyOnce(dir, ExactlyOnceOptions{KeepRolledBack: keep})
			w := newTwoPhaseWriter(t, sink, 0, 1, 0)
			for id := int64(1); id <= 4; id++ {
				write(t, w, fmt.Sprint("record of ", id))
				commit(t, sink, checkpoint(t, w, 0, id))
			}
			write(t, w, "pending of 5")
			checkpoint(t, w, 0, 5)
			foreign := []string{"notes.txt", "part-1-2-3", "part-00000-0000-0000000009.txt"}
			for _, name := range foreign {
				writeFile(t, filepath.Join(dir, name), "")
			}
			undone, err := sink.RollBackAfter(t.Context(), 2)
			if err != nil || undone != 2 {
				t.Fatalf("RollBackAfter(2) = %d, %v; want 2 files undone", undone, err)
			}
			checkNames(t, dir, "notes.txt", "part-00000-0000-0000000001", "part-00000-0000-0000000002", "part-00000-0000-0000000009.txt", "part-1-2-3")
			rolled, _ := filepath.Glob(filepath.Join(dir, RolledBackDirName, "*"))
			var want []string
			if keep {
				want = []string{filepath.Join(dir, RolledBackDirName, "part-00000-0000-0000000003"), filepath.Join(dir, RolledBackDirName, "part-00000-0000-0000000004")}
			}
			if !slices.Equal(rolled, want) {
				t.Errorf("%s holds %v, want %v", RolledBackDirName, rolled, want)
			}
			// The pending file of 5 is Cleanup's, not the rollback's.
			if p := hiddenOfKind(t, dir, pendingSuffix); len(p) != 1 {
				t.Errorf("pending files after the rollback: %v, want checkpoint 5's", p)
			}
			if undone, err := sink.RollBackAfter(t.Context(), 2); err != nil || undone != 0 {
				t.Errorf("second RollBackAfter(2) = %d, %v; want nothing to undo", undone, err)
			}
			if undone, err := ExactlyOnce(filepath.Join(dir, "missing"), ExactlyOnceOptions{}).RollBackAfter(t.Context(), 1); err != nil || undone != 0 {
				t.Errorf("RollBackAfter of a directory that does not exist = %d, %v", undone, err)
			}
		})
	}
}
