package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend"
	"github.com/weirstream/weir/internal/statebackend/format"
	"github.com/weirstream/weir/state"
)

// TestConformance runs every script of testdata/conformance against the
// heap backend and the pebble backend. Both must print exactly the expected
// output, so the two backends behave alike operation by operation, and
// their snapshots (whose sizes and CRCs the scripts print) are the same
// bytes. Regenerate the expected output with -rewrite.
//
// Commands (b= names a backend, state= a state of it; keys are strings):
//
//	new name=B start=S end=E          an empty backend for key groups [S, E)
//	register b=B state=N type=int|string|bool
//	set b=B state=N key=K v=V [group=G] the key group defaults to the key's
//	get b=B state=N key=K [group=G]
//	clear b=B state=N key=K [group=G]
//	fill b=B state=N n=C [every=E] [add=A] [clear]
//	                                  sets k<i> to i+A (int) or "v<i+A>" (string)
//	                                  for i < C, i%E == 0, k<i> in B's range;
//	                                  with clear, clears them
//	verify b=B state=N n=C [every=E] [add=A] [strict]
//	                                  checks the k<i> of B's range that fill
//	                                  sets; with strict, the others must be absent
//	snapshot b=B id=I as=S            the synchronous part only
//	write snap=S file=F               WriteState (on another goroutine) and Release
//	release snap=S
//	checkpoint b=B id=I file=F        snapshot, write and release
//	restore b=B files=(F,...)         prints the files opened
//	compare F1 F2
//	corrupt file=F as=F2 truncate=N | flip=OFFSET | offsets=(...)
//	dump file=F                       entries per state
//	offsets file=F                    the handle's offsets
//	close b=B
func TestConformance(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			datadriven.Walk(t, "testdata/conformance", func(t *testing.T, path string) {
				s := &script{kind: kind, backends: map[string]*scriptBackend{}, files: map[string]file{}, snaps: map[string]statebackend.Snapshot{}}
				t.Cleanup(s.close)
				datadriven.RunTest(t, path, s.run)
			})
		})
	}
}

type script struct {
	kind     string
	backends map[string]*scriptBackend
	files    map[string]file
	snaps    map[string]statebackend.Snapshot
}

type scriptBackend struct {
	b      statebackend.KeyedBackend[string]
	states map[string]scriptState
	err    error // the last error given to OnError (pebble)
}

// scriptState is a typed state behind a text interface.
type scriptState interface {
	set(v string) error
	get() string
	clear()
	// want returns the text of the value fill sets for index i.
	want(i int) string
}

type typedState[V any] struct {
	s     state.Value[V]
	sb    *scriptBackend
	parse func(string) (V, error)
	fill  func(i int) V
}

func (s *typedState[V]) set(v string) error {
	x, err := s.parse(v)
	if err != nil {
		return err
	}
	s.s.Update(x)
	return nil
}

func (s *typedState[V]) get() string {
	s.sb.err = nil
	v, ok := s.s.Value()
	switch {
	case s.sb.err != nil:
		return "error: " + normalize(s.sb.err)
	case !ok:
		return "(absent)"
	}
	return fmt.Sprint(v)
}

func (s *typedState[V]) clear()            { s.s.Clear() }
func (s *typedState[V]) want(i int) string { return fmt.Sprint(s.fill(i)) }

func register[V any](sb *scriptBackend, name string, c codec.Codec[V], parse func(string) (V, error), fill func(int) V) error {
	s, err := valueState(sb.b, name, c)
	if err != nil {
		return err
	}
	sb.states[name] = &typedState[V]{s: s, sb: sb, parse: parse, fill: fill}
	return nil
}

// normalize removes the backend's name from an error, so that both
// backends print the same text.
func normalize(err error) string {
	msg := strings.NewReplacer("heap backend", "backend", "pebble backend", "backend",
		"heap snapshot", "snapshot", "pebble snapshot", "snapshot").Replace(err.Error())
	if errors.Is(err, format.ErrCorrupt) {
		return "(corrupt) " + msg
	}
	return msg
}

func (s *script) close() {
	for _, sn := range s.snaps {
		sn.Release()
	}
	for _, sb := range s.backends {
		_ = closeBackend(sb.b)
	}
}

func (s *script) backend(t *testing.T, td *datadriven.TestData) *scriptBackend {
	var name string
	td.ScanArgs(t, "b", &name)
	sb := s.backends[name]
	if sb == nil {
		t.Fatalf("%s: no backend %q", td.Pos, name)
	}
	return sb
}

func (s *script) state(t *testing.T, td *datadriven.TestData) (*scriptBackend, scriptState) {
	sb := s.backend(t, td)
	var name string
	td.ScanArgs(t, "state", &name)
	st := sb.states[name]
	if st == nil {
		t.Fatalf("%s: no state %q registered", td.Pos, name)
	}
	return sb, st
}

