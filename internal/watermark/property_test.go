package watermark

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// outputChecker checks a stream of Outputs against the contract every
// consumer relies on: watermarks strictly increase, are sent only while
// active, nothing follows MaxWatermark, and the status flags alternate.
type outputChecker struct {
	wm   int64
	idle bool
}

func newOutputChecker() outputChecker { return outputChecker{wm: MinWatermark} }

func (c *outputChecker) check(out Output) error {
	if out.BecameActive && out.BecameIdle {
		return fmt.Errorf("became active and idle at once: %+v", out)
	}
	if out.BecameActive {
		if !c.idle {
			return fmt.Errorf("became active while active")
		}
		c.idle = false
	}
	if out.Advanced {
		switch {
		case c.idle:
			return fmt.Errorf("watermark %s sent while idle", FormatWatermark(out.Watermark))
		case c.wm == MaxWatermark:
			return fmt.Errorf("watermark %s sent after the maximum", FormatWatermark(out.Watermark))
		case out.Watermark <= c.wm:
			return fmt.Errorf("watermark %s does not advance on %s", FormatWatermark(out.Watermark), FormatWatermark(c.wm))
		}
		c.wm = out.Watermark
	}
	if out.BecameIdle {
		if c.idle {
			return fmt.Errorf("became idle while idle")
		}
		c.idle = true
	}
	return nil
}

// TestMergerProperties feeds mergers random channel events (fixed seeds, so
// failures reproduce) — watermarks mostly increasing per channel but some
// going back, idle and active statuses (some repeated), ends, the maximum —
// and checks after every event, against a model of the channels:
//
//   - the Outputs follow the contract (outputChecker): the watermark sent
//     never decreases;
//   - every watermark sent is at most the last watermark of every active
//     channel that has not ended;
//   - the merger keeps up: with some live active channel its watermark is
//     at least the least of them and it is active; with only idle live
//     channels it is idle; MaxWatermark is sent exactly when every channel
//     reached it or ended and one reached it.
func TestMergerProperties(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(1); seed <= 500; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x3e7))
		channels := 1 + rng.IntN(5)
		m, err := NewMerger(channels)
		if err != nil {
			t.Fatal(err)
		}
		model := make([]InputState, channels)
		for ch := range model {
			model[ch].Watermark = MinWatermark
		}
		var next []int64 // per channel, the next watermark it would send
		for range channels {
			next = append(next, rng.Int64N(1000))
		}
		oc := newOutputChecker()
		var log []string
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d (%d channels): %s\nlast events:\n%s", seed, channels, fmt.Sprintf(format, args...),
				strings.Join(log[max(0, len(log)-30):], "\n"))
		}
		for step := 0; step < 300; step++ {
			ch := rng.IntN(channels)
			c := &model[ch]
			var ev string
			var out Output
			switch r := rng.IntN(100); {
			case r < 60:
				wm := next[ch]
				switch rng.IntN(20) {
				case 0:
					wm -= rng.Int64N(2000) // goes back: ignored
				case 1:
					wm = MaxWatermark
				}
				next[ch] += rng.Int64N(500)
				ev = fmt.Sprintf("watermark ch=%d ts=%s", ch, FormatWatermark(wm))
				out = m.OnWatermark(ch, wm)
				if !c.Ended {
					c.Watermark = max(c.Watermark, wm)
				}
			case r < 95:
				status := Status(rng.IntN(2))
				ev = fmt.Sprintf("status ch=%d %s", ch, status)
				out = m.OnStatus(ch, status)
				if !c.Ended {
					if c.Idle && status == Active && c.Watermark < oc.wm {
						seen["active behind"]++
					}
					c.Idle = status == Idle
				}
			default:
				ev = fmt.Sprintf("end ch=%d", ch)
				out = m.OnEndOfPartition(ch)
				c.Ended = true
			}
			log = append(log, ev)
			if !out.Empty() {
				log = append(log, "  "+strings.ReplaceAll(out.String(), "\n", ", "))
			}
			if err := oc.check(out); err != nil {
				fail("%v", err)
			}
			switch {
			case out.Advanced && out.Watermark == MaxWatermark:
				seen["max"]++
			case out.Advanced && out.BecameIdle:
				seen["idle flush"]++
			case out.Advanced:
				seen["advance"]++
			}
			if out.BecameIdle {
				seen["idle"]++
			}
			if out.BecameActive {
				seen["active"]++
			}

			minActive, live, active, reachedMax := MaxWatermark, 0, 0, false
			for _, c := range model {
				if c.Watermark == MaxWatermark {
					reachedMax = true
				}
				if c.Ended || c.Watermark == MaxWatermark {
					continue
				}
				live++
				if !c.Idle {
					active++
					minActive = min(minActive, c.Watermark)
				}
			}
			if out.Advanced && out.Watermark > minActive {
				fail("sent %s above the least active channel's %s", FormatWatermark(out.Watermark), FormatWatermark(minActive))
			}
			if m.Watermark() != oc.wm || m.Idle() != oc.idle {
				fail("merger says %s idle=%v, its outputs say %s idle=%v", FormatWatermark(m.Watermark()), m.Idle(), FormatWatermark(oc.wm), oc.idle)
			}
			switch {
			case live == 0:
				if want := reachedMax; (m.Watermark() == MaxWatermark) != want {
					fail("no live channel, some reached the maximum: %v; watermark %s", want, FormatWatermark(m.Watermark()))
				}
			case oc.wm == MaxWatermark:
				fail("maximum sent with %d live channels", live)
			case active == 0:
				if !m.Idle() {
					fail("every live channel is idle, the merger is not")
				}
			default:
				if m.Idle() || m.Watermark() < minActive {
					fail("merger at %s idle=%v lags the least active channel's %s", FormatWatermark(m.Watermark()), m.Idle(), FormatWatermark(minActive))
				}
			}
			for ch := range model {
				if got := m.Channel(ch); got != model[ch] {
					fail("channel %d is %+v, model %+v", ch, got, model[ch])
				}
			}
		}
	}
	for _, want := range []string{"advance", "idle", "active", "idle flush", "max", "active behind"} {
		if seen[want] == 0 {
			t.Errorf("no run reached %q: the random inputs need widening", want)
		}
	}
	t.Logf("outputs seen: %v", seen)
}

