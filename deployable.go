package weir

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/deploy"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/jobmaster"
	"github.com/weirstream/weir/internal/network"
	"github.com/weirstream/weir/internal/restart"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/storage"
)

// Deployable returns the job as a deploy.Job: a job that builds any part of
// itself, for a cluster (internal/deploy, internal/cluster). It makes the
// same checks as ExecuteAsync. Plan is the compiled graph with its
// fingerprint; Master the options of the job's JobMaster (to run in the
// JobManager); Build the tasks that a placement puts on one worker, their
// edges to other workers over the worker's network.Node. Every process of
// a cluster calls Deployable on its own build of the same program.
//
// Build must not be called for two workers of one Deployable at the same
// time (a gateway deploys workers one after the other); each process
// builds its own.
func (e *Environment) Deployable(jobName string) (deploy.Job, error) {
	opts, jg, err := e.prepareJob(jobName)
	if err != nil {
		return nil, err
	}
	d := &deployable{e: e, opts: opts, name: jobName, jg: jg, stores: runtime.NewStoreCache(),
		logger: opts.Logger.With("job", opts.JobID), fam: new(deployFamily)}
	d.plan = d.makePlan()
	return d, nil
}

// Rescaled implements deploy.Job: the program compiled again with n as
// its default parallelism and the parallelism an operator sets itself
// capped at n (reactive mode). It shares the receiver's lock, restart veto
// and store cache; compiling resolves the edges' partitioners on the
// Environment, so only the latest build of a program may Build.
func (d *deployable) Rescaled(n int) (deploy.Job, error) {
	if n < 1 || n > d.opts.MaxParallelism {
		return nil, fmt.Errorf("weir: job %q: parallelism %d is not in 1..%d (Options.MaxParallelism)", d.name, n, d.opts.MaxParallelism)
	}
	opts := d.opts
	opts.Parallelism, opts.capParallelism = n, true
	d.fam.mu.Lock()
	defer d.fam.mu.Unlock()
	jg, err := compile(d.e, opts, d.name)
	if err != nil {
		return nil, err
	}
	r := &deployable{e: d.e, opts: opts, name: d.name, jg: jg, stores: d.stores, logger: d.logger, fam: d.fam}
	r.plan = r.makePlan()
	return r, nil
}

// prepareJob makes the checks of ExecuteAsync and compiles the graph.
func (e *Environment) prepareJob(jobName string) (Options, *graph.JobGraph, error) {
	if err := errors.Join(e.errs...); err != nil {
		return Options{}, nil, fmt.Errorf("job %q is not valid: %w", jobName, err)
	}
	opts := e.opts
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return Options{}, nil, err
	}
	if opts.JobID == "" {
		opts.JobID = jobName
	}
	jg, err := compile(e, opts, jobName)
	if err != nil {
		return Options{}, nil, err
	}
	return opts, jg, nil
}

// masterOptions are the options of the job's JobMaster (both modes): the
// storage, checkpointing, restart strategy behind a veto, RetainOnCancel
// with committing sinks and the OnRestore hook.
func (e *Environment) masterOptions(opts Options) (jobmaster.Options, *restart.Vetoable, error) {
	jmOpts, err := jobMasterOptions(opts)
	if err != nil {
		return jobmaster.Options{}, nil, err
	}
	if !opts.Checkpointing.RetainOnCancel && !opts.Checkpointing.DiscardOnCancel && e.committingSinks() > 0 {
		// The sinks' committed output is visible: a cancel must not delete
		// what the next run needs to go on after it.
		jmOpts.RetainOnCancel = true
	}
	if opts.OnRestore != nil {
		jmOpts.OnRestore = func(r *jobmaster.Restored, restart bool) {
			if r == nil {
				opts.OnRestore(RestoreInfo{})
				return
			}
			opts.OnRestore(RestoreInfo{ID: r.Metadata.ID, Savepoint: r.Metadata.Kind == checkpoint.KindSavepoint, URL: r.URL(), Restart: restart})
		}
	}
	veto := &restart.Vetoable{Strategy: jmOpts.Restart}
	jmOpts.Restart = veto
	return jmOpts, veto, nil
}

type deployable struct {
	e      *Environment
	opts   Options
	name   string
	jg     *graph.JobGraph
	plan   deploy.Plan
	stores *runtime.StoreCache
	logger *slog.Logger

	fam *deployFamily // shared with the builds at other parallelisms (Rescaled)
}

// deployFamily is what the builds of one program at several parallelisms
// share.
type deployFamily struct {
	mu   sync.Mutex // one Build, Prepare or Rescaled at a time: they reset the nodes
	veto *restart.Vetoable
}

func (d *deployable) Plan() deploy.Plan { return d.plan }

