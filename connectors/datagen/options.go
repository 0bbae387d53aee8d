package datagen

import (
	"fmt"
	"math"
)

// DefaultBatchSize is the default of Options.BatchSize.
const DefaultBatchSize = 1024

// MaxBatchSize is the largest accepted Options.BatchSize.
const MaxBatchSize = 1 << 16

// Options configures a datagen source. The zero value gives the defaults.
type Options struct {
	// RecordsPerSecond caps the rate of the whole source, shared evenly among
	// its subtasks. It must be finite and >= 0. Default 0: no limit.
	RecordsPerSecond float64
	// BatchSize is the most records a reader emits in one Poll, in
	// [1, MaxBatchSize]. Default 0: DefaultBatchSize (1024).
	BatchSize int
}

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	return o
}

// Validate reports the first field that holds a value out of its range.
// Zero fields are valid: they stand for their defaults.
func (o *Options) Validate() error {
	if math.IsNaN(o.RecordsPerSecond) || math.IsInf(o.RecordsPerSecond, 0) || o.RecordsPerSecond < 0 {
		return fmt.Errorf("datagen: Options.RecordsPerSecond must be a finite number >= 0 (0 means no limit), got %v", o.RecordsPerSecond)
	}
	if o.BatchSize < 0 || o.BatchSize > MaxBatchSize {
		return fmt.Errorf("datagen: Options.BatchSize must be in [1, %d] (0 means %d), got %d", MaxBatchSize, DefaultBatchSize, o.BatchSize)
	}
	return nil
}
