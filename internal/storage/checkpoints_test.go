package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
)

// writeCheckpoint writes checkpoint id of cs with one subtask per state file
// (name → content) and one inline handle, and returns its metadata.
func writeCheckpoint(t *testing.T, cs CheckpointStorage, id int64, files map[string]string) *checkpoint.Metadata {
	t.Helper()
	return writeCheckpointIn(t, cs, cs.CheckpointDir(id), id, checkpoint.KindCheckpoint, files)
}

func writeCheckpointIn(t *testing.T, cs CheckpointStorage, dir string, id int64, kind checkpoint.Kind, files map[string]string) *checkpoint.Metadata {
	t.Helper()
	ctx := context.Background()
	op := checkpoint.OperatorState{UID: "count", Name: "count", Parallelism: len(files) + 1}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		size, crc, err := cs.WriteStateFile(ctx, dir, name, func(w io.Writer) error {
			_, err := io.WriteString(w, files[name])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		op.Subtasks = append(op.Subtasks, checkpoint.SubtaskState{Subtask: i, Keyed: []checkpoint.KeyedStateHandle{{
			Backend: "heap", Path: name, Size: size, CRC: crc, StartGroup: i, EndGroup: i + 1,
		}}})
	}
	inline := []byte(fmt.Sprintf("inline state of %d", id))
	op.Subtasks = append(op.Subtasks, checkpoint.SubtaskState{Subtask: len(names), Keyed: []checkpoint.KeyedStateHandle{{
		Backend: "heap", Inline: inline, Size: int64(len(inline)), CRC: Checksum(inline), StartGroup: len(names), EndGroup: len(names) + 1,
	}}})
	m := &checkpoint.Metadata{JobID: cs.JobID, ID: id, Kind: kind, Timestamp: 1000 * id, MaxParallelism: 128,
		Operators: []checkpoint.OperatorState{op}}
	if err := cs.WriteMetadata(ctx, dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func fileStoreAt(t *testing.T, root string) Store {
	t.Helper()
	s, err := NewFileStore(root, OSFS)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckpointLayout(t *testing.T) {
	cs := CheckpointStorage{Store: NewMemoryStore(), JobID: "job-1"}
	tests := []struct{ got, want string }{
		{cs.CheckpointDir(7), "job-1/chk-7"},
		{cs.SharedDir(), "job-1/shared"},
		{cs.TaskOwnedDir(), "job-1/taskowned"},
		{cs.JobDir(), "job-1"},
		{CheckpointStorage{}.CheckpointDir(3), "chk-3"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	re := regexp.MustCompile(`^sp/savepoint-7-[0-9a-f]{6}$`)
	a, b := SavepointDir("sp/", 7), SavepointDir("sp", 7)
	if !re.MatchString(a) || !re.MatchString(b) {
		t.Fatalf("SavepointDir = %q, %q; want them to match %s", a, b, re)
	}
	if a == b {
		t.Fatalf("two savepoint dirs are both %q", a)
	}
	if got := SavepointDir("", 12); !strings.HasPrefix(got, "savepoint-12-") {
		t.Fatalf("SavepointDir(\"\", 12) = %q", got)
	}
}

func TestParseCheckpointDir(t *testing.T) {
	tests := []struct {
		dir  string
		id   int64
		want bool
	}{
		{"chk-1", 1, true},
		{"job/chk-42", 42, true},
		{"chk-0", 0, false},
		{"chk-07", 0, false},
		{"chk--1", 0, false},
		{"chk-+1", 0, false},
		{"chk-", 0, false},
		{"chk-1x", 0, false},
		{"shared", 0, false},
		{"chk-99999999999999999999", 0, false},
	}
	for _, tt := range tests {
		id, ok := ParseCheckpointDir(tt.dir)
		if id != tt.id || ok != tt.want {
			t.Errorf("ParseCheckpointDir(%q) = %d, %v; want %d, %v", tt.dir, id, ok, tt.id, tt.want)
		}
	}
}

func TestMetadataWriteRead(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			cs := CheckpointStorage{Store: kind.new(t), JobID: "job"}
			m := writeCheckpoint(t, cs, 3, map[string]string{"a.state": "aaaa", "b.state": "b"})
			got, err := cs.ReadMetadata(ctx, cs.CheckpointDir(3))
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != 3 || got.Version != 1 || len(got.Operators[0].Subtasks) != 3 {
				t.Fatalf("ReadMetadata = %+v, want what was written (%+v)", got, m)
			}
			if err := cs.Verify(ctx, cs.CheckpointDir(3), got); err != nil {
				t.Fatalf("Verify of an intact checkpoint: %v", err)
			}
			if err := cs.WriteMetadata(ctx, cs.CheckpointDir(3), m); !errors.Is(err, ErrExists) {
				t.Fatalf("second WriteMetadata = %v, want ErrExists", err)
			}
			if _, err := cs.ReadMetadata(ctx, cs.CheckpointDir(4)); !errors.Is(err, ErrNotFound) {
				t.Fatalf("ReadMetadata of a missing checkpoint = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestWriteMetadataAtomic fails each step of the metadata write in turn and
// checks that no _metadata becomes visible, nothing is left behind, and the
// write succeeds once the fault is gone.
func TestWriteMetadataAtomic(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		file bool // file store over a fault FS; else a memory store WithFaults
	}{
		{"file: create temp", Rule{Ops: OpCreate, Path: "*_metadata*", Nth: 1}, true},
		{"file: write", Rule{Ops: OpWrite, Path: "*_metadata*", Nth: 1}, true},
		{"file: fsync", Rule{Ops: OpSync, Path: "*_metadata*", Nth: 1}, true},
		{"file: close", Rule{Ops: OpClose, Path: "*_metadata*", Nth: 1}, true},
		{"file: rename", Rule{Ops: OpRename, Path: "_metadata", Nth: 1}, true},
		{"file: fsync dir", Rule{Ops: OpSyncDir, Path: "chk-5", Nth: 1}, true},
		{"file: mkdir", Rule{Ops: OpMkdir, Nth: 1}, true},
		{"memory: create", Rule{Ops: OpCreate, Path: "_metadata", Nth: 1}, false},
		{"memory: write", Rule{Ops: OpWrite, Path: "_metadata", Nth: 1}, false},
		{"memory: commit", Rule{Ops: OpCommit, Path: "_metadata", Nth: 1}, false},
		{"memory: stat", Rule{Ops: OpStat, Path: "_metadata", Nth: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			faults := NewFaults(1)
			mustAdd(t, faults, tt.rule)
			root := t.TempDir()
			var store Store
			if tt.file {
				s, err := NewFileStore(root, NewFaultFS(OSFS, faults))
				if err != nil {
					t.Fatal(err)
				}
				store = s
			} else {
				store = WithFaults(NewMemoryStore(), faults)
			}
			cs := CheckpointStorage{Store: store, JobID: "job"}
			dir := cs.CheckpointDir(5)
			m := &checkpoint.Metadata{JobID: "job", ID: 5}

			err := cs.WriteMetadata(ctx, dir, m)
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("WriteMetadata = %v, want the injected fault", err)
			}
			if _, err := cs.ReadMetadata(ctx, dir); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after a failed write: ReadMetadata = %v, want ErrNotFound", err)
			}
			if names := list(t, store, ""); len(names) != 0 {
				t.Fatalf("after a failed write: objects %q, want none", names)
			}
			if tt.file {
				assertNoTempFiles(t, root)
			}
			if _, _, _, err := cs.Latest(ctx); !errors.Is(err, ErrNoCheckpoint) {
				t.Fatalf("Latest = %v, want ErrNoCheckpoint", err)
			}

			if err := cs.WriteMetadata(ctx, dir, m); err != nil {
				t.Fatalf("retry without fault: %v", err)
			}
			if gotDir, got, _, err := cs.Latest(ctx); err != nil || gotDir != dir || got.ID != 5 {
				t.Fatalf("Latest = %q, %+v, %v; want %s", gotDir, got, err, dir)
			}
			if faults.Injected() != 1 {
				t.Fatalf("Injected() = %d, want 1", faults.Injected())
			}
		})
	}
}

func TestStateFiles(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	cs := CheckpointStorage{Store: store, JobID: "job"}
	dir := cs.CheckpointDir(1)
	content := strings.Repeat("state bytes ", 1000)
	size, crc, err := cs.WriteStateFile(ctx, dir, "s", func(w io.Writer) error {
		for i := 0; i < len(content); i += 100 {
			if _, err := io.WriteString(w, content[i:min(i+100, len(content))]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(content)) || crc != Checksum([]byte(content)) {
		t.Fatalf("WriteStateFile = %d, %08x; want %d, %08x", size, crc, len(content), Checksum([]byte(content)))
	}
	got, err := cs.ReadStateFile(ctx, dir, "s", size, crc)
	if err != nil || string(got) != content {
		t.Fatalf("ReadStateFile = %d bytes, %v; want the content", len(got), err)
	}

	errWriter := errors.New("snapshot failed")
	if _, _, err := cs.WriteStateFile(ctx, dir, "failed", func(w io.Writer) error {
		io.WriteString(w, "partial")
		return errWriter
	}); !errors.Is(err, errWriter) {
		t.Fatalf("WriteStateFile with a failing writer = %v, want its error", err)
	}
	mustBeMissing(t, store, dir+"/failed")

	damaged := []byte(content)
	damaged[500] ^= 0x20
	put(t, store, dir+"/same-size", string(damaged))
	put(t, store, dir+"/truncated", content[:len(content)-1])
	put(t, store, dir+"/longer", content+"!")
	tests := []struct {
		name       string
		wantErr    error
		wantDetail string
		atOpen     bool // OpenStateFile itself fails
	}{
		{"same-size", ErrCorruptState, "checksum", false},
		{"truncated", ErrCorruptState, fmt.Sprintf("%d bytes, want %d", len(content)-1, len(content)), true},
		{"longer", ErrCorruptState, fmt.Sprintf("%d bytes, want %d", len(content)+1, len(content)), true},
		{"missing", ErrNotFound, "missing", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := cs.ReadStateFile(ctx, dir, tt.name, size, crc); !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantDetail) {
				t.Fatalf("ReadStateFile = %v, want %v with %q", err, tt.wantErr, tt.wantDetail)
			}
			r, err := cs.OpenStateFile(ctx, dir, tt.name, size, crc)
			if tt.atOpen {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("OpenStateFile = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := io.ReadAll(r); !errors.Is(err, tt.wantErr) {
				t.Fatalf("reading to EOF = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// corruptMetadata rewrites dir/_metadata of st with f applied to its bytes.
func corruptMetadata(t *testing.T, st Store, dir string, f func([]byte) []byte) {
	t.Helper()
	b, err := get(t, st, dir+"/_metadata")
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, dir+"/_metadata", string(f([]byte(b))))
}

func TestLatestSkipsDamagedCheckpoints(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			st := kind.new(t)
			cs := CheckpointStorage{Store: st, JobID: "job"}
			files := map[string]string{"a.state": "alpha", "b.state": "beta"}
			for id := int64(1); id <= 9; id++ {
				if id == 6 { // incomplete: state files, no _metadata
					if _, _, err := cs.WriteStateFile(ctx, cs.CheckpointDir(6), "a.state", func(w io.Writer) error { return nil }); err != nil {
						t.Fatal(err)
					}
					continue
				}
				writeCheckpoint(t, cs, id, files)
			}
			put(t, st, "job/shared/sst-1", "shared files are not checkpoints")
			put(t, st, "job/taskowned/x", "nor are task-owned ones")

			if err := st.Delete(ctx, "job/chk-3/b.state"); err != nil {
				t.Fatal(err)
			}
			put(t, st, "job/chk-4/a.state", "alph")  // truncated
			put(t, st, "job/chk-5/a.state", "alpHa") // same size, bit flip
			corruptMetadata(t, st, "job/chk-7", func(b []byte) []byte { b[20] ^= 1; return b })
			corruptMetadata(t, st, "job/chk-8", func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], checkpoint.MetadataVersion+1); return b })
			b2, err := get(t, st, "job/chk-2/_metadata")
			if err != nil {
				t.Fatal(err)
			}
			corruptMetadata(t, st, "job/chk-9", func([]byte) []byte { return []byte(b2) })

			dir, m, skipped, err := cs.Latest(ctx)
			if err != nil {
				t.Fatalf("Latest: %v (skipped %v)", err, skipped)
			}
			if dir != "job/chk-2" || m.ID != 2 {
				t.Fatalf("Latest = %q (id %d), want job/chk-2", dir, m.ID)
			}
			wantReasons := []struct {
				prefix, detail string
				sentinel       error
			}{
				{"chk-9: ", "holds checkpoint 2", checkpoint.ErrCorruptMetadata},
				{"chk-8: ", "format version 5", checkpoint.ErrUnsupportedMetadataVersion},
				{"chk-7: ", "checksum mismatch", checkpoint.ErrCorruptMetadata},
				{"chk-6: ", "incomplete: no _metadata", ErrNotFound},
				{"chk-5: ", "state file a.state: " + ErrCorruptState.Error() + ": checksum", ErrCorruptState},
				{"chk-4: ", "state file a.state: " + ErrCorruptState.Error() + ": 4 bytes, want 5", ErrCorruptState},
				{"chk-3: ", "state file b.state missing", ErrNotFound},
			}
			if len(skipped) != len(wantReasons) {
				t.Fatalf("skipped = %v, want %d reasons", skipped, len(wantReasons))
			}
			for i, want := range wantReasons {
				got := skipped[i]
				if !strings.HasPrefix(got.Error(), want.prefix) || !strings.Contains(got.Error(), want.detail) || !errors.Is(got, want.sentinel) {
					t.Errorf("skipped[%d] = %v, want %q…%q wrapping %v", i, got, want.prefix, want.detail, want.sentinel)
				}
			}

			// The quick check reads no state file: the bit flip in chk-5
			// goes unseen (the restore's reads catch it), the truncated
			// and missing files do not.
			dir, m, skipped, err = cs.LatestQuick(ctx)
			if err != nil || dir != "job/chk-5" || m.ID != 5 || len(skipped) != 4 {
				t.Fatalf("LatestQuick = %q (id %v), skipped %v, %v; want job/chk-5 after skipping 9, 8, 7 and 6", dir, m, skipped, err)
			}
			if _, err := cs.ReadStateFile(ctx, dir, "a.state", 5, checksumOf("alpha")); !errors.Is(err, ErrCorruptState) {
				t.Fatalf("reading chk-5's flipped file = %v, want ErrCorruptState", err)
			}
			put(t, st, "job/chk-5/a.state", "alph")
			if dir, _, _, err := cs.LatestQuick(ctx); err != nil || dir != "job/chk-2" {
				t.Fatalf("LatestQuick after truncating chk-5 = %q, %v; want job/chk-2", dir, err)
			}

			if max, err := cs.MaxCheckpointID(ctx); err != nil || max != 9 {
				t.Fatalf("MaxCheckpointID = %d, %v; want 9", max, err)
			}
			if ids, err := cs.Checkpoints(ctx); err != nil || !slices.Equal(ids, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
				t.Fatalf("Checkpoints = %v, %v", ids, err)
			}

			// Discarding the newest good one falls back to the one before.
			if err := cs.Discard(ctx, "job/chk-2"); err != nil {
				t.Fatal(err)
			}
			if dir, _, _, err := cs.Latest(ctx); err != nil || dir != "job/chk-1" {
				t.Fatalf("after discarding chk-2: Latest = %q, %v; want job/chk-1", dir, err)
			}
			if names := list(t, st, "job/chk-2"); len(names) != 0 {
				t.Fatalf("after Discard: %q remain", names)
			}
		})
	}
}

func TestLatestOrdersNumerically(t *testing.T) {
	cs := CheckpointStorage{Store: NewMemoryStore(), JobID: "job"}
	writeCheckpoint(t, cs, 9, nil)
	writeCheckpoint(t, cs, 10, nil)
	if dir, _, _, err := cs.Latest(context.Background()); err != nil || dir != "job/chk-10" {
		t.Fatalf("Latest = %q, %v; want job/chk-10", dir, err)
	}
}

func TestLatestNone(t *testing.T) {
	ctx := context.Background()
	cs := CheckpointStorage{Store: NewMemoryStore(), JobID: "job"}
	if _, _, skipped, err := cs.Latest(ctx); !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 0 {
		t.Fatalf("Latest of an empty store = %v, %v; want ErrNoCheckpoint", skipped, err)
	}
	if max, err := cs.MaxCheckpointID(ctx); err != nil || max != 0 {
		t.Fatalf("MaxCheckpointID of an empty store = %d, %v; want 0", max, err)
	}
	writeCheckpoint(t, cs, 1, nil)
	corruptMetadata(t, cs.Store, "job/chk-1", func(b []byte) []byte { return b[:len(b)-2] })
	_, _, skipped, err := cs.Latest(ctx)
	if !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "truncated") {
		t.Fatalf("Latest with only a truncated checkpoint = %v, %v; want ErrNoCheckpoint and the reason", skipped, err)
	}
}

// TestLatestStopsOnStoreErrors checks that an error of the store is not
// taken for damage: falling back past a complete checkpoint would replay
// committed output.
func TestLatestStopsOnStoreErrors(t *testing.T) {
	faults := NewFaults(1)
	cs := CheckpointStorage{Store: WithFaults(NewMemoryStore(), faults), JobID: "job"}
	writeCheckpoint(t, cs, 1, map[string]string{"a": "a"})
	writeCheckpoint(t, cs, 2, map[string]string{"a": "a"})
	for _, rule := range []Rule{
		{Ops: OpOpen, Path: "chk-2/_metadata", Probability: 1},
		{Ops: OpRead, Path: "chk-2/a", Probability: 1},
		{Ops: OpList, Probability: 1},
	} {
		faults.Clear()
		mustAdd(t, faults, rule)
		if dir, _, skipped, err := cs.Latest(context.Background()); !errors.Is(err, ErrInjected) || errors.Is(err, ErrNoCheckpoint) {
			t.Fatalf("Latest with %s failing = %q, %v, %v; want the store's error", rule.Ops, dir, skipped, err)
		}
	}
}

func TestVerifyPaths(t *testing.T) {
	ctx := context.Background()
	st := NewMemoryStore()
	cs := CheckpointStorage{Store: st, JobID: "job"}
	put(t, st, "job/shared/sst", "s")
	put(t, st, "job/chk-1/own", "o")
	withHandle := func(kind checkpoint.Kind, h checkpoint.KeyedStateHandle) *checkpoint.Metadata {
		return &checkpoint.Metadata{Kind: kind, Operators: []checkpoint.OperatorState{{UID: "op",
			Subtasks: []checkpoint.SubtaskState{{Keyed: []checkpoint.KeyedStateHandle{h}}}}}}
	}
	file := func(p, content string) checkpoint.KeyedStateHandle {
		return checkpoint.KeyedStateHandle{Path: p, Size: int64(len(content)), CRC: Checksum([]byte(content))}
	}
	tests := []struct {
		name    string
		m       *checkpoint.Metadata
		wantErr string
	}{
		{"own file", withHandle(checkpoint.KindCheckpoint, file("own", "o")), ""},
		{"own file of a savepoint", withHandle(checkpoint.KindSavepoint, file("own", "o")), ""},
		{"shared file of a checkpoint", withHandle(checkpoint.KindCheckpoint, file("../shared/sst", "s")), ""},
		{"savepoint outside its dir", withHandle(checkpoint.KindSavepoint, file("../shared/sst", "s")), "a savepoint must hold only files inside its own directory"},
		{"absolute", withHandle(checkpoint.KindCheckpoint, file("/etc/passwd", "x")), "not a relative path"},
		{"outside the store", withHandle(checkpoint.KindCheckpoint, file("../../../x", "x")), "outside the storage root"},
		{"wrong size", withHandle(checkpoint.KindCheckpoint, file("own", "oo")), "1 bytes, want 2"},
		{"wrong crc", withHandle(checkpoint.KindCheckpoint, file("own", "x")), "checksum"},
		{"bad inline size", withHandle(checkpoint.KindCheckpoint, checkpoint.KeyedStateHandle{Inline: []byte("ab"), Size: 3}), "inline state"},
		{"bad inline crc", withHandle(checkpoint.KindCheckpoint, checkpoint.KeyedStateHandle{Inline: []byte("ab"), Size: 2, CRC: 1}), "inline state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cs.Verify(ctx, "job/chk-1", tt.m)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Verify = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrCorruptState)):
				t.Fatalf("Verify = %v, want ErrCorruptState with %q", err, tt.wantErr)
			}
		})
	}
}

func TestResolveRestore(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cs := CheckpointStorage{Store: fileStoreAt(t, root), JobID: "job"}
	files := map[string]string{"a.state": "alpha"}
	writeCheckpoint(t, cs, 4, files)
	spStore := fileStoreAt(t, filepath.Join(root, "savepoints"))
	spDir := SavepointDir("", 4)
	writeCheckpointIn(t, CheckpointStorage{Store: spStore}, spDir, 4, checkpoint.KindSavepoint, files)

	memName := uniqueMemoryName(t)
	mem, err := Open("memory://" + memName)
	if err != nil {
		t.Fatal(err)
	}
	writeCheckpoint(t, CheckpointStorage{Store: mem, JobID: "job"}, 2, files)

	chkPath := filepath.Join(root, "job", "chk-4")
	tests := []struct {
		path     string
		wantURL  string
		wantDir  string
		wantID   int64
		wantKind checkpoint.Kind
	}{
		{chkPath, "file://" + filepath.ToSlash(filepath.Join(root, "job")), "chk-4", 4, checkpoint.KindCheckpoint},
		{chkPath + "/", "file://" + filepath.ToSlash(filepath.Join(root, "job")), "chk-4", 4, checkpoint.KindCheckpoint},
		{filepath.Join(chkPath, "_metadata"), "file://" + filepath.ToSlash(filepath.Join(root, "job")), "chk-4", 4, checkpoint.KindCheckpoint},
		{"file://" + filepath.ToSlash(chkPath), "file://" + filepath.ToSlash(filepath.Join(root, "job")), "chk-4", 4, checkpoint.KindCheckpoint},
		{filepath.Join(root, "savepoints", spDir), "file://" + filepath.ToSlash(filepath.Join(root, "savepoints")), spDir, 4, checkpoint.KindSavepoint},
		{"memory://" + memName + "/job/chk-2", "memory://" + memName + "/job", "chk-2", 2, checkpoint.KindCheckpoint},
		{"memory://" + memName + "/job/chk-2/_metadata", "memory://" + memName + "/job", "chk-2", 2, checkpoint.KindCheckpoint},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			st, dir, m, err := ResolveRestore(ctx, tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if st.URL() != tt.wantURL || dir != tt.wantDir || m.ID != tt.wantID || m.Kind != tt.wantKind {
				t.Fatalf("ResolveRestore = %s, %q, id %d %v; want %s, %q, id %d %v",
					st.URL(), dir, m.ID, m.Kind, tt.wantURL, tt.wantDir, tt.wantID, tt.wantKind)
			}
			h := m.Operators[0].Subtasks[0].Keyed[0]
			b, err := CheckpointStorage{Store: st}.ReadStateFile(ctx, dir, h.Path, h.Size, h.CRC)
			if err != nil || string(b) != "alpha" {
				t.Fatalf("reading the restored state: %q, %v", b, err)
			}
		})
	}
}

func TestResolveRestoreRejects(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cs := CheckpointStorage{Store: fileStoreAt(t, root), JobID: "job"}
	writeCheckpoint(t, cs, 1, map[string]string{"a.state": "alpha"})
	writeCheckpoint(t, cs, 2, map[string]string{"a.state": "alpha"})
	corruptMetadata(t, cs.Store, "job/chk-2", func(b []byte) []byte { b[30] ^= 4; return b })
	writeCheckpoint(t, cs, 3, map[string]string{"a.state": "alpha"})
	if err := os.WriteFile(filepath.Join(root, "job", "chk-3", "a.state"), []byte("alpHa"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cs.WriteStateFile(ctx, "job/chk-4", "a.state", func(w io.Writer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "other", "_metadata"), []byte("PK\x03\x04 not ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	spStore := CheckpointStorage{Store: fileStoreAt(t, filepath.Join(root, "sp"))}
	badSp := &checkpoint.Metadata{ID: 1, Kind: checkpoint.KindSavepoint, Operators: []checkpoint.OperatorState{{UID: "op",
		Subtasks: []checkpoint.SubtaskState{{Keyed: []checkpoint.KeyedStateHandle{{Path: "../../job/chk-1/a.state", Size: 5, CRC: Checksum([]byte("alpha"))}}}}}}}
	if err := spStore.WriteMetadata(ctx, "savepoint-1-abcdef", badSp); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		path     string
		why      string
		sentinel error
	}{
		{filepath.Join(root, "nothing-here"), "no such directory", ErrNotFound},
		{filepath.Join(root, "job", "chk-4"), "incomplete: no _metadata", ErrNotFound},
		{filepath.Join(root, "job", "chk-1", "a.state"), "a file, not a checkpoint directory", ErrNotCheckpoint},
		{filepath.Join(root, "job", "chk-2"), "checksum mismatch", checkpoint.ErrCorruptMetadata},
		{filepath.Join(root, "job", "chk-3"), "state file a.state", ErrCorruptState},
		{filepath.Join(root, "other"), "not a weir checkpoint metadata file", checkpoint.ErrNotMetadata},
		{filepath.Join(root, "sp", "savepoint-1-abcdef"), "inside its own directory", ErrCorruptState},
		{"/", "the root of a store", ErrNotCheckpoint},
		{"memory://", "the root of a store", ErrNotCheckpoint},
		{"s3://bucket/job/chk-1?secure=maybe", `secure="maybe"`, ErrBadURL},
		{"", "empty", ErrBadURL},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			_, _, _, err := ResolveRestore(ctx, tt.path)
			wantPrefix := tt.path + " is not a weir checkpoint or savepoint: "
			switch {
			case err == nil:
				t.Fatal("ResolveRestore succeeded")
			case !strings.HasPrefix(err.Error(), wantPrefix):
				t.Fatalf("ResolveRestore = %q, want it to start with %q", err, wantPrefix)
			case !strings.Contains(err.Error(), tt.why):
				t.Fatalf("ResolveRestore = %q, want it to say %q", err, tt.why)
			case !errors.Is(err, ErrNotCheckpoint) || !errors.Is(err, tt.sentinel):
				t.Fatalf("ResolveRestore = %v, want it to wrap ErrNotCheckpoint and %v", err, tt.sentinel)
			}
		})
	}
}

func TestMetadataFileIsTheCodecs(t *testing.T) {
	// The bytes on disk are exactly EncodeMetadata's: other tools can read them.
	root := t.TempDir()
	cs := CheckpointStorage{Store: fileStoreAt(t, root), JobID: "j"}
	m := writeCheckpoint(t, cs, 1, nil)
	onDisk, err := os.ReadFile(filepath.Join(root, "j", "chk-1", "_metadata"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := checkpoint.EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, want) {
		t.Fatal("the _metadata file differs from EncodeMetadata's bytes")
	}
}

func checksumOf(s string) uint32 { return Checksum([]byte(s)) }