// makePlan is the plan of the compiled graph, with Prepare.
func (d *deployable) makePlan() deploy.Plan {
	p := deploy.Plan{Job: d.name, MaxParallelism: d.opts.MaxParallelism, Fingerprint: d.fingerprint(), Prepare: d.prepare}
	for _, v := range d.jg.Vertices {
		p.Vertices = append(p.Vertices, deploy.Vertex{ID: int(v.ID), Name: v.Name, Parallelism: v.Parallelism,
			MaxParallelism: d.vertexMaxParallelism(v), Source: d.jg.Stream.Nodes[v.Head].Kind == graph.Source})
	}
	return p
}

// vertexMaxParallelism is the most subtasks v may get rescaled: the least
// parallelism one of its operators sets itself, else the max parallelism.
func (d *deployable) vertexMaxParallelism(v graph.Vertex) int {
	n := d.opts.MaxParallelism
	for _, id := range v.Nodes {
		if p := d.e.nodes[id].base().parallelism; p > 0 {
			n = min(n, p)
		}
	}
	return n
}

// fingerprint hashes what two processes must agree on to exchange records
// and state: every operator's uid, name, kind and keyedness, every edge's
// ends, partitioner, record type and codec, whether it is chained, each
// vertex's nodes and parallelism, and the max parallelism.
func (d *deployable) fingerprint() string {
	var b strings.Builder
	fmt.Fprintf(&b, "weir-graph v1\nmaxpar %d\n", d.opts.MaxParallelism)
	for _, n := range d.jg.Stream.Nodes {
		fmt.Fprintf(&b, "node %d uid=%q name=%q kind=%v keyed=%v inputs=%d par=%d\n", n.ID, n.UID, n.Name, n.Kind, n.Keyed, n.Inputs, n.Parallelism)
	}
	for _, ed := range d.e.edges {
		c := ed.common()
		rec, cd := ed.types()
		fmt.Fprintf(&b, "edge %d %d->%d port=%q input=%d part=%v chained=%v type=%s codec=%s\n",
			c.id, c.from.id, c.to.id, c.port, c.input, c.part, d.jg.Chained[c.id], rec, cd)
	}
	for _, v := range d.jg.Vertices {
		fmt.Fprintf(&b, "vertex %d nodes=%v par=%d\n", v.ID, v.Nodes, v.Parallelism)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:16])
}

// Master implements deploy.Job: the options of the job's JobMaster, with
// the storage probed now.
func (d *deployable) Master() (jobmaster.Options, error) {
	jmOpts, veto, err := d.e.masterOptions(d.opts)
	if err != nil {
		return jobmaster.Options{}, err
	}
	if d.opts.Checkpointing.store == nil {
		pctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := storage.Probe(pctx, jmOpts.Storage)
		cancel()
		if err != nil {
			return jobmaster.Options{}, fmt.Errorf("weir: Options.Checkpointing.Storage: %w", err)
		}
	}
	logger := d.logger
	jmOpts.OnFailure = func(err error, restarting bool) {
		logger.Warn("the job failed", "err", err, "restarting", restarting)
	}
	d.fam.mu.Lock()
	d.fam.veto = veto
	d.fam.mu.Unlock()
	return jmOpts, nil
}

// prepare is the plan's Prepare: the restore's coverage check and the
// sinks' commit and clean-up, once per attempt before any worker deploys.
func (d *deployable) prepare(ctx context.Context, restore *jobmaster.Restored) error {
	if restore == nil {
		return nil
	}
	d.fam.mu.Lock()
	defer d.fam.mu.Unlock()
	restore, err := d.openRestore(restore)
	if err != nil {
		return err
	}
	bc := &buildCtx{ctx: ctx, opts: d.opts, jg: d.jg, logger: d.logger, restore: restore}
	if err := bc.checkRestoreCoverage(d.e); err != nil {
		d.vetoRestart()
		return err
	}
	if err := bc.prepareNodes(d.e); err != nil {
		var rr *repeatRefusal
		if errors.As(err, &rr) {
			d.vetoRestart()
		}
		return err
	}
	return nil
}

// vetoRestart vetoes the restart of a failure no restart can cure, when
// this process runs the job's JobMaster (Master was called). d.fam.mu is
// held.
func (d *deployable) vetoRestart() {
	if d.fam.veto != nil {
		d.fam.veto.Veto()
	}
}

// openRestore returns restore with its store open: a restore handed over
// from another process names it by URL only.
func (d *deployable) openRestore(restore *jobmaster.Restored) (*jobmaster.Restored, error) {
	if restore == nil || restore.Store != nil {
		return restore, nil
	}
	if restore.StoreURL == "" {
		return nil, fmt.Errorf("weir: the checkpoint to restore (%s) names no store", restore.Dir)
	}
	st, err := d.stores.Open(restore.StoreURL)
	if err != nil {
		return nil, fmt.Errorf("weir: open the storage of the checkpoint to restore: %w", err)
	}
	r := *restore
	r.Store = st
	return &r, nil
}

