package deploy

import (
	"strings"
	"testing"
)

func TestPlacementCheck(t *testing.T) {
	plan := Plan{Job: "j", Vertices: []Vertex{{ID: 0, Name: "src", Parallelism: 2, Source: true}, {ID: 1, Name: "sink", Parallelism: 1}}}
	workers := map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}
	for _, tc := range []struct {
		name string
		p    Placement
		want string
	}{
		{"ok", Placement{Workers: workers, Subtasks: [][]string{{"a", "b"}, {"b"}}}, ""},
		{"vertices", Placement{Workers: workers, Subtasks: [][]string{{"a", "b"}}}, "1 vertices"},
		{"subtasks", Placement{Workers: workers, Subtasks: [][]string{{"a"}, {"b"}}}, "1 subtasks of vertex 0 (src)"},
		{"unknown worker", Placement{Workers: workers, Subtasks: [][]string{{"a", "c"}, {"b"}}}, `worker "c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check(plan)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	p := Placement{Workers: workers, Subtasks: [][]string{{"a", "b"}, {"b"}}}
	if p.Worker(0, 1) != "b" || p.Worker(2, 0) != "" || p.Worker(0, 5) != "" {
		t.Fatal("Worker looks up the wrong subtask")
	}
}
