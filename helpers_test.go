// Shared test helpers of the root package (the sp* helpers of the one job
// that the savepoint, restore, backend, broadcast, incremental, operator
// state and timer tests run, and the polling and metadata helpers).

package weir_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
	"github.com/weirstream/weir/internal/testutil/multiset"
	"github.com/weirstream/weir/state"
)

// The tests of savepoint_test.go and restore_test.go share one job: a source
// of indexes 0, 1, 2, …, keyed by index mod 37, a running count per key
// ("k5,12" is the 12th record of key k5), a tap counting what went through,
// and a sink. The output multiset of n records is fixed whatever the
// parallelism and the order of arrival, so every run (or chain of runs)
// covering the indexes 0..n-1 exactly once must produce spWant(n) exactly.

const spKeys = 37

func spKey(i int64) string { return fmt.Sprint("k", i%spKeys) }

// spCounter is the keyed running count. onSnapshot, if set, runs in the
// synchronous part of every checkpoint (weir.CheckpointedFunction);
// onElement, if set, runs before each record and may fail it.
type spCounter struct {
	count      state.Value[int64]
	onSnapshot func(id int64)
	onElement  func(i int64) error
}

func (c *spCounter) SnapshotState(id int64) error {
	if c.onSnapshot != nil {
		c.onSnapshot(id)
	}
	return nil
}

func (c *spCounter) Open(ctx *weir.KeyedContext[string]) (err error) {
	c.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (c *spCounter) ProcessElement(ctx *weir.KeyedContext[string], i int64, out weir.Collector[string]) error {
	if c.onElement != nil {
		if err := c.onElement(i); err != nil {
			return err
		}
	}
	n, _ := c.count.Value()
	n++
	c.count.Update(n)
	out.Collect(fmt.Sprintf("%s,%d", ctx.CurrentKey(), n))
	return nil
}

// spWant is the output of the indexes 0..n-1.
func spWant(n int64) []string {
	counts := map[string]int{}
	out := make([]string, 0, n)
	for i := range n {
		k := spKey(i)
		counts[k]++
		out = append(out, fmt.Sprintf("%s,%d", k, counts[k]))
	}
	return out
}

// spBuild adds the shared job to env. srcPar 0 keeps the default
// parallelism for the source. Every operator has an explicit uid, so that a
// restored job finds its state whatever the names.
func spBuild(env *weir.Environment, src connector.Source[int64], srcPar int, sink connector.Sink[string], tap *atomic.Int64) {
	spBuildWith(env, src, srcPar, sink, tap, &spCounter{})
}

// spBuildWith is spBuild with a counter of the caller's (hooks set).
func spBuildWith(env *weir.Environment, src connector.Source[int64], srcPar int, sink connector.Sink[string], tap *atomic.Int64, counter *spCounter) {
	s := env.FromSource("src", src).UID("src")
	if srcPar > 0 {
		s.Parallelism(srcPar)
	}
	s.KeyBy(spKey).
		Process("count", counter).UID("count").
		Map("tap", func(v string) string { tap.Add(1); return v }).UID("tap").
		SinkTo("out", sink).UID("out")
}

// spSameMultiset fails the test unless got and want hold the same strings
// the same number of times; it names what is missing and what is extra.
func spSameMultiset(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !spSameMultisetErr(t, what, got, want) {
		t.FailNow()
	}
}

// spSameMultisetErr is spSameMultiset without stopping the test; it reports
// whether the multisets are equal.
func spSameMultisetErr(t *testing.T, what string, got, want []string) bool {
	t.Helper()
	missing, extra := multiset.Diff(want, got)
	if len(missing) == 0 && len(extra) == 0 {
		return true
	}
	t.Errorf("%s: got %d records, want %d; %d missing (first %v), %d extra/duplicated (first %v)",
		what, len(got), len(want), len(missing), missing[:min(10, len(missing))], len(extra), extra[:min(10, len(extra))])
	return false
}

// spWait polls cond until it holds, failing the test after timeout.
func spWait(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// spWaitJob waits for the job to end, failing the test if it takes longer
// than timeout, and returns its error.
func spWaitJob(t *testing.T, c *weir.JobClient, timeout time.Duration) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Wait()
	case <-time.After(timeout):
		c.Cancel()
		<-c.Done()
		t.Fatalf("job did not end within %v", timeout)
		return nil
	}
}

// spCtx is a context for one test, bounded so that a hang fails fast.
func spCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// spFilePath turns the file:// URL weir returns for a savepoint into a path.
func spFilePath(t *testing.T, u string) string {
	t.Helper()
	p, ok := strings.CutPrefix(u, "file://")
	if !ok || !filepath.IsAbs(p) {
		t.Fatalf("savepoint path %q is not a file:// URL of an absolute path", u)
	}
	return p
}

// spReadMetadata reads the _metadata of the checkpoint or savepoint in the
// local directory dir, through the storage layer, as a restore would.
func spReadMetadata(t *testing.T, dir string) *checkpoint.Metadata {
	t.Helper()
	st, err := storage.Open(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	md, err := storage.CheckpointStorage{Store: st}.ReadMetadata(context.Background(), filepath.Base(dir))
	if err != nil {
		t.Fatalf("read the metadata of %s: %v", dir, err)
	}
	return md
}

// spOperator returns the state of operator uid in md, nil if none.
func spOperator(md *checkpoint.Metadata, uid string) *checkpoint.OperatorState {
	for i := range md.Operators {
		if md.Operators[i].UID == uid {
			return &md.Operators[i]
		}
	}
	return nil
}

// spSourcePosition returns the sum of the positions (next index) of the
// datagen or gate splits of operator "src" in md.
func spSourcePositions(t *testing.T, md *checkpoint.Metadata) []int64 {
	t.Helper()
	op := spOperator(md, "src")
	if op == nil {
		t.Fatalf("metadata %d has no state of operator src", md.ID)
	}
	var pos []int64
	for _, st := range op.Subtasks {
		for _, sp := range st.Splits {
			if len(sp.Position) != 8 {
				t.Fatalf("split %q of src has position %x, want 8 bytes", sp.ID, sp.Position)
			}
			pos = append(pos, int64(binary.BigEndian.Uint64(sp.Position)))
		}
	}
	return pos
}

// spCheckpointDirs lists the chk-<n> directories under jobDir, mapping
// each id to whether it holds a _metadata file.
func spCheckpointDirs(t *testing.T, jobDir string) map[int64]bool {
	t.Helper()
	entries, err := os.ReadDir(jobDir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[int64]bool{}
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]bool{}
	for _, e := range entries {
		id, ok := storage.ParseCheckpointDir(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		_, err := os.Stat(filepath.Join(jobDir, e.Name(), storage.MetadataName))
		out[id] = err == nil
	}
	return out
}

// spRates: the rate-limited datagen source of indexes.
func spIndexes(n int64, perSecond float64) *datagen.Source[int64] {
	return datagen.Generator(n, func(i int64) int64 { return i }).
		WithOptions(datagen.Options{RecordsPerSecond: perSecond, BatchSize: 64})
}
