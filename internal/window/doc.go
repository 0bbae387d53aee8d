// Package window holds the pure arithmetic of windows: which time windows a
// timestamp belongs to (tumbling, sliding, session), how session windows
// merge, and the panes (slices) that let a sliding window with incremental
// aggregation update one pane per record instead of size/slide windows.
// No clock, no state, no goroutines: the window operator in the root
// package drives it.
//
// # Usage
//
//	w := window.Tumbling(ts, 10_000, 0)              // [start, start+10s)
//	ws := window.Sliding(nil, ts, 10_000, 2_000, 0)  // the 5 windows holding ts
//	result, merged := window.MergeSession(existing, window.TimeWindow{Start: ts, End: ts + gap})
//
//	p := window.NewPanes(10_000, 2_000, 0)           // panes of gcd(size, slide)
//	pane := p.PaneOf(ts)
//	first, last := p.Ends(pane)                      // ends of the windows holding the pane
package window
