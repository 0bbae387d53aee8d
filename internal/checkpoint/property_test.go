package checkpoint

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestCoordinatorProperties drives coordinators with random event sequences
// (fixed seeds, so failures reproduce) through a simulated shell and checks
// the protocol's invariants after every event:
//
//   - checkpoint ids strictly increase, across Start and new coordinators;
//   - no checkpoint is both completed and aborted, or finished twice;
//   - Completed and NotifyComplete only follow MetadataDurable(ok), and
//     notifications are monotonic;
//   - at most MaxConcurrent checkpoints are pending;
//   - at most Retained completed checkpoints are retained, Discard is only
//     for completed checkpoints, never for savepoints, and at most once;
//   - DiscardTaskState never targets a completed checkpoint, at most once;
//   - every request is answered at most once;
//   - automatic triggers respect MinPause, nothing triggers while stopped,
//     and after a Tick no pending checkpoint is older than Timeout unless it
//     is writing its metadata.
func TestCoordinatorProperties(t *testing.T) {
	const seeds, steps = 400, 400
	seen := map[string]int{}
	for seed := uint64(1); seed <= seeds; seed++ {
		s := newCoordinatorSim(t, seed, seen)
		for step := 0; step < steps; step++ {
			s.step()
			if t.Failed() {
				t.Fatalf("seed %d, step %d; last events:\n%s", seed, step, s.tail())
			}
		}
	}
	// The invariants are only as good as the paths the runs reach.
	for _, want := range []string{
		"trigger/interval", "trigger/manual", "trigger/external", "trigger/records", "trigger/marker",
		"completed/checkpoint", "completed/savepoint", "notify-complete", "discard", "discard-task-state",
		"aborted/declined", "aborted/expired", "aborted/subsumed", "aborted/task-failed",
		"aborted/metadata-failed", "aborted/stopped", "fail-job", "request-done",
		"warning/duplicate-ack", "warning/late-ack", "warning/unknown-checkpoint", "warning/unknown-task",
		"warning/late-decline", "out-of-order completion",
	} {
		if seen[want] == 0 {
			t.Errorf("no run reached %q: the random inputs need widening", want)
		}
	}
	t.Logf("decisions seen: %v", seen)
}

type taskKey struct {
	id   int64
	task TaskID
}

type coordinatorSim struct {
	t    *testing.T
	rng  *rand.Rand
	opts Options
	c    *Coordinator
	now  int64

	tasks []TaskID
	log   []string
	seen  map[string]int // decision kinds, for the coverage check

	// Across coordinators.
	maxID     int64
	kinds     map[int64]Kind
	stopAfter map[int64]bool
	completed map[int64]bool
	aborted   map[int64]bool
	discarded map[int64]bool
	released  map[taskKey]bool
	metaOK    map[int64]bool
	notified  int64

	// Current coordinator.
	answered       map[int64]bool // request ids are per coordinator
	pending        map[int64]bool
	taskSetOf      map[int64][]TaskID
	acked          map[int64]map[TaskID]bool
	writing        map[int64]bool
	retained       map[int64]bool
	triggeredAt    map[int64]int64
	hasCompleted   bool
	lastCompletion int64
}

func newCoordinatorSim(t *testing.T, seed uint64, seen map[string]int) *coordinatorSim {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	pick := func(xs ...int64) int64 { return xs[rng.IntN(len(xs))] }
	s := &coordinatorSim{
		t:    t,
		rng:  rng,
		seen: seen,
		opts: Options{
			Interval:          pick(0, 500, 1000),
			MinPause:          pick(0, 0, 300),
			MaxConcurrent:     int(pick(1, 2, 3)),
			Timeout:           pick(800, 2000, 5000),
			TolerableFailures: int(pick(0, 1, 3)),
			Retained:          int(pick(1, 2, 3)),
			EveryNRecords:     pick(0, 100),
		},
		kinds: map[int64]Kind{}, stopAfter: map[int64]bool{}, completed: map[int64]bool{},
		aborted: map[int64]bool{}, discarded: map[int64]bool{}, released: map[taskKey]bool{},
		metaOK: map[int64]bool{},
	}
	s.newCoordinator(0, nil)
	s.start()
	return s
}

