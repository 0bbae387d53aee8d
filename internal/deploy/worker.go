package deploy

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/metrics"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/runtime"
)

// NewLocalWorker returns the worker id that runs, in this process, the
// part of each attempt of job that the attempt's placement puts on it:
// a jobmaster.LocalGateway over job.Build(id, placement, node). node is
// the worker's data plane, listening on the address the placement gives
// for id; the worker does not close it. A plan whose fingerprint is not
// job's own is refused. Requests without an open store (TriggerRequest
// from another process) open StoreURL, once per URL. logger may be nil.
func NewLocalWorker(id string, job Job, node *network.Node, logger *slog.Logger) Worker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &localWorker{id: id, job: job, node: node, log: logger.With("worker", id), stores: runtime.NewStoreCache()}
	w.gw = jobmaster.NewLocalGateway(w.build, w.log)
	return w
}

type localWorker struct {
	id     string
	job    Job
	node   *network.Node
	log    *slog.Logger
	gw     *jobmaster.LocalGateway
	stores *runtime.StoreCache

	mu        sync.Mutex
	placement Placement // of the attempt being deployed
}

var _ MetricsWorker = (*localWorker)(nil)

func (w *localWorker) ID() string { return w.id }

func (w *localWorker) build(ctx context.Context, attempt int, restore *jobmaster.Restored, resp runtime.Responder) (*jobmaster.Deployment, error) {
	w.mu.Lock()
	p := w.placement
	w.mu.Unlock()
	return w.job.Build(w.id, p, w.node)(ctx, attempt, restore, resp)
}

// Deploy implements Worker.
func (w *localWorker) Deploy(ctx context.Context, req jobmaster.DeployRequest, plan Plan, p Placement, l jobmaster.Listener) ([]jobmaster.TaskInfo, error) {
	if err := w.job.Plan().Matches(plan); err != nil {
		return nil, fmt.Errorf("worker %s: %w", w.id, err)
	}
	if _, ok := p.Workers[w.id]; !ok {
		return nil, fmt.Errorf("worker %s: the placement of attempt %d does not list this worker", w.id, req.Attempt)
	}
	w.mu.Lock()
	w.placement = p
	w.mu.Unlock()
	return w.gw.Deploy(ctx, req, l)
}

// TriggerCheckpoint implements Worker.
func (w *localWorker) TriggerCheckpoint(req jobmaster.TriggerRequest) {
	if req.Store == nil && req.StoreURL != "" {
		st, err := w.stores.Open(req.StoreURL)
		if err != nil {
			// The sources never see the barrier: the checkpoint times out
			// or is declined by the JobMaster.
			w.log.Error("cannot open the checkpoint storage of a trigger", "checkpoint", req.Checkpoint, "url", req.StoreURL, "err", err)
			return
		}
		req.Store = st
	}
	w.gw.TriggerCheckpoint(req)
}

// TaskMetrics implements MetricsWorker.
func (w *localWorker) TaskMetrics(attempt int) []*metrics.Task { return w.gw.TaskMetrics(attempt) }

func (w *localWorker) NotifyComplete(n jobmaster.Notification) { w.gw.NotifyComplete(n) }
func (w *localWorker) NotifyAborted(n jobmaster.Notification)  { w.gw.NotifyAborted(n) }
func (w *localWorker) FinishSources(attempt int)               { w.gw.FinishSources(attempt) }
func (w *localWorker) StopTasks(attempt int)                   { w.gw.StopTasks(attempt) }
func (w *localWorker) Cancel(req jobmaster.CancelRequest)      { w.gw.Cancel(req) }
