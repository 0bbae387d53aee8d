package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
)

// changelogWrites writes to every kind of state with every kind of write:
// direct sets and deletes (value), merges (list appends), batches (list
// updates, map puts and removes, clears of groups), point deletions of a
// key's namespaces, and a new state name registered after the cut.
func changelogWrites(t *testing.T, b *Backend[string], round int) {
	t.Helper()
	kc := codec.String()
	v, err := NewValueState(b, fmt.Sprint("value", round), codec.Int())
	must(t, err)
	l, err := NewListState(b, fmt.Sprint("list", round), codec.String())
	must(t, err)
	m, err := NewMapState(b, fmt.Sprint("map", round), codec.String(), codec.Int())
	must(t, err)
	nv, err := NewNamespacedValueState(b, fmt.Sprint("nsvalue", round), codec.Int(), codec.String())
	must(t, err)
	for i := range 3000 {
		k := fmt.Sprint("k", i%700)
		b.SetCurrentKey(k, groupOf(kc, k))
		switch i % 9 {
		case 0:
			v.Update(i)
		case 1:
			v.Clear()
		case 2:
			l.Add(fmt.Sprint("a", i))
			l.Add(fmt.Sprint("b", i)) // merge operands: not idempotent
		case 3:
			l.Update([]string{"u", fmt.Sprint(i)})
		case 4:
			m.Put(fmt.Sprint("uk", i%5), i)
		case 5:
			m.Remove(fmt.Sprint("uk", (i+1)%5))
		case 6:
			nv.SetCurrentNamespace(i % 4)
			nv.Update(fmt.Sprint(i))
		case 7:
			nv.ClearAllNamespaces()
		case 8:
			m.Clear()
		}
	}
}

// canonical returns the bytes of a full canonical snapshot of b.
func canonical(t *testing.T, b *Backend[string]) []byte {
	t.Helper()
	return checkpointTo[string](t, b, 99).data
}

// TestChangelogReplay checks that a materialization (a native checkpoint
// taken at the cut) plus the replayed changelog segments is exactly the
// database as of the end of the last segment, for every kind of write.
func TestChangelogReplay(t *testing.T) {
	r := keygroup.Range{Start: 0, End: maxPar}
	kc := codec.String()
	root := t.TempDir()
	b := newPebble(t, r, kc, Options{})
	changelogWrites(t, b, 0)

	// Materialize and start the log at the same instant.
	mat := filepath.Join(root, "mat")
	_, err := b.SnapshotIncremental(1, mat)
	must(t, err)
	matB := filepath.Join(root, "matB") // the same instant
	_, err = b.SnapshotIncremental(2, matB)
	must(t, err)
	log, err := OpenChangelog(nil, filepath.Join(root, "log"), 0)
	must(t, err)
	defer log.Close()
	b.SetChangelog(log)

	var segs []string
	for round := 1; round <= 3; round++ {
		changelogWrites(t, b, round)
		seg, err := b.CutChangelog()
		must(t, err)
		if seg.Seq != int64(round-1) || seg.Size == 0 {
			t.Fatalf("segment %+v after round %d", seg, round)
		}
		segs = append(segs, seg.Path)
	}
	if log.Seq() != 3 || log.OpenSize() != 0 {
		t.Fatalf("open segment %d with %d bytes", log.Seq(), log.OpenSize())
	}
	want := canonical(t, b)

	b2 := newPebble(t, r, kc, Options{})
	must(t, b2.ReplayChangelog(mat, segs))
	_, err = b2.RestoreNative([]NativeCheckpoint{{Dir: mat, Groups: r}})
	must(t, err)
	for round := range 4 { // register the states, as the restored job does
		changelogWrites0(t, b2, round)
	}
	if got := canonical(t, b2); !bytes.Equal(got, want) {
		t.Fatalf("materialization + changelog: %d bytes of snapshot, want %d (the same state)", len(got), len(want))
	}

	// Without the last segment, the state is another one.
	b3 := newPebble(t, r, kc, Options{})
	must(t, b3.ReplayChangelog(matB, segs[:2]))
	_, err = b3.RestoreNative([]NativeCheckpoint{{Dir: matB, Groups: r}})
	must(t, err)
	for round := range 3 {
		changelogWrites0(t, b3, round)
	}
	if got := canonical(t, b3); bytes.Equal(got, want) {
		t.Fatal("the state without the last segment equals the state with it: the test proves nothing")
	}
}