// TestSplitsProperties drives a source subtask's Splits with random splits,
// records (bounded out-of-orderness, some records without timestamps),
// periodic calls at random intervals, finished splits and the end of input,
// and checks after every call:
//
//   - the Outputs follow the contract (outputChecker);
//   - every watermark sent is at most maxTimestamp - delay - 1 of every
//     active split (as the model computes it), and below the maximum until
//     the end of input;
//   - a split is idle only after at least the idleness timeout without
//     records, and is idle once the timeout passed since the first periodic
//     call after its last record;
//   - with some active split the subtask is active, with only idle ones it
//     is idle.
func TestSplitsProperties(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5b17))
		delay := rng.Int64N(300)
		timeout := []int64{0, 500, 1000}[rng.IntN(3)]
		strategy := BoundedOutOfOrderness(delay)
		if timeout > 0 {
			strategy = strategy.WithIdleness(timeout)
		}
		s, err := NewSplits(strategy)
		if err != nil {
			t.Fatal(err)
		}
		type splitModel struct {
			maxTS         int64 // MinWatermark before the first timestamp
			lastEvent     int64 // sim time of the last record, or of the add
			lastEventCall int   // periodic calls made before the last record
		}
		model := map[string]*splitModel{}
		var ids []string // in the order added, for reproducible picks
		var calls []int64
		var now int64
		nextID := 0
		oc := newOutputChecker()
		ended := false
		var log []string
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d (delay %d, idleness %d): %s\nlast events:\n%s", seed, delay, timeout, fmt.Sprintf(format, args...),
				strings.Join(log[max(0, len(log)-30):], "\n"))
		}
		for step := 0; step < 400; step++ {
			var ev string
			var out Output
			switch r := rng.IntN(100); {
			case r < 8 && len(ids) < 5:
				id := fmt.Sprintf("s%d", nextID)
				nextID++
				var err error
				if out, err = s.AddSplit(id); err != nil {
					fail("add %s: %v", id, err)
				}
				ids = append(ids, id)
				model[id] = &splitModel{maxTS: MinWatermark, lastEvent: now, lastEventCall: len(calls)}
				ev = "add split=" + id
			case r < 12 && len(ids) > 0:
				i := rng.IntN(len(ids))
				id := ids[i]
				ids = append(ids[:i], ids[i+1:]...)
				delete(model, id)
				out = s.FinishSplit(id)
				ev = "finish split=" + id
			case r < 70 && len(ids) > 0:
				// Splits are read unevenly: one is often far ahead.
				i := rng.IntN(len(ids))
				id := ids[i]
				ts := now*10 + int64(i)*rng.Int64N(2000) - rng.Int64N(500)
				if rng.IntN(10) == 0 {
					ts = MinWatermark
				}
				sm := model[id]
				sm.maxTS = max(sm.maxTS, ts)
				sm.lastEvent, sm.lastEventCall = now, len(calls)
				out = s.OnEvent(id, ts)
				ev = fmt.Sprintf("event split=%s ts=%s", id, FormatWatermark(ts))
			case r < 99:
				now += []int64{0, 100, 200, 200, 200, 700}[rng.IntN(6)]
				calls = append(calls, now)
				out = s.Periodic(now)
				ev = fmt.Sprintf("periodic now=%d", now)
			default:
				out = s.EndOfInput()
				ended = true
				ev = "end-of-input"
			}
			log = append(log, ev)
			if !out.Empty() {
				log = append(log, "  "+strings.ReplaceAll(out.String(), "\n", ", "))
			}
			if err := oc.check(out); err != nil {
				fail("%v", err)
			}
			if out.Advanced {
				seen["advance"]++
			}
			if out.BecameIdle {
				seen["idle"]++
			}
			if out.BecameActive {
				seen["active"]++
			}
			if oc.wm == MaxWatermark {
				if !ended {
					fail("maximum sent before the end of input")
				}
				break // nothing more happens; the run ends
			}

			active, live := 0, 0
			for _, id := range ids {
				sm := model[id]
				st, ok := s.Split(id)
				if !ok {
					fail("split %s missing", id)
				}
				live++
				if st.Idle {
					seen["split idle"]++
					if timeout == 0 || now-sm.lastEvent < timeout {
						fail("split %s idle at %d, last record at %d, timeout %d", id, now, sm.lastEvent, timeout)
					}
					continue
				}
				if timeout > 0 && sm.lastEventCall < len(calls) && now-calls[sm.lastEventCall] >= timeout {
					fail("split %s active at %d, quiet since the periodic call at %d, timeout %d", id, now, calls[sm.lastEventCall], timeout)
				}
				active++
				bound := MinWatermark
				if sm.maxTS != MinWatermark {
					bound = max(MinWatermark+delay+1, sm.maxTS) - delay - 1
				}
				if st.Watermark > bound {
					fail("split %s at %s, above its bound %s", id, FormatWatermark(st.Watermark), FormatWatermark(bound))
				}
				if out.Advanced && out.Watermark > st.Watermark {
					fail("sent %s above active split %s at %s", FormatWatermark(out.Watermark), id, FormatWatermark(st.Watermark))
				}
			}
			if s.Watermark() != oc.wm || s.Idle() != oc.idle {
				fail("splits say %s idle=%v, its outputs say %s idle=%v", FormatWatermark(s.Watermark()), s.Idle(), FormatWatermark(oc.wm), oc.idle)
			}
			if active > 0 && s.Idle() {
				fail("%d active splits, the subtask is idle", active)
			}
			if live > 0 && active == 0 && !s.Idle() {
				fail("every split is idle, the subtask is not")
			}
		}
	}
	for _, want := range []string{"advance", "idle", "active", "split idle"} {
		if seen[want] == 0 {
			t.Errorf("no run reached %q: the random inputs need widening", want)
		}
	}
	t.Logf("outputs seen: %v", seen)
}
