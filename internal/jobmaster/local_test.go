package jobmaster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/runtime"
)

// idleSource never has a record: its task runs until it is cancelled.
type idleSource struct{}

func (idleSource) Open() error                     { return nil }
func (idleSource) Poll() (connector.Status, error) { return connector.NothingAvailable, nil }
func (idleSource) Available() <-chan struct{}      { return nil }
func (idleSource) Close() error                    { return nil }

type recorder struct {
	mu      sync.Mutex
	reports []Report
	ended   chan AttemptEnded
}

func (r *recorder) Report(rep Report) {
	r.mu.Lock()
	r.reports = append(r.reports, rep)
	r.mu.Unlock()
	if e, ok := rep.(AttemptEnded); ok {
		r.ended <- e
	}
}

// TestLocalGatewayFencing: the local gateway runs an attempt's tasks,
// reports them running with the attempt's number, ignores a cancel meant for
// another attempt, and ends the attempt on its own cancel, reporting the
// cause as a cancellation.
func TestLocalGatewayFencing(t *testing.T) {
	var built []int
	g := NewLocalGateway(func(ctx context.Context, attempt int, restore *Restored, resp runtime.Responder) (*Deployment, error) {
		built = append(built, attempt)
		task := runtime.NewTask(runtime.TaskConfig{ID: "idle-0", Name: "idle", Parallelism: 1, Source: idleSource{}})
		return &Deployment{Tasks: []*runtime.Task{task}, Stop: make(chan struct{})}, nil
	}, nil)
	rec := &recorder{ended: make(chan AttemptEnded, 4)}
	tasks, err := g.Deploy(context.Background(), DeployRequest{Attempt: 3}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0] != (TaskInfo{ID: "idle-0", Source: true}) || len(built) != 1 || built[0] != 3 {
		t.Fatalf("tasks = %+v, built = %v", tasks, built)
	}
	g.Cancel(CancelRequest{Attempt: 2, Reason: "stale", Err: errors.New("stale")})
	select {
	case e := <-rec.ended:
		t.Fatalf("a cancel for attempt 2 ended attempt 3: %+v", e)
	case <-time.After(100 * time.Millisecond):
	}
	cause := errors.New("tolerable failures exceeded")
	g.Cancel(CancelRequest{Attempt: 3, Reason: cause.Error(), Err: cause})
	select {
	case e := <-rec.ended:
		if e.Attempt != 3 || !errors.Is(e.Err, cause) || e.Error != cause.Error() {
			t.Fatalf("ended = %+v, want attempt 3 with the cause", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt did not end after its cancel")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if r, ok := rec.reports[0].(TaskRunning); !ok || r.Attempt != 3 || r.Task != "idle-0" {
		t.Fatalf("first report = %+v, want idle-0 running in attempt 3", rec.reports[0])
	}
}