func (s *coordinatorSim) newCoordinator(lastID int64, recovered []CompletedCheckpoint) {
	c, err := NewCoordinator(s.opts, lastID, recovered)
	if err != nil {
		s.t.Fatalf("NewCoordinator: %v", err)
	}
	s.c = c
	s.pending, s.taskSetOf, s.acked = map[int64]bool{}, map[int64][]TaskID{}, map[int64]map[TaskID]bool{}
	s.writing, s.retained, s.triggeredAt = map[int64]bool{}, map[int64]bool{}, map[int64]int64{}
	s.answered = map[int64]bool{}
	s.hasCompleted = false
	for _, r := range recovered {
		if r.Kind == KindCheckpoint {
			s.retained[r.ID] = true
		}
	}
	s.check("new")
}

func (s *coordinatorSim) start() {
	all := []TaskID{"a", "b", "c", "d"}
	s.rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	s.tasks = slices.Clone(all[:1+s.rng.IntN(len(all))])
	var restored int64
	switch s.rng.IntN(3) {
	case 1:
		for id := range s.retained {
			restored = id
		}
	case 2:
		restored = s.maxID + s.rng.Int64N(5) // e.g. a savepoint of another job
	}
	if err := s.c.Start(s.now, s.tasks, restored); err != nil {
		s.t.Fatalf("Start: %v", err)
	}
	s.check(fmt.Sprintf("start tasks=%v restored=%d", s.tasks, restored))
}

func (s *coordinatorSim) randomID(candidates map[int64]bool) (int64, bool) {
	var ids []int64
	for id, ok := range candidates {
		if ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, false
	}
	slices.Sort(ids) // map order is random; the seed must decide
	return ids[s.rng.IntN(len(ids))], true
}

func (s *coordinatorSim) step() {
	s.now += s.rng.Int64N(60)
	switch r := s.rng.IntN(100); {
	case r < 20:
		s.now += s.rng.Int64N(1500)
		s.c.Tick(s.now)
		s.check(fmt.Sprintf("tick now=%d", s.now))
		for id := range s.pending {
			if !s.writing[id] && s.now-s.triggeredAt[id] >= s.opts.Timeout {
				s.t.Errorf("checkpoint %d pending at %d, triggered at %d, past timeout %d", id, s.now, s.triggeredAt[id], s.opts.Timeout)
			}
		}
	case r < 50: // an ack that counts
		open := map[int64]bool{}
		for id := range s.pending {
			open[id] = !s.writing[id]
		}
		id, ok := s.randomID(open)
		if !ok {
			return
		}
		var missing []TaskID
		for _, task := range s.taskSetOf[id] {
			if !s.acked[id][task] {
				missing = append(missing, task)
			}
		}
		task := missing[s.rng.IntN(len(missing))]
		s.acked[id][task] = true
		s.c.Ack(s.now, id, task, TaskSnapshot{StateSize: s.rng.Int64N(100), Handle: handleOf(id, task)})
		s.check(fmt.Sprintf("ack id=%d task=%s", id, task))
	case r < 56: // a stray ack: duplicate, late, unknown or foreign
		id := s.rng.Int64N(s.maxID + 3)
		task := []TaskID{"a", "b", "c", "d", "zz"}[s.rng.IntN(5)]
		s.c.Ack(s.now, id, task, TaskSnapshot{Handle: handleOf(id, task)})
		s.check(fmt.Sprintf("stray ack id=%d task=%s", id, task))
	case r < 61:
		id := s.rng.Int64N(s.maxID + 2)
		task := []TaskID{"a", "b", "c", "d", "zz"}[s.rng.IntN(5)]
		s.c.Decline(s.now, id, task, "random")
		s.check(fmt.Sprintf("decline id=%d task=%s", id, task))
	case r < 76:
		id, ok := s.randomID(s.writing)
		if !ok {
			return
		}
		var err error
		if s.rng.IntN(5) == 0 {
			err = errors.New("storage error")
		} else {
			s.metaOK[id] = true
		}
		s.c.MetadataDurable(s.now, id, err)
		s.check(fmt.Sprintf("metadata-durable id=%d err=%v", id, err))
	case r < 82:
		req := Request{Kind: KindCheckpoint}
		switch s.rng.IntN(4) {
		case 0:
			req = Request{Kind: KindSavepoint, TargetDir: "/sp"}
		case 1:
			req = Request{Kind: KindSavepoint, StopAfter: s.rng.IntN(2) == 0}
		}
		if s.rng.IntN(4) == 0 && req.Kind == KindCheckpoint {
			s.c.ExternalSignal(s.now)
		} else {
			s.c.TriggerManual(s.now, req)
		}
		s.check(fmt.Sprintf("request %+v", req))
	case r < 88:
		n := s.rng.Int64N(150)
		s.c.SourceRecords(s.now, n)
		s.check(fmt.Sprintf("records n=%d", n))
	case r < 91:
		s.c.MarkerRecord(s.now)
		s.check("marker")
	case r < 94:
		task := []TaskID{"a", "b", "c", "d", "zz"}[s.rng.IntN(5)]
		s.c.TaskFailed(s.now, task)
		s.check(fmt.Sprintf("task-failed %s", task))
	case r < 95:
		s.c.Stop(s.now, "cancelled")
		s.check("stop")
	case r < 99:
		if !s.c.Running() || s.rng.IntN(4) == 0 {
			s.start()
		}
	default: // JobManager failover: a new coordinator from what storage holds
		var recovered []CompletedCheckpoint
		for id := range s.retained {
			recovered = append(recovered, CompletedCheckpoint{ID: id, Kind: KindCheckpoint})
		}
		s.newCoordinator(s.maxID, recovered)
		s.start()
	}
}

