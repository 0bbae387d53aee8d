package network

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirstream/weir/internal/network/credit"
)

// ErrInvalidOptions is wrapped by every error of Options.Validate.
var ErrInvalidOptions = credit.ErrInvalidOptions

// Defaults of Options.
const (
	DefaultSenderBuffers    = 8
	DefaultFlushTimeout     = time.Millisecond
	DefaultHandshakeTimeout = 10 * time.Second
)

// Options configures a Node. The zero value is usable after EnsureDefaults:
// Flink's buffer defaults (2 exclusive buffers per input channel, 8 floating
// buffers per input gate, 32 KiB buffers), plain TCP, no cluster token.
type Options struct {
	// ExclusiveBuffers is the number of buffers each input channel owns,
	// and so its sender's initial credit. Default 2; 1 to 65536.
	ExclusiveBuffers int
	// FloatingBuffers is the number of buffers an input gate lends to its
	// channels that announce a backlog. Default 8; -1 means none; up to
	// 1048576.
	FloatingBuffers int
	// BufferSize is the size of a network buffer in bytes: a buffer frame
	// carries at most this much, and records larger than it span several.
	// Every process of a cluster must use the same size (the handshake
	// refuses a peer with another). Default 32768; 64 to 16777216.
	BufferSize int

	// SenderBuffers is the most buffers one output channel holds at once,
	// being filled or queued for credit. A producer whose channel has them
	// all waits (and that wait is the channel's back-pressured time), so
	// the sending side's memory is bounded too. Default 8; at least 2.
	SenderBuffers int

	// FlushTimeout is how long a partly filled buffer may wait for more
	// records before it is sent anyway (Flink's buffer timeout, whose
	// default of 100 ms weir shortens so that an idle channel's latency
	// stays low). Default 1 ms; -1 sends buffers only when full or on
	// Flush; otherwise from 100 µs to 1 minute.
	FlushTimeout time.Duration

	// HandshakeTimeout bounds the TLS and protocol handshake of a new
	// connection. Default 10 s; at least 1 ms.
	HandshakeTimeout time.Duration

	// Token is the cluster token. A dialer sends it in its handshake and a
	// listener refuses a connection whose token differs, before it reads
	// any frame. Default "": no token (then no dialer may send one);
	// at most 4096 bytes.
	Token string

	// TLS, when set, runs every connection over mutual TLS with the
	// certificates it names. Default nil: plain TCP.
	TLS *TLSFiles

	// Logger receives refused connections and failed channels. Default
	// slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills the fields whose zero value means "default" and
// returns o, so that it chains: o.EnsureDefaults().Validate().
func (o *Options) EnsureDefaults() *Options {
	c := o.credit()
	c.EnsureDefaults()
	o.ExclusiveBuffers, o.FloatingBuffers, o.BufferSize = c.ExclusiveBuffers, c.FloatingBuffers, c.BufferSize
	if o.SenderBuffers == 0 {
		o.SenderBuffers = DefaultSenderBuffers
	}
	if o.FlushTimeout == 0 {
		o.FlushTimeout = DefaultFlushTimeout
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

func (o *Options) credit() credit.Options {
	return credit.Options{ExclusiveBuffers: o.ExclusiveBuffers, FloatingBuffers: o.FloatingBuffers, BufferSize: o.BufferSize}
}

// Validate reports every field outside its accepted range; each error wraps
// ErrInvalidOptions and names the field and the range. Call EnsureDefaults
// first.
func (o *Options) Validate() error {
	c := o.credit()
	errs := []error{c.Validate()}
	bad := func(field string, value any, want string) {
		errs = append(errs, fmt.Errorf("%w: %s is %v, want %s", ErrInvalidOptions, field, value, want))
	}
	if o.SenderBuffers < 2 {
		bad("SenderBuffers", o.SenderBuffers, ">= 2 (0 means the default 8)")
	}
	if o.FlushTimeout != -1 && (o.FlushTimeout < 100*time.Microsecond || o.FlushTimeout > time.Minute) {
		bad("FlushTimeout", o.FlushTimeout, "-1 (flush only full buffers) or 100µs to 1m (0 means the default 1ms)")
	}
	if o.HandshakeTimeout < time.Millisecond {
		bad("HandshakeTimeout", o.HandshakeTimeout, ">= 1ms (0 means the default 10s)")
	}
	if len(o.Token) > maxTokenLen {
		bad("Token", fmt.Sprintf("%d bytes long", len(o.Token)), fmt.Sprintf("at most %d bytes", maxTokenLen))
	}
	if o.TLS != nil {
		if o.TLS.CertFile == "" || o.TLS.KeyFile == "" || o.TLS.CAFile == "" {
			bad("TLS", fmt.Sprintf("%+v", *o.TLS), "CertFile, KeyFile and CAFile all set")
		}
	}
	return errors.Join(errs...)
}