// changelogWrites0 registers the states changelogWrites writes in round,
// without writing.
func changelogWrites0(t *testing.T, b *Backend[string], round int) {
	t.Helper()
	_, err := NewValueState(b, fmt.Sprint("value", round), codec.Int())
	must(t, err)
	_, err = NewListState(b, fmt.Sprint("list", round), codec.String())
	must(t, err)
	_, err = NewMapState(b, fmt.Sprint("map", round), codec.String(), codec.Int())
	must(t, err)
	_, err = NewNamespacedValueState(b, fmt.Sprint("nsvalue", round), codec.Int(), codec.String())
	must(t, err)
}

// TestChangelogCorruptSegment checks that a truncated or garbled segment
// is an error wrapping ErrCorruptChangelog, not a silently shorter state.
func TestChangelogCorruptSegment(t *testing.T) {
	r := keygroup.Range{Start: 0, End: maxPar}
	kc := codec.String()
	root := t.TempDir()
	b := newPebble(t, r, kc, Options{})
	log, err := OpenChangelog(nil, filepath.Join(root, "log"), 7)
	must(t, err)
	defer log.Close()
	b.SetChangelog(log)
	changelogWrites(t, b, 0)
	seg, err := b.CutChangelog()
	must(t, err)
	if filepath.Base(seg.Path) != "changelog-000000000007" {
		t.Fatalf("segment file %s", seg.Path)
	}
	data, err := os.ReadFile(seg.Path)
	must(t, err)
	for name, bad := range map[string][]byte{
		"truncated": data[:len(data)-3],
		"garbled":   append([]byte{0x05}, data...), // a record too short for a batch header
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(root, name)
			must(t, os.WriteFile(p, bad, 0o644))
			mat := filepath.Join(root, "mat-"+name)
			_, err := newPebble(t, r, kc, Options{}).SnapshotIncremental(1, mat)
			must(t, err)
			err = newPebble(t, r, kc, Options{}).ReplayChangelog(mat, []string{p})
			if !errors.Is(err, ErrCorruptChangelog) {
				t.Fatalf("replay of a %s segment: %v, want ErrCorruptChangelog", name, err)
			}
		})
	}
}

func TestChangelogSegmentNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		seq  int64
		ok   bool
	}{
		{"changelog-000000000012", 12, true},
		{ChangelogSegmentName(123456789012), 123456789012, true},
		{"changelog-12", 0, false},
		{"changelog-00000000001x", 0, false},
		{"000012.sst", 0, false},
		{"changelog--00000000001", 0, false},
	} {
		seq, ok := ParseChangelogSegmentName(tc.name)
		if seq != tc.seq || ok != tc.ok {
			t.Errorf("ParseChangelogSegmentName(%q) = %d, %t; want %d, %t", tc.name, seq, ok, tc.seq, tc.ok)
		}
	}
	if _, err := OpenChangelog(nil, t.TempDir(), -1); err == nil {
		t.Error("OpenChangelog with a negative first segment succeeded")
	}
}

// TestOnlyHooksWriteTheDatabase guards the changelog's completeness: the
// package writes to its database only through dbSet, dbDelete,
// dbDeleteRange and commitBatch (changelog.go), so that a write added
// elsewhere cannot bypass the log.
func TestOnlyHooksWriteTheDatabase(t *testing.T) {
	files, err := filepath.Glob("*.go")
	must(t, err)
	forbidden := map[string]bool{"Set": true, "Delete": true, "DeleteRange": true, "Merge": true, "Apply": true,
		"Commit": true, "Ingest": true, "SingleDelete": true, "LogData": true}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "changelog.go" {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		must(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !forbidden[sel.Sel.Name] {
				return true
			}
			// Writes into a batch are fine (the commit logs them); writes
			// on a database are not: db.X, b.db.X, c.b.db.X.
			recv := sel.X
			if s, ok := recv.(*ast.SelectorExpr); ok {
				recv = s.Sel
			}
			if id, ok := recv.(*ast.Ident); ok && (id.Name == "db" || sel.Sel.Name == "Commit") {
				t.Errorf("%s: %s bypasses the changelog hooks (changelog.go)", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