// check drains the decisions of the input just given and checks them.
func (s *coordinatorSim) check(input string) {
	t := s.t
	s.log = append(s.log, input)
	for _, d := range s.c.Decisions() {
		s.log = append(s.log, "  "+d.String())
		switch d := d.(type) {
		case TriggerCheckpoint:
			s.seen["trigger/"+d.Reason.String()]++
			if d.ID <= s.maxID {
				t.Errorf("trigger id %d not above %d", d.ID, s.maxID)
			}
			if !s.c.Running() {
				t.Errorf("trigger %d while stopped", d.ID)
			}
			if d.Reason != ReasonManual && d.Reason != ReasonExternal && s.hasCompleted && d.Timestamp < s.lastCompletion+s.opts.MinPause {
				t.Errorf("automatic trigger %d at %d within MinPause of completion at %d", d.ID, d.Timestamp, s.lastCompletion)
			}
			s.maxID = d.ID
			s.kinds[d.ID], s.stopAfter[d.ID] = d.Kind, d.StopAfter
			s.pending[d.ID] = true
			s.taskSetOf[d.ID] = slices.Clone(s.tasks)
			s.acked[d.ID] = map[TaskID]bool{}
			s.triggeredAt[d.ID] = d.Timestamp
		case WriteMetadata:
			if !s.pending[d.ID] || s.writing[d.ID] {
				t.Errorf("write-metadata %d: pending=%v writing=%v", d.ID, s.pending[d.ID], s.writing[d.ID])
			}
			if len(d.Acks) != len(s.taskSetOf[d.ID]) {
				t.Errorf("write-metadata %d with %d acks, want %d", d.ID, len(d.Acks), len(s.taskSetOf[d.ID]))
			}
			s.writing[d.ID] = true
		case Completed:
			id := d.Checkpoint.ID
			s.seen["completed/"+d.Checkpoint.Kind.String()]++
			if id < s.notified {
				s.seen["out-of-order completion"]++
			}
			if !s.writing[id] || !s.metaOK[id] || s.aborted[id] || s.completed[id] {
				t.Errorf("completed %d: writing=%v metadata-ok=%v aborted=%v completed=%v", id, s.writing[id], s.metaOK[id], s.aborted[id], s.completed[id])
			}
			s.completed[id] = true
			delete(s.pending, id)
			delete(s.writing, id)
			if d.Checkpoint.Kind == KindCheckpoint {
				s.retained[id] = true
			}
			s.hasCompleted, s.lastCompletion = true, s.now
		case NotifyComplete:
			s.seen["notify-complete"]++
			if !s.completed[d.ID] || !s.metaOK[d.ID] || d.ID <= s.notified {
				t.Errorf("notify-complete %d: completed=%v metadata-ok=%v last notified %d", d.ID, s.completed[d.ID], s.metaOK[d.ID], s.notified)
			}
			if s.kinds[d.ID] == KindSavepoint && !s.stopAfter[d.ID] {
				t.Errorf("notify-complete for savepoint %d that does not stop the job", d.ID)
			}
			s.notified = d.ID
		case NotifyAborted:
			s.seen["aborted/"+d.Reason.String()]++
			if !s.pending[d.ID] || s.completed[d.ID] || s.aborted[d.ID] {
				t.Errorf("notify-aborted %d: pending=%v completed=%v aborted=%v", d.ID, s.pending[d.ID], s.completed[d.ID], s.aborted[d.ID])
			}
			if s.writing[d.ID] && d.Reason != AbortMetadataFailed {
				t.Errorf("checkpoint %d writing its metadata aborted: %s", d.ID, d.Reason)
			}
			if d.Reason == AbortSubsumed && s.kinds[d.ID] == KindSavepoint {
				t.Errorf("savepoint %d subsumed", d.ID)
			}
			s.aborted[d.ID] = true
			delete(s.pending, d.ID)
			delete(s.writing, d.ID)
		case Discard:
			s.seen["discard"]++
			if !s.completed[d.ID] && !s.retained[d.ID] || s.kinds[d.ID] == KindSavepoint || s.discarded[d.ID] {
				t.Errorf("discard %d: completed=%v kind=%s discarded=%v", d.ID, s.completed[d.ID], s.kinds[d.ID], s.discarded[d.ID])
			}
			s.discarded[d.ID] = true
			delete(s.retained, d.ID)
		case DiscardTaskState:
			s.seen["discard-task-state"]++
			k := taskKey{d.ID, d.Task}
			if string(d.Handle) != string(handleOf(d.ID, d.Task)) {
				t.Errorf("discard-task-state %d %s with handle %q", d.ID, d.Task, d.Handle)
			}
			if s.completed[d.ID] || s.released[k] {
				t.Errorf("discard-task-state %d %s: completed=%v released=%v", d.ID, d.Task, s.completed[d.ID], s.released[k])
			}
			s.released[k] = true
		case RequestDone:
			s.seen["request-done"]++
			if s.answered[d.RequestID] {
				t.Errorf("request %d answered twice", d.RequestID)
			}
			s.answered[d.RequestID] = true
		case FailJob:
			s.seen["fail-job"]++
		case Warning:
			s.seen["warning/"+d.Code.String()]++
		default:
			t.Errorf("unknown decision %T", d)
		}
	}
	if len(s.pending) > s.opts.MaxConcurrent {
		t.Errorf("%d pending, MaxConcurrent %d", len(s.pending), s.opts.MaxConcurrent)
	}
	if len(s.retained) > s.opts.Retained {
		t.Errorf("%d retained, Retained %d", len(s.retained), s.opts.Retained)
	}
	if got := s.c.Counts().InProgress; got != int64(len(s.pending)) {
		t.Errorf("coordinator has %d in progress, shell counts %d", got, len(s.pending))
	}
	if got := len(s.c.Retained()); got != len(s.retained) {
		t.Errorf("coordinator retains %d, shell counts %d", got, len(s.retained))
	}
}

