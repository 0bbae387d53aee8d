package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// newLogger returns the logger of `weir run`: log/slog to w, as text or
// JSON, from level up, with warnings and errors that repeat a cause
// (the same message and err, reason or detail) shown at most once per
// interval; the next one shown says how many were held back.
func newLogger(w io.Writer, level, format string, interval time.Duration) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level is %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format is %q: use text or json", format)
	}
	return slog.New(&onceAPeriod{h: h, shared: &limiter{interval: interval, now: time.Now, last: map[string]*seen{}}}), nil
}

// onceAPeriod is a slog.Handler that lets a warning or error of a given
// cause through once per interval.
type onceAPeriod struct {
	h      slog.Handler
	attrs  []slog.Attr // of WithAttrs, part of the cause
	shared *limiter
}

type limiter struct {
	interval time.Duration
	now      func() time.Time
	mu       sync.Mutex
	last     map[string]*seen
}

type seen struct {
	at         time.Time
	suppressed int
}

// causeKeys are the attributes that tell one cause from another.
var causeKeys = map[string]bool{"err": true, "error": true, "reason": true, "detail": true, "cause": true}

func (o *onceAPeriod) Enabled(ctx context.Context, l slog.Level) bool { return o.h.Enabled(ctx, l) }

func (o *onceAPeriod) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return o.h.Handle(ctx, r)
	}
	var key strings.Builder
	key.WriteString(r.Level.String() + "\x00" + r.Message)
	add := func(a slog.Attr) bool {
		if causeKeys[a.Key] {
			key.WriteString("\x00" + a.Key + "=" + a.Value.String())
		}
		return true
	}
	for _, a := range o.attrs {
		add(a)
	}
	r.Attrs(add)
	l := o.shared
	l.mu.Lock()
	now := l.now()
	s := l.last[key.String()]
	if s != nil && now.Sub(s.at) < l.interval {
		s.suppressed++
		l.mu.Unlock()
		return nil
	}
	held := 0
	if s != nil {
		held = s.suppressed
	}
	l.last[key.String()] = &seen{at: now}
	l.mu.Unlock()
	if held > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("repeated_since_last_shown", held))
	}
	return o.h.Handle(ctx, r)
}

func (o *onceAPeriod) WithAttrs(as []slog.Attr) slog.Handler {
	return &onceAPeriod{h: o.h.WithAttrs(as), attrs: append(o.attrs[:len(o.attrs):len(o.attrs)], as...), shared: o.shared}
}

func (o *onceAPeriod) WithGroup(name string) slog.Handler {
	return &onceAPeriod{h: o.h.WithGroup(name), attrs: o.attrs, shared: o.shared}
}
