//go:build !amd64 || purego

package datagen

// vectorFill reports whether fillSeq has a vector version: only on amd64
// (fill_amd64.go), and not in purego builds, which take no assembly.
const vectorFill = false

// fillSeq sets buf[j] = v + j*step for every j, wrapping around as int64
// arithmetic does.
func fillSeq(buf []int64, v, step int64) { fillSeqGo(buf, v, step) }
