package cluster

import (
	"testing"

	"github.com/weirstream/weir/internal/rest"
)

// TestSubtaskStatus: a subtask's status in REST, from the job's and what
// the subtask reported in the current attempt.
func TestSubtaskStatus(t *testing.T) {
	for _, tc := range []struct {
		job, reported, want rest.TaskStatus
	}{
		{rest.TaskRunning, "", rest.TaskDeploying},
		{rest.TaskRunning, rest.TaskRunning, rest.TaskRunning},
		{rest.TaskRunning, rest.TaskFailed, rest.TaskFailed},
		{rest.TaskScheduled, rest.TaskFailed, rest.TaskFailed}, // restarting: the one that failed
		{rest.TaskScheduled, rest.TaskRunning, rest.TaskScheduled},
		{rest.TaskFailed, rest.TaskFailed, rest.TaskFailed},
		{rest.TaskFailed, rest.TaskRunning, rest.TaskFailed},
		{rest.TaskFinished, rest.TaskRunning, rest.TaskFinished},
		{rest.TaskCanceled, rest.TaskFailed, rest.TaskCanceled},
		{rest.TaskCreated, "", rest.TaskCreated},
	} {
		if got := subtaskStatus(tc.job, tc.reported); got != tc.want {
			t.Errorf("subtaskStatus(job %s, reported %q) = %s, want %s", tc.job, tc.reported, got, tc.want)
		}
	}
}
