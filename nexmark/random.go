package nexmark

// javaRandom is java.util.Random: the 48-bit linear congruential generator of
// Knuth (TAOCP 3.2.1) with the exact output functions of the JDK, so that a
// generator seeded like Beam's (new Random(eventId)) draws the same numbers.
// The zero value is not seeded; call setSeed.
type javaRandom struct {
	seed uint64
}

const (
	javaMultiplier = 0x5DEECE66D
	javaAddend     = 0xB
	javaMask       = 1<<48 - 1
)

// setSeed is new Random(seed): the seed is scrambled with the multiplier.
func (r *javaRandom) setSeed(seed int64) {
	r.seed = (uint64(seed) ^ javaMultiplier) & javaMask
}

// next returns the high bits of the next state, as Random.next(bits).
func (r *javaRandom) next(bits uint) int32 {
	r.seed = (r.seed*javaMultiplier + javaAddend) & javaMask
	return int32(uint32(r.seed >> (48 - bits)))
}

// nextInt is Random.nextInt(): 32 uniform bits.
func (r *javaRandom) nextInt() int32 { return r.next(32) }

// intn is Random.nextInt(bound) for bound > 0: uniform in [0, bound), with
// the JDK's rejection of the last partial block.
func (r *javaRandom) intn(bound int32) int32 {
	x := r.next(31)
	m := bound - 1
	if bound&m == 0 { // a power of two: the high bits
		return int32((int64(bound) * int64(x)) >> 31)
	}
	// u - x + m overflows (wraps negative) exactly when u falls in the last,
	// partial block of bound values; Go's int32 wraps as Java's int does.
	for u := x; ; u = r.next(31) {
		x = u % bound
		if u-x+m >= 0 {
			return x
		}
	}
}

// nextLong is Random.nextLong().
func (r *javaRandom) nextLong() int64 {
	hi := int64(r.next(32))
	lo := int64(r.next(32))
	return hi<<32 + lo
}

// nextDouble is Random.nextDouble(): uniform in [0, 1) with 53 bits.
func (r *javaRandom) nextDouble() float64 {
	hi := int64(r.next(26))
	lo := int64(r.next(27))
	return float64(hi<<27+lo) * (1.0 / (1 << 53))
}

// longn is the Nexmark generators' LongGenerator.nextLong(random, n): uniform
// in [0, n) through nextInt when n fits an int, otherwise the (skewed)
// |nextLong() % n| of the original.
func (r *javaRandom) longn(n int64) int64 {
	if n < 1<<31-1 {
		return int64(r.intn(int32(n)))
	}
	v := r.nextLong() % n
	if v < 0 {
		v = -v
	}
	return v
}
