package network

import "testing"

// BareTCP is bareTCP for the external benchmarks (shuffle_bench_test.go).
func BareTCP(b *testing.B, rec []byte, n int) { bareTCP(b, rec, n) }
