package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestLoggerOnceAMinutePerCause: a warning of one cause shows once per
// interval, then says how many were held back; other causes and info lines
// are not held back.
func TestLoggerOnceAMinutePerCause(t *testing.T) {
	var b bytes.Buffer
	log, err := newLogger(&b, "info", "text", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(0, 0)
	log.Handler().(*onceAPeriod).shared.now = func() time.Time { return clock }
	jl := log.With("job", "wordcount")
	for i := range 5 {
		jl.Warn("job failed; restarting", "attempt", i, "err", errors.New("disk full"))
		jl.Warn("checkpoint aborted", "checkpoint", i, "reason", "declined")
		jl.Info("checkpoint complete", "checkpoint", i)
	}
	jl.Warn("job failed; restarting", "attempt", 9, "err", errors.New("other cause"))
	clock = clock.Add(time.Minute)
	jl.Warn("job failed; restarting", "attempt", 10, "err", errors.New("disk full"))
	out := b.String()
	count := func(s string) int { return strings.Count(out, s) }
	if n := count(`msg="job failed; restarting"`); n != 3 {
		t.Errorf("restart lines: %d, want 3 (disk full once, other cause, disk full a minute later):\n%s", n, out)
	}
	if n := count(`msg="checkpoint aborted"`); n != 1 {
		t.Errorf("checkpoint aborted lines: %d, want 1:\n%s", n, out)
	}
	if n := count(`msg="checkpoint complete"`); n != 5 {
		t.Errorf("info lines: %d, want 5:\n%s", n, out)
	}
	if !strings.Contains(out, `err="disk full" repeated_since_last_shown=4`) {
		t.Errorf("the line a minute later does not say 4 were held back:\n%s", out)
	}
	for _, bad := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		if _, err := newLogger(&b, bad[0], bad[1], time.Minute); err == nil {
			t.Errorf("newLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
