package credit

import (
	"errors"
	"fmt"
)

// ErrInvalidOptions is wrapped by every error of Options.Validate.
var ErrInvalidOptions = errors.New("invalid network options")

// Defaults, as in Flink (taskmanager.network.memory.buffers-per-channel,
// floating-buffers-per-gate, taskmanager.memory.segment-size).
const (
	DefaultExclusiveBuffers = 2
	DefaultFloatingBuffers  = 8
	DefaultBufferSize       = 32 << 10
)

// Options sizes the buffers of an input gate. The zero value is usable after
// EnsureDefaults.
type Options struct {
	// ExclusiveBuffers is the number of buffers each input channel owns for
	// its whole life; its sender starts with that much credit. Default 2;
	// at least 1, so that every channel can always make progress.
	ExclusiveBuffers int

	// FloatingBuffers is the number of buffers an input gate shares among
	// its channels: they go, one at a time, to the channels whose senders
	// announce a backlog larger than their free buffers, and back to the
	// pool when the backlog is gone. Default 8; -1 means none (0 means the
	// default).
	FloatingBuffers int

	// BufferSize is the size in bytes of one network buffer, the most a
	// sender puts in one buffer frame. Default 32768 (32 KiB); from 64 B to
	// 16 MiB.
	BufferSize int
}

// EnsureDefaults fills the fields whose zero value means "default" and
// returns o, so that it chains: o.EnsureDefaults().Validate().
func (o *Options) EnsureDefaults() *Options {
	if o.ExclusiveBuffers == 0 {
		o.ExclusiveBuffers = DefaultExclusiveBuffers
	}
	if o.FloatingBuffers == 0 {
		o.FloatingBuffers = DefaultFloatingBuffers
	}
	if o.BufferSize == 0 {
		o.BufferSize = DefaultBufferSize
	}
	return o
}

// Floating returns the number of floating buffers (-1 read as 0).
func (o *Options) Floating() int { return max(o.FloatingBuffers, 0) }

// Validate reports every field outside its accepted range; each error wraps
// ErrInvalidOptions and names the field and the range. Call EnsureDefaults
// first.
func (o *Options) Validate() error {
	var errs []error
	check := func(ok bool, field string, value int, want string) {
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s is %d, want %s", ErrInvalidOptions, field, value, want))
		}
	}
	check(o.ExclusiveBuffers >= 1 && o.ExclusiveBuffers <= 1<<16, "ExclusiveBuffers", o.ExclusiveBuffers, "1 to 65536 (0 means the default 2)")
	check(o.FloatingBuffers >= -1 && o.FloatingBuffers <= 1<<20, "FloatingBuffers", o.FloatingBuffers, "-1 (none) to 1048576 (0 means the default 8)")
	check(o.BufferSize >= 64 && o.BufferSize <= 16<<20, "BufferSize", o.BufferSize, "64 to 16777216 bytes (0 means the default 32768)")
	return errors.Join(errs...)
}
