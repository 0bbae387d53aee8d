package weir

import (
	"reflect"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/jobmaster"
)

// sameFields checks that the root type out has exactly the fields of the
// job master's in, by name, with equal values (the statistics types are
// converted field by field at the API's boundary: a field added on one
// side only fails here).
func sameFields(t *testing.T, in, out any) {
	t.Helper()
	vi, vo := reflect.ValueOf(in), reflect.ValueOf(out)
	if vi.NumField() != vo.NumField() {
		t.Fatalf("%T has %d fields, %T %d", in, vi.NumField(), out, vo.NumField())
	}
	for i := range vi.NumField() {
		name := vi.Type().Field(i).Name
		fo := vo.FieldByName(name)
		if !fo.IsValid() {
			t.Fatalf("%T.%s has no counterpart in %T", in, name, out)
		}
		fi := vi.Field(i)
		if fi.Kind() == reflect.Slice {
			if fi.Len() != fo.Len() {
				t.Fatalf("%s: %d elements, want %d", name, fo.Len(), fi.Len())
			}
			for k := range fi.Len() {
				sameFields(t, fi.Index(k).Interface(), fo.Index(k).Interface())
			}
			continue
		}
		if fmtOf(fi) != fmtOf(fo) {
			t.Fatalf("%s: %v, want %v", name, fo.Interface(), fi.Interface())
		}
	}
}

func fmtOf(v reflect.Value) any {
	if v.Kind() == reflect.String {
		return v.String() // Status is a string type on both sides
	}
	return v.Interface()
}

func TestCheckpointStatsConversion(t *testing.T) {
	t0 := time.Unix(1000, 0)
	in := jobmaster.CheckpointStats{ID: 7, Savepoint: true, Status: jobmaster.Failed, TriggerTime: t0, EndTime: t0.Add(time.Second),
		Duration: time.Second, StateSize: 10, CheckpointedSize: 4, FailureReason: "declined", Path: "/chk-7", NumTasks: 2,
		Subtasks: []jobmaster.SubtaskStats{{Task: "map (1/2)", AckTime: t0, Sync: 1, Async: 2, Alignment: 3, StartDelay: 4,
			StateSize: 5, CheckpointedSize: 6, Unaligned: true}}}
	sameFields(t, in, checkpointStatsOf(in))
	sum := jobmaster.Summary{Completed: 1, Failed: 2, InProgress: 3, Restored: 4, RestoreTime: t0, RestorePath: "/sp", Restarts: 5, LatestCompleted: 6}
	sameFields(t, sum, checkpointSummaryOf(sum))
	for _, s := range []struct {
		jm   jobmaster.Status
		root CheckpointStatus
	}{{jobmaster.InProgress, CheckpointInProgress}, {jobmaster.Completed, CheckpointCompleted}, {jobmaster.Failed, CheckpointFailed}} {
		if got := checkpointStatsOf(jobmaster.CheckpointStats{Status: s.jm}).Status; got != s.root {
			t.Errorf("status %s converts to %s, want %s", s.jm, got, s.root)
		}
	}
}
