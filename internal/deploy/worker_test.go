package deploy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/runtime"
)

// idleSource never has a record: its task runs until it is cancelled.
type idleSource struct{}

func (idleSource) Open() error                     { return nil }
func (idleSource) Poll() (connector.Status, error) { return connector.NothingAvailable, nil }
func (idleSource) Available() <-chan struct{}      { return nil }
func (idleSource) Close() error                    { return nil }

// idleJob builds, on each worker, one idle source task per subtask the
// placement puts there.
type idleJob struct {
	plan  Plan
	built chan string
}

func (j idleJob) Plan() Plan { return j.plan }

// Rescaled gives the vertices min(n, their MaxParallelism) subtasks.
func (j idleJob) Rescaled(n int) (Job, error) {
	if n < 1 || n > j.plan.MaxParallelism {
		return nil, fmt.Errorf("parallelism %d is not in 1..%d", n, j.plan.MaxParallelism)
	}
	r := j
	r.plan.Vertices = slices.Clone(j.plan.Vertices)
	for i, v := range r.plan.Vertices {
		r.plan.Vertices[i].Parallelism = min(n, cmp.Or(v.MaxParallelism, j.plan.MaxParallelism))
	}
	r.plan.Fingerprint = fmt.Sprintf("%s@%d", j.plan.Fingerprint, n)
	return r, nil
}
func (j idleJob) Master() (jobmaster.Options, error) { return jobmaster.Options{}, nil }
func (j idleJob) Build(self string, p Placement, node *network.Node) jobmaster.BuildFunc {
	return func(ctx context.Context, attempt int, restore *jobmaster.Restored, resp runtime.Responder) (*jobmaster.Deployment, error) {
		var tasks []*runtime.Task
		for s, w := range p.Subtasks[0] {
			if w == self {
				tasks = append(tasks, runtime.NewTask(runtime.TaskConfig{ID: "0-" + string(rune('0'+s)), Name: "idle", Subtask: s, Parallelism: len(p.Subtasks[0]), Source: idleSource{}}))
			}
		}
		j.built <- self
		return &jobmaster.Deployment{Tasks: tasks, Stop: make(chan struct{})}, nil
	}
}

// TestLocalWorkers: two local workers behind a gateway run their parts of
// an attempt, and a cancel ends both as one cancellation. A worker whose
// build has another fingerprint refuses the plan, naming both.
func TestLocalWorkers(t *testing.T) {
	plan := Plan{Job: "idle", Vertices: []Vertex{{ID: 0, Name: "idle", Parallelism: 3, Source: true}}, Fingerprint: "aaa"}
	p, err := Spread(plan, []Slots{{Worker: "w1", DataAddress: "127.0.0.1:1", Free: 2}, {Worker: "w2", DataAddress: "127.0.0.1:2", Free: 2}})
	if err != nil {
		t.Fatal(err)
	}
	job := idleJob{plan: plan, built: make(chan string, 4)}
	w1, w2 := NewLocalWorker("w1", job, nil, nil), NewLocalWorker("w2", job, nil, nil)
	g := NewGateway(plan, staticScheduler{p: p, workers: []Worker{w2, w1}}, nil)
	l := &endListener{jm: &jm{}, ended: make(chan jobmaster.AttemptEnded, 1)}
	infos, err := g.Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 1}, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 3 || <-job.built != "w1" || <-job.built != "w2" {
		t.Fatalf("tasks %+v", infos)
	}
	g.Cancel(jobmaster.CancelRequest{Attempt: 1, Reason: "cancelled", Err: context.Canceled})
	select {
	case e := <-l.ended:
		if !e.Cancellation {
			t.Fatalf("ended %+v, want a cancellation", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt did not end")
	}

	other := idleJob{plan: plan, built: job.built}
	other.plan.Fingerprint = "bbb"
	_, err = NewLocalWorker("w1", other, nil, nil).Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 2}, plan, p, &jm{})
	if err == nil || !strings.Contains(err.Error(), "fingerprint bbb, the plan deployed aaa") {
		t.Fatalf("Deploy with another fingerprint = %v", err)
	}
	_, err = NewLocalWorker("w9", job, nil, nil).Deploy(context.Background(), jobmaster.DeployRequest{Attempt: 2}, plan, p, &jm{})
	if err == nil || !strings.Contains(err.Error(), "does not list this worker") {
		t.Fatalf("Deploy on a worker the placement does not list = %v", err)
	}
}

type endListener struct {
	*jm
	ended chan jobmaster.AttemptEnded
}

func (l *endListener) Report(r jobmaster.Report) {
	l.jm.Report(r)
	if e, ok := r.(jobmaster.AttemptEnded); ok {
		l.ended <- e
	}
}