// setKey makes the command's key current, in the key group of group= or the
// key's own.
func setKey(t *testing.T, td *datadriven.TestData, sb *scriptBackend) {
	var key string
	td.ScanArgs(t, "key", &key)
	g := groupOf(codec.String(), key)
	td.MaybeScanArgs(t, "group", &g)
	sb.b.SetCurrentKey(key, g)
}

func intArg(t *testing.T, td *datadriven.TestData, key string, def int) int {
	td.MaybeScanArgs(t, key, &def)
	return def
}

func (s *script) run(t *testing.T, td *datadriven.TestData) string {
	switch td.Cmd {
	case "new":
		var name string
		var start, end int
		td.ScanArgs(t, "name", &name)
		td.ScanArgs(t, "start", &start)
		td.ScanArgs(t, "end", &end)
		r := keygroup.Range{Start: start, End: end}
		sb := &scriptBackend{states: map[string]scriptState{}}
		if s.kind == "pebble" {
			b, err := New(r, codec.String(), Options{
				Dir: filepath.Join(t.TempDir(), name), CacheSize: 1 << 20, MemTableSize: 256 << 10,
				OnError: func(err error) { sb.err = err },
			})
			if err != nil {
				t.Fatal(err)
			}
			sb.b = b
		} else {
			sb.b = newBackend(t, s.kind, r, codec.String())
		}
		s.backends[name] = sb
		return ""

	case "register":
		sb := s.backend(t, td)
		var name, typ string
		td.ScanArgs(t, "state", &name)
		td.ScanArgs(t, "type", &typ)
		var err error
		switch typ {
		case "int":
			err = register(sb, name, codec.Int(), strconv.Atoi, func(i int) int { return i })
		case "string":
			err = register(sb, name, codec.String(), func(s string) (string, error) { return s, nil }, func(i int) string { return fmt.Sprint("v", i) })
		case "bool":
			err = register(sb, name, codec.Bool(), strconv.ParseBool, func(i int) bool { return i%2 == 0 })
		default:
			t.Fatalf("%s: unknown type %q", td.Pos, typ)
		}
		if err != nil {
			return "error: " + normalize(err)
		}
		return "ok"

	case "set", "get", "clear":
		sb, st := s.state(t, td)
		setKey(t, td, sb)
		switch td.Cmd {
		case "set":
			var v string
			td.ScanArgs(t, "v", &v)
			if err := st.set(v); err != nil {
				t.Fatal(err)
			}
		case "clear":
			st.clear()
		default:
			return st.get()
		}
		return ""

	case "fill":
		sb, st := s.state(t, td)
		n, every, add := intArg(t, td, "n", 0), intArg(t, td, "every", 1), intArg(t, td, "add", 0)
		clearing := td.HasArg("clear")
		count := 0
		for i := 0; i < n; i += every {
			k := fmt.Sprint("k", i)
			if g := groupOf(codec.String(), k); sb.b.KeyGroups().Contains(g) {
				sb.b.SetCurrentKey(k, g)
				if clearing {
					st.clear()
				} else if err := st.set(st.want(i + add)); err != nil {
					t.Fatal(err)
				}
				count++
			}
		}
		if clearing {
			return fmt.Sprintf("%d keys cleared", count)
		}
		return fmt.Sprintf("%d keys set", count)

	case "verify":
		sb, st := s.state(t, td)
		n, every, add := intArg(t, td, "n", 0), intArg(t, td, "every", 1), intArg(t, td, "add", 0)
		strict := td.HasArg("strict")
		var bad []string
		checked, present := 0, 0
		for i := range n {
			k := fmt.Sprint("k", i)
			g := groupOf(codec.String(), k)
			if !sb.b.KeyGroups().Contains(g) {
				continue
			}
			checked++
			sb.b.SetCurrentKey(k, g)
			got, want := st.get(), "(absent)"
			if got != "(absent)" {
				present++
			}
			if i%every == 0 {
				want = st.want(i + add)
			} else if !strict {
				continue
			}
			if got != want {
				bad = append(bad, fmt.Sprintf("%s = %s, want %s", k, got, want))
			}
		}
		if len(bad) > 0 {
			return fmt.Sprintf("%d keys in range, %d wrong, first: %s", checked, len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
		}
		return fmt.Sprintf("%d keys in range, %d present: ok", checked, present)

	case "snapshot":
		sb := s.backend(t, td)
		var id int64
		var as string
		td.ScanArgs(t, "id", &id)
		td.ScanArgs(t, "as", &as)
		snap, err := sb.b.Snapshot(id)
		if err != nil {
			return "error: " + normalize(err)
		}
		s.snaps[as] = snap
		return ""

	case "write":
		var as, name string
		td.ScanArgs(t, "snap", &as)
		td.ScanArgs(t, "file", &name)
		f := write(t, s.snaps[as], name)
		delete(s.snaps, as)
		s.files[name] = f
		return describeFile(f)

	case "release":
		var as string
		td.ScanArgs(t, "snap", &as)
		s.snaps[as].Release()
		delete(s.snaps, as)
		return ""

	case "checkpoint":
		sb := s.backend(t, td)
		var id int64
		var name string
		td.ScanArgs(t, "id", &id)
		td.ScanArgs(t, "file", &name)
		snap, err := sb.b.Snapshot(id)
		if err != nil {
			return "error: " + normalize(err)
		}
		f := write(t, snap, name)
		s.files[name] = f
		return describeFile(f)

	case "restore":
		sb := s.backend(t, td)
		var names []string
		td.ScanArgs(t, "files", &names)
		var files []file
		for _, n := range names {
			f, ok := s.files[n]
			if !ok {
				t.Fatalf("%s: no file %q", td.Pos, n)
			}
			files = append(files, f)
		}
		opened, err := restoreFiles(sb.b, files)
		out := fmt.Sprintf("opened %v\n", opened)
		if err != nil {
			return out + "error: " + normalize(err)
		}
		return out + "ok"

	case "compare":
		if len(td.CmdArgs) != 2 {
			t.Fatalf("%s: compare takes two files", td.Pos)
		}
		a, b := s.files[td.CmdArgs[0].Key], s.files[td.CmdArgs[1].Key]
		if bytes.Equal(a.data, b.data) && slices.Equal(a.h.Offsets, b.h.Offsets) && a.h.CRC == b.h.CRC {
			return "identical"
		}
		return "differ"

	case "corrupt":
		var name, as string
		td.ScanArgs(t, "file", &name)
		td.ScanArgs(t, "as", &as)
		f := s.files[name]
		f.data = bytes.Clone(f.data)
		f.h.Offsets = slices.Clone(f.h.Offsets)
		f.h.Path = as
		switch {
		case td.HasArg("truncate"):
			n := intArg(t, td, "truncate", 0)
			f.data, f.h.Size = f.data[:n], int64(n)
		case td.HasArg("flip"):
			f.data[intArg(t, td, "flip", 0)] ^= 0xff
		case td.HasArg("offsets"):
			var offs []string
			td.ScanArgs(t, "offsets", &offs)
			f.h.Offsets = nil
			for _, o := range offs {
				v, _ := strconv.ParseInt(o, 10, 64)
				f.h.Offsets = append(f.h.Offsets, v)
			}
		}
		s.files[as] = f
		return ""

	case "offsets":
		var name string
		td.ScanArgs(t, "file", &name)
		return fmt.Sprint(s.files[name].h.Offsets)

	case "dump":
		var name string
		td.ScanArgs(t, "file", &name)
		return dump(s.files[name])

	case "close":
		sb := s.backend(t, td)
		if err := closeBackend(sb.b); err != nil {
			return "error: " + err.Error()
		}
		return ""
	}
	t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	return ""
}

func describeFile(f file) string {
	return fmt.Sprintf("%s: key groups [%d, %d), %d bytes, crc %08x", f.h.Path, f.h.StartGroup, f.h.EndGroup, f.h.Size, f.h.CRC)
}

// dump summarizes a file: per state, its entries, the key groups holding
// some, and a hash of its entries.
func dump(f file) string {
	ff, err := format.Open(f.h, f.data)
	if err != nil {
		return "error: " + err.Error()
	}
	type sum struct {
		entries, groups int
		h               uint64
	}
	sums := map[string]*sum{}
	hs := map[string]hash.Hash64{}
	for g := f.h.StartGroup; g < f.h.EndGroup; g++ {
		blk, err := ff.Block(g)
		if err != nil {
			return "error: " + err.Error()
		}
		for _, sb := range blk.States {
			if sums[sb.Name] == nil {
				sums[sb.Name] = &sum{}
				hs[sb.Name] = fnv.New64a()
			}
			sums[sb.Name].entries += sb.Entries
			sums[sb.Name].groups++
			_ = sb.ForEach(func(k, v []byte) error {
				fmt.Fprintf(hs[sb.Name], "%d|%x|%x;", g, k, v)
				return nil
			})
		}
	}
	var out strings.Builder
	for _, name := range slices.Sorted(maps.Keys(sums)) {
		fmt.Fprintf(&out, "%s: %d entries in %d key groups, hash %016x\n", name, sums[name].entries, sums[name].groups, hs[name].Sum64())
	}
	if out.Len() == 0 {
		return "(empty)"
	}
	return strings.TrimSuffix(out.String(), "\n")
}
