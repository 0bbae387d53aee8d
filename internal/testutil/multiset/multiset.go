// Package multiset compares outputs as multisets, the way the exactly-once
// tests judge them: every expected element exactly as often as expected,
// nothing else.
package multiset

import "slices"

// Diff returns the elements of want missing from got (as often as they
// are missing) and the ones got holds beyond want, each sorted.
func Diff(want, got []string) (missing, extra []string) {
	n := map[string]int{}
	for _, w := range want {
		n[w]++
	}
	for _, g := range got {
		n[g]--
	}
	for k, v := range n {
		for ; v > 0; v-- {
			missing = append(missing, k)
		}
		for ; v < 0; v++ {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}
