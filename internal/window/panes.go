package window

// Panes slices sliding windows (size, slide, offset) into panes of
// gcd(size, slide): every window is a whole number of consecutive panes, so
// a record updates the one pane holding it, and a window's result combines
// its panes when it fires.
type Panes struct {
	Size, Slide, Offset int64
	Pane                int64 // gcd(Size, Slide)
}

// NewPanes returns the panes of valid sliding windows (see Validate).
func NewPanes(size, slide, offset int64) Panes {
	return Panes{Size: size, Slide: slide, Offset: offset, Pane: gcd(size, slide)}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// PaneOf returns the pane holding ts.
func (p Panes) PaneOf(ts int64) TimeWindow {
	s := Start(ts, p.Offset, p.Pane)
	return TimeWindow{Start: s, End: s + p.Pane}
}

// Ends returns the end of the first and of the last window holding pane:
// every window end from first to last, every Slide, holds it.
func (p Panes) Ends(pane TimeWindow) (first, last int64) {
	// A window [s, s+Size) holds the pane if s <= pane.Start and
	// s+Size >= pane.End; window starts are aligned to Offset, every Slide.
	return p.firstStartFrom(pane.End-p.Size) + p.Size, Start(pane.Start, p.Offset, p.Slide) + p.Size
}

// firstStartFrom returns the first window start at or after x.
func (p Panes) firstStartFrom(x int64) int64 { return Start(x-1, p.Offset, p.Slide) + p.Slide }

// WindowEnding returns the window that ends at end.
func (p Panes) WindowEnding(end int64) TimeWindow { return TimeWindow{Start: end - p.Size, End: end} }

// FirstOpenEnd returns the end of the first window holding pane that has
// not fired at watermark wm (its max timestamp end-1 is above wm), and
// false if every window holding the pane has: the record is late.
func (p Panes) FirstOpenEnd(pane TimeWindow, wm int64) (int64, bool) {
	first, last := p.Ends(pane)
	if last-1 <= wm {
		return 0, false
	}
	if first-1 > wm {
		return first, true
	}
	// The first window whose end e has e-1 > wm, that is whose start is
	// at least wm+2-Size.
	return p.firstStartFrom(wm+2-p.Size) + p.Size, true
}
