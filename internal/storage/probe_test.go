package storage

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	ctx := context.Background()
	fileStore, err := Open(filepath.Join(t.TempDir(), "not-created-yet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []Store{NewMemoryStore(), fileStore} {
		if err := Probe(ctx, st); err != nil {
			t.Errorf("Probe(%s) = %v, want nil", st.URL(), err)
		}
		names, err := st.List(ctx, "")
		if err != nil || len(names) != 0 {
			t.Errorf("Probe(%s) left objects %v (err %v): it must not write", st.URL(), names, err)
		}
	}
	faults := NewFaults(1)
	if err := faults.Add(Rule{Ops: OpList, Probability: 1}); err != nil {
		t.Fatal(err)
	}
	err = Probe(ctx, WithFaults(NewMemoryStore(), faults))
	if err == nil || !strings.Contains(err.Error(), "is not usable") {
		t.Fatalf("Probe of a store whose List fails = %v, want an error saying it is not usable", err)
	}
	if !errors.Is(err, ErrInjected) {
		t.Errorf("Probe's error %v does not wrap the store's", err)
	}
}
