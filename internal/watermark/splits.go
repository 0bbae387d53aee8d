package watermark

import "fmt"

// Splits makes the watermark of one source subtask from per-split
// watermarks, as Flink's source operator does with split-local outputs: each
// split has its own Generator, so that a split read ahead of another does
// not make the other's records late. The subtask's watermark is the least
// watermark of its active splits; idle splits do not hold it back, a
// finished split is forgotten, and when every split is idle the subtask is
// idle. Its output never goes backwards.
//
// A subtask without splits (none assigned yet, all finished, or all at
// MaxWatermark) holds its watermark where it is and, with an idleness
// timeout, becomes idle after it, as in Flink: a subtask whose splits will
// come later must not let downstream run ahead of them. A subtask that was
// idle when its last split finished stays idle. Only EndOfInput sends
// MaxWatermark.
//
// Splits is a synchronous state machine: it reads no clock and is not safe
// for concurrent use; the source task's goroutine owns it. Processing time
// enters only through Periodic, which also measures idleness: OnEvent takes
// no `now`, so the record path reads no clock. Split ids are the
// connector.SplitState ids; using an id that was not added (or was finished)
// is a bug in the caller and panics.
type Splits struct {
	strategy Strategy
	splits   []*split // in the order added, so that runs are reproducible
	byID     map[string]*split
	out      combined

	// A subtask without live splits (none, or all at MaxWatermark) has one
	// input that never emits instead: it holds the watermark where it is,
	// active until the idleness timeout passes.
	empty      bool
	emptyIdle  bool
	emptySeen  bool // became empty since the last Periodic
	emptySince int64
}

type split struct {
	id    string
	gen   Generator
	wm    int64 // greatest watermark the generator emitted
	idle  bool
	seen  bool  // a record arrived (or the split was added) since the last Periodic
	quiet int64 // `now` of the last Periodic that saw a record
}

// NewSplits returns the watermark state of a source subtask without splits.
func NewSplits(strategy Strategy) (*Splits, error) {
	if err := strategy.Validate(); err != nil {
		return nil, err
	}
	return &Splits{strategy: strategy, byID: map[string]*split{}, out: newCombined(), empty: true, emptySeen: true}, nil
}

// AddSplit adds a split with a new generator, active and without a
// watermark: it holds back the subtask's watermark until its generator emits
// one (or it is idle). Adding an id that is already there is an error.
func (s *Splits) AddSplit(id string) (Output, error) {
	if _, ok := s.byID[id]; ok {
		return Output{}, fmt.Errorf("watermark: split %q added twice", id)
	}
	gen, err := s.strategy.NewGenerator()
	if err != nil {
		return Output{}, fmt.Errorf("watermark: split %q: %w", id, err)
	}
	sp := &split{id: id, gen: gen, wm: MinWatermark, seen: true}
	s.splits = append(s.splits, sp)
	s.byID[id] = sp
	return s.update(), nil
}

// FinishSplit forgets a split that was read to its end: it no longer holds
// back the subtask's watermark.
func (s *Splits) FinishSplit(id string) Output {
	sp := s.get(id)
	delete(s.byID, id)
	for i, x := range s.splits {
		if x == sp {
			s.splits = append(s.splits[:i], s.splits[i+1:]...)
			break
		}
	}
	return s.update()
}

// OnEvent passes the timestamp of a record read from split id to its
// generator (MinWatermark for a record without one). The record makes an
// idle split active; a punctuated generator may advance the watermark.
// Call it for every record; the record goes between the parts of the
// Output, as in Flink: an active status before it (an idle stream becomes
// active before it sends a record), a watermark after it (a punctuated
// watermark follows the record that carried it). OnEvent never reports
// BecameIdle.
func (s *Splits) OnEvent(id string, ts int64) Output {
	sp := s.get(id)
	sp.seen = true
	wm, emit := sp.gen.OnEvent(ts)
	changed := sp.idle
	sp.idle = false
	if emit && wm > sp.wm {
		sp.wm = wm
		changed = true
	}
	if !changed {
		return Output{}
	}
	return s.update()
}

// Periodic is called every interval (DefaultInterval) of processing time,
// now in milliseconds on the caller's clock: it marks splits without records
// for the idleness timeout idle, and asks the generators of the others for
// their periodic watermark.
func (s *Splits) Periodic(now int64) Output {
	timeout := s.strategy.idleTimeout
	for _, sp := range s.splits {
		if sp.seen {
			sp.seen, sp.quiet = false, now
		} else if timeout > 0 && !sp.idle && now-sp.quiet >= timeout {
			sp.idle = true
		}
		if sp.idle {
			continue
		}
		if wm, emit := sp.gen.OnPeriodic(); emit && wm > sp.wm {
			sp.wm = wm
		}
	}
	if s.empty {
		if s.emptySeen {
			s.emptySeen, s.emptySince = false, now
		} else if timeout > 0 && now-s.emptySince >= timeout {
			s.emptyIdle = true
		}
	}
	return s.update()
}

// EndOfInput ends the subtask's event time: the reader read its bounded
// input to the end (or the job stops with drain). The Output carries
// MaxWatermark, unless it was sent already; Splits sends nothing more.
func (s *Splits) EndOfInput() Output {
	sum := newSummary()
	sum.add(MaxWatermark, false)
	return s.out.update(sum)
}

// Watermark returns the subtask's watermark: the last one sent,
// MinWatermark before the first.
func (s *Splits) Watermark() int64 { return s.out.wm }

// Idle reports whether the subtask's output is idle.
func (s *Splits) Idle() bool { return s.out.idle }

// Len returns the number of splits.
func (s *Splits) Len() int { return len(s.splits) }

// Split returns what the subtask knows of split id.
func (s *Splits) Split(id string) (InputState, bool) {
	sp, ok := s.byID[id]
	if !ok {
		return InputState{}, false
	}
	return InputState{Watermark: sp.wm, Idle: sp.idle}, true
}

// IDs returns the ids of the splits, in the order they were added.
func (s *Splits) IDs() []string {
	ids := make([]string, len(s.splits))
	for i, sp := range s.splits {
		ids[i] = sp.id
	}
	return ids
}

func (s *Splits) get(id string) *split {
	sp, ok := s.byID[id]
	if !ok {
		panic(fmt.Sprintf("watermark: split %q is not in the subtask (never added, or finished)", id))
	}
	return sp
}

// update combines the splits. A split whose generator reached MaxWatermark
// no longer holds the subtask back, as if finished; only EndOfInput sends
// MaxWatermark, since more splits may come.
func (s *Splits) update() Output {
	sum := newSummary()
	for _, sp := range s.splits {
		if sp.wm != MaxWatermark {
			sum.add(sp.wm, sp.idle)
		}
	}
	if sum.live > 0 {
		s.empty = false
	} else {
		if !s.empty {
			// An idle subtask stays idle; an active one waits for the
			// timeout again, from the next Periodic.
			s.empty, s.emptyIdle, s.emptySeen = true, s.out.idle, true
		}
		sum.add(s.out.wm, s.emptyIdle) // never below what was sent
	}
	return s.out.update(sum)
}
