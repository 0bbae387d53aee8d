package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestMatchTail(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"_metadata", "job/chk-1/_metadata", true},
		{"_metadata", "/tmp/x/job/chk-1/_metadata", true},
		{"_metadata", "job/chk-1/._metadata.tmp-00ff", false},
		{"*_metadata*", "/tmp/x/job/chk-1/._metadata.tmp-00ff", true},
		{"chk-*/_metadata", "job/chk-12/_metadata", true},
		{"chk-*/_metadata", "job/shared/_metadata", false},
		{"job/*/_metadata", "job/chk-1/_metadata", true},
		{"job/*/_metadata", "_metadata", false},
		{"/job/*/_metadata", "job/chk-1/_metadata", true},
		{"/chk-*/_metadata", "job/chk-1/_metadata", false},
		{"*", "anything/at/all", true},
	}
	for _, tt := range tests {
		if got := matchTail(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchTail(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestFaultsAddRejects(t *testing.T) {
	tests := []struct {
		name    string
		rule    Rule
		wantErr string
	}{
		{"bad pattern", Rule{Path: "[", Nth: 1}, "Path"},
		{"negative nth", Rule{Nth: -1}, "Nth is -1"},
		{"probability above one", Rule{Probability: 1.5}, "Probability is 1.5"},
		{"negative probability", Rule{Probability: -0.1}, "Probability is -0.1"},
		{"does nothing", Rule{Ops: OpWrite}, "does nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewFaults(1).Add(tt.rule)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Add(%+v) = %v, want an error containing %q", tt.rule, err, tt.wantErr)
			}
		})
	}
}

func TestOpString(t *testing.T) {
	tests := []struct {
		op   Op
		want string
	}{
		{OpWrite, "write"},
		{OpSync | OpRename, "sync|rename"},
		{OpAll, "all"},
		{0, "none"},
	}
	for _, tt := range tests {
		if got := tt.op.String(); got != tt.want {
			t.Errorf("Op(%#x).String() = %q, want %q", uint32(tt.op), got, tt.want)
		}
	}
}

func mustAdd(t *testing.T, f *Faults, r Rule) {
	t.Helper()
	if err := f.Add(r); err != nil {
		t.Fatal(err)
	}
}

func tryPut(s Store, name, content string) error {
	w, err := s.Create(context.Background(), name)
	if err != nil {
		return err
	}
	defer w.Abort()
	if _, err := io.WriteString(w, content); err != nil {
		return err
	}
	return w.Commit()
}

func TestFaultNth(t *testing.T) {
	faults := NewFaults(1)
	mustAdd(t, faults, Rule{Ops: OpCommit, Path: "_metadata", Nth: 2})
	s := WithFaults(NewMemoryStore(), faults)
	for i, want := range []bool{true, false, true, true} { // only the 2nd commit of a _metadata fails
		name := fmt.Sprintf("job/chk-%d/_metadata", i+1)
		if err := tryPut(s, "job/chk-1/state", "s"); err != nil {
			t.Fatalf("commit of a state file: %v", err)
		}
		err := tryPut(s, name, "m")
		if ok := err == nil; ok != want {
			t.Fatalf("commit %d of a _metadata: err = %v, want success %v", i+1, err, want)
		}
		if !want {
			var fe *FaultError
			if !errors.Is(err, ErrInjected) || !errors.As(err, &fe) || fe.Op != OpCommit || fe.Name != name {
				t.Fatalf("injected error = %v (%+v), want a *FaultError for commit of %s wrapping ErrInjected", err, fe, name)
			}
			mustBeMissing(t, s, name)
		}
	}
	if got := faults.Injected(); got != 1 {
		t.Fatalf("Injected() = %d, want 1", got)
	}
}

func TestFaultProbabilityIsSeeded(t *testing.T) {
	run := func(seed uint64) []bool {
		faults := NewFaults(seed)
		mustAdd(t, faults, Rule{Ops: OpWrite, Probability: 0.5})
		s := WithFaults(NewMemoryStore(), faults)
		var failed []bool
		for i := range 64 {
			failed = append(failed, tryPut(s, fmt.Sprintf("o%d", i), "x") != nil)
		}
		return failed
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave different faults")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds gave the same 64 faults")
	}
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	if n < 16 || n > 48 {
		t.Fatalf("%d of 64 writes failed with probability 0.5", n)
	}
}

func TestFaultCustomErrorAndAfter(t *testing.T) {
	errDisk := errors.New("disk on fire")
	faults := NewFaults(1)
	mustAdd(t, faults, Rule{Ops: OpCommit, Path: "landed", Nth: 1, Err: errDisk, After: true})
	mustAdd(t, faults, Rule{Ops: OpCommit, Path: "lost", Nth: 1, Err: errDisk})
	s := WithFaults(NewMemoryStore(), faults)

	err := tryPut(s, "landed", "x")
	if !errors.Is(err, errDisk) || !errors.Is(err, ErrInjected) {
		t.Fatalf("commit = %v, want it to wrap the rule's error and ErrInjected", err)
	}
	mustGet(t, s, "landed", "x") // After: the commit happened, then failed

	if err := tryPut(s, "lost", "x"); !errors.Is(err, errDisk) {
		t.Fatalf("commit = %v, want the rule's error", err)
	}
	mustBeMissing(t, s, "lost")
}

func TestFaultDelayAndClear(t *testing.T) {
	var mu sync.Mutex
	var delayed []string
	faults := NewFaults(1)
	mustAdd(t, faults, Rule{Ops: OpWrite | OpCommit, Path: "slow/*", Delay: func(op Op, name string) {
		mu.Lock()
		defer mu.Unlock()
		delayed = append(delayed, op.String()+" "+name)
	}})
	mustAdd(t, faults, Rule{Ops: OpOpen, Probability: 1})
	s := WithFaults(NewMemoryStore(), faults)
	if err := tryPut(s, "slow/a", "x"); err != nil {
		t.Fatal(err)
	}
	if err := tryPut(s, "fast", "x"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"write slow/a", "commit slow/a"}; !slices.Equal(delayed, want) {
		t.Fatalf("delayed = %q, want %q", delayed, want)
	}
	if _, err := s.Open(context.Background(), "fast"); !errors.Is(err, ErrInjected) {
		t.Fatalf("Open = %v, want an injected error", err)
	}
	faults.Clear()
	mustGet(t, s, "fast", "x")
}

// TestFaultFSOps checks that the FS wrapper reports each kind of operation
// of a file store commit, with the names a rule sees.
func TestFaultFSOps(t *testing.T) {
	var seen []string
	faults := NewFaults(1)
	mustAdd(t, faults, Rule{Delay: func(op Op, name string) {
		base := name[strings.LastIndex(name, "/")+1:]
		if strings.HasPrefix(base, ".") {
			base = ".tmp"
		}
		seen = append(seen, op.String()+" "+base)
	}})
	root := t.TempDir()
	s, err := NewFileStore(root, NewFaultFS(OSFS, faults))
	if err != nil {
		t.Fatal(err)
	}
	if err := tryPut(s, "chk-1/_metadata", "m"); err != nil {
		t.Fatal(err)
	}
	rootBase := filepath.Base(root)
	want := []string{
		"stat chk-1", "stat " + rootBase, "mkdir chk-1", "syncdir " + rootBase, // a durable new directory
		"create .tmp", "write .tmp", "sync .tmp", "close .tmp", "rename _metadata", "syncdir chk-1",
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("operations:\n got %q\nwant %q", seen, want)
	}
}
