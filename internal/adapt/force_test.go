package adapt

import (
	"strings"
	"testing"
)

func TestForceFilterLoop(t *testing.T) {
	t.Cleanup(func() { ForceFilterLoop("") })
	steps := []struct {
		set     string
		wantErr bool
		want    string
	}{
		{"", false, LoopAdaptive},
		{LoopBranching, false, LoopBranching},
		{"sometimes", true, LoopBranching}, // an error changes nothing
		{LoopBranchFree, false, LoopBranchFree},
		{LoopAdaptive, false, LoopAdaptive},
		{LoopBranchFree, false, LoopBranchFree},
		{"", false, LoopAdaptive},
	}
	for _, s := range steps {
		err := ForceFilterLoop(s.set)
		if (err != nil) != s.wantErr {
			t.Fatalf("ForceFilterLoop(%q) = %v, want error %v", s.set, err, s.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), `"sometimes"`) {
			t.Fatalf("error %q does not name the bad value", err)
		}
		if got := ForcedFilterLoop(); got != s.want {
			t.Fatalf("after ForceFilterLoop(%q): ForcedFilterLoop = %q, want %q", s.set, got, s.want)
		}
	}
}