// checkPlacement refuses what cannot run on the workers of p.
func (d *deployable) checkPlacement(self string, p deploy.Placement) error {
	if _, ok := p.Workers[self]; !ok {
		return fmt.Errorf("weir: job %q: the placement does not list worker %q", d.name, self)
	}
	if err := p.Check(d.plan); err != nil {
		return err
	}
	if len(p.Workers) < 2 {
		return nil
	}
	url := d.opts.Checkpointing.Storage
	if st := d.opts.Checkpointing.store; st != nil {
		url = st.URL()
	}
	if strings.HasPrefix(strings.TrimSpace(url), "memory:") {
		return fmt.Errorf("weir: job %q: checkpoint storage %q is the memory of one process, but the job runs on %d workers: a cluster needs storage that every process reaches (a shared file system path or s3://)", d.name, url, len(p.Workers))
	}
	return nil
}

// Build implements deploy.Job.
func (d *deployable) Build(self string, p deploy.Placement, node *network.Node) jobmaster.BuildFunc {
	return func(ctx context.Context, attempt int, restore *jobmaster.Restored, resp runtime.Responder) (*jobmaster.Deployment, error) {
		d.fam.mu.Lock()
		defer d.fam.mu.Unlock()
		if err := d.checkPlacement(self, p); err != nil {
			return nil, err
		}
		restore, err := d.openRestore(restore)
		if err != nil {
			return nil, err
		}
		opts := d.opts
		var local *localDir
		if opts.StateBackend == "pebble" {
			// The worker's own directory for this attempt, removed once its
			// tasks ended: state comes back from checkpoints.
			dir := filepath.Join(opts.LocalStateDir, unsafeName.ReplaceAllString(opts.JobID, "_"), unsafeName.ReplaceAllString(self, "_"))
			if local, err = newLocalDir(dir, opts.Logger); err != nil {
				return nil, err
			}
			opts.localJobDir = local.path
		}
		logger := d.logger.With("worker", self)
		x := runtime.NewExchange(node, d.stores, logger)
		tasks, stop, err := d.e.build(ctx, buildSpec{opts: opts, jg: d.jg, logger: logger, veto: d.fam.veto,
			self: self, place: &p, remote: x}, attempt, restore, resp)
		if err != nil {
			x.Close()
			local.release(opts.Logger)
			return nil, err
		}
		x.Start()
		if local != nil {
			go func() {
				for _, t := range tasks {
					<-t.Done()
				}
				local.release(opts.Logger)
			}()
		}
		return &jobmaster.Deployment{Tasks: tasks, Stop: stop}, nil
	}
}

// buildSpec is what a deployment of the job needs besides the attempt.
type buildSpec struct {
	opts   Options
	jg     *graph.JobGraph
	logger *slog.Logger
	// veto, when set, vetoes the restart of a failure no restart cures.
	veto *restart.Vetoable
	// self and place: the worker and the attempt's placement; place is nil
	// in local mode (every subtask here).
	self  string
	place *deploy.Placement
	// remote carries the edges to and from other workers (place != nil).
	remote *runtime.Exchange
}

// build deploys the subtasks of one attempt that spec puts here: local
// mode's deploy function and a worker's alike.
func (e *Environment) build(ctx context.Context, spec buildSpec, attempt int, restore *jobmaster.Restored, resp runtime.Responder) ([]*runtime.Task, chan struct{}, error) {
	opts := spec.opts
	bc := &buildCtx{ctx: ctx, opts: opts, jg: spec.jg, stop: make(chan struct{}), logger: spec.logger,
		restore: restore, responder: resp, attempt: attempt, self: spec.self, place: spec.place, remote: spec.remote}
	if err := bc.checkRestoreCoverage(e); err != nil {
		if spec.veto != nil {
			spec.veto.Veto() // no restart can cure it (restart.Vetoable)
		}
		return nil, nil, err
	}
	if opts.Exchange == "tcp" {
		// Small buffers: in-flight data under backpressure stays close to
		// what the in-process queues hold (QueueSize batches), so that
		// barriers are not held up behind megabytes (weir has no buffer
		// debloating yet).
		x, err := runtime.NewNetExchange(network.Options{Logger: spec.logger, BufferSize: 4 << 10, FloatingBuffers: 2, SenderBuffers: 2})
		if err != nil {
			return nil, nil, fmt.Errorf("weir: Options.Exchange tcp: %w", err)
		}
		bc.net = x
	}
	tasks, err := bc.deploy(e)
	if err != nil {
		if bc.net != nil {
			bc.net.Close()
		}
		var rr *repeatRefusal
		if errors.As(err, &rr) && spec.veto != nil {
			spec.veto.Veto()
		}
		return nil, nil, err
	}
	if bc.net != nil {
		bc.net.Start() // it closes itself when the attempt's channels end
	}
	return tasks, bc.stop, nil
}