func handleOf(id int64, task TaskID) []byte { return fmt.Appendf(nil, "%d/%s", id, task) }

func (s *coordinatorSim) tail() string {
	const n = 40
	return strings.Join(s.log[max(0, len(s.log)-n):], "\n")
}

// TestAlignerProperties feeds aligners random but well-formed input streams:
// each channel carries barriers in increasing id order (some ids skipped, some
// replaced by cancel markers) and ends with end-of-partition. The task reads
// only unblocked channels. Checked: every id gets at most one final action
// (snapshot or abort), final actions come in increasing id order, the task
// never deadlocks (some open channel is always readable), nothing is blocked
// at the end, and — when no cancel marker or skip touched an id — every id
// delivered on all channels is snapshotted.
func TestAlignerProperties(t *testing.T) {
	for seed := uint64(1); seed <= 500; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xa119))
		mode := []AlignmentMode{ExactlyOnce, AtLeastOnce}[seed%2]
		channels := 1 + rng.IntN(4)
		const ids = 12

		type event struct {
			kind string // barrier, cancel, eop
			id   int64
		}
		streams := make([][]event, channels)
		disturbed := map[int64]bool{} // ids some channel skips or cancels
		for ch := range streams {
			for id := int64(1); id <= ids; id++ {
				switch rng.IntN(12) {
				case 0:
					disturbed[id] = true // skipped on this channel
				case 1:
					disturbed[id] = true
					streams[ch] = append(streams[ch], event{"cancel", id})
				default:
					streams[ch] = append(streams[ch], event{"barrier", id})
				}
			}
			streams[ch] = append(streams[ch], event{"eop", 0})
		}

		al, err := NewAligner(mode, channels)
		if err != nil {
			t.Fatal(err)
		}
		var log []string
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d (%s, %d channels): %s\n%s", seed, mode, channels, fmt.Sprintf(format, args...), strings.Join(log, "\n"))
		}
		final := map[int64]string{}
		var lastFinal int64
		var now int64
		for {
			var readable []int
			for ch := range streams {
				if len(streams[ch]) > 0 && !al.Blocked(ch) {
					readable = append(readable, ch)
				}
			}
			if len(readable) == 0 {
				for ch := range streams {
					if len(streams[ch]) > 0 {
						fail("deadlock: channel %d has events but every channel is blocked or drained", ch)
					}
				}
				break
			}
			ch := readable[rng.IntN(len(readable))]
			ev := streams[ch][0]
			streams[ch] = streams[ch][1:]
			now += rng.Int64N(10)
			var acts []Action
			switch ev.kind {
			case "barrier":
				acts = al.OnBarrier(ch, ev.id, now)
			case "cancel":
				acts = al.OnCancel(ch, ev.id)
			case "eop":
				acts = al.OnEndOfPartition(ch, now)
			}
			log = append(log, fmt.Sprintf("%s ch=%d id=%d -> %v", ev.kind, ch, ev.id, acts))
			for _, a := range acts {
				var id int64
				switch a := a.(type) {
				case Snapshot:
					id = a.ID
					if a.AlignmentMs < 0 || a.FirstBarrierAt > now {
						fail("bad snapshot stats %v at %d", a, now)
					}
				case AbortAlignment:
					id = a.ID
				}
				if prev, ok := final[id]; ok {
					fail("checkpoint %d finished twice: %s then %v", id, prev, a)
				}
				if id <= lastFinal {
					fail("final action for %d after one for %d", id, lastFinal)
				}
				final[id], lastFinal = a.String(), id
			}
		}
		for ch := range channels {
			if al.Blocked(ch) {
				fail("channel %d blocked at the end", ch)
			}
		}
		if _, ok := al.Aligning(); ok {
			fail("still aligning after every channel ended")
		}
		if mode == ExactlyOnce {
			for id := int64(1); id <= ids; id++ {
				if !disturbed[id] && !strings.HasPrefix(final[id], "snapshot") {
					fail("checkpoint %d delivered on every channel but not snapshotted: %q", id, final[id])
				}
			}
		}
	}
}
