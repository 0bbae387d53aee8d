// Package devicetwin keeps a digital twin per device: the latest reading and
// a running aggregate (count, min, max, mean), in keyed state. Every reading
// emits the device's updated twin.
package devicetwin

import (
	"github.com/weirstream/weir"
	"github.com/weirstream/weir/state"
)

// Reading is one measurement sent by a device.
type Reading struct {
	Device string
	Time   int64 // epoch milliseconds
	Value  float64
}

// Twin is the state kept for one device.
type Twin struct {
	Device string
	Latest Reading
	Count  int64
	Min    float64
	Max    float64
	Sum    float64
}

// Mean returns the mean of the device's readings.
func (t Twin) Mean() float64 { return t.Sum / float64(t.Count) }

// Update folds a reading into the twin. Readings older than the latest one
// count toward the aggregate but do not replace the latest reading.
func (t Twin) Update(r Reading) Twin {
	if t.Count == 0 {
		t.Device, t.Min, t.Max = r.Device, r.Value, r.Value
	}
	if t.Count == 0 || r.Time >= t.Latest.Time {
		t.Latest = r
	}
	t.Count++
	t.Min, t.Max, t.Sum = min(t.Min, r.Value), max(t.Max, r.Value), t.Sum+r.Value
	return t
}

// Twins is the keyed process function that maintains the twins.
type Twins struct {
	twin state.Value[Twin]
}

// Open creates the keyed state.
func (f *Twins) Open(ctx *weir.KeyedContext[string]) (err error) {
	f.twin, err = weir.Value[Twin](ctx, "twin")
	return err
}

// ProcessElement updates the current device's twin and emits it.
func (f *Twins) ProcessElement(_ *weir.KeyedContext[string], r Reading, out weir.Collector[Twin]) error {
	t, _ := f.twin.Value()
	t = t.Update(r)
	f.twin.Update(t)
	out.Collect(t)
	return nil
}

// Build keys readings by device and returns the stream of updated twins.
func Build(readings *weir.Stream[Reading]) *weir.Stream[Twin] {
	return readings.
		Filter("valid", func(r Reading) bool { return r.Device != "" && r.Value == r.Value }). // drop NaN
		KeyBy(func(r Reading) string { return r.Device }).
		Process("twin", &Twins{})
}
