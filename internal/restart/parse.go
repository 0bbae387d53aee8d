package restart

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidSpec is wrapped by every Parse error.
var ErrInvalidSpec = errors.New("restart: invalid restart strategy")

// specHelp ends Parse errors: the accepted forms, with their parameters.
const specHelp = "accepted: none | fixed-delay[:attempts=N,delay=D] | " +
	"exponential-delay[:initial-backoff=D,max-backoff=D,multiplier=F,reset-threshold=D,jitter=F,attempts=N] | " +
	"failure-rate[:max=N,interval=D,delay=D] (D a Go duration such as 500ms, 10s, 1m; N a count or unlimited)"

// param is one parameter of a spec: its name, Flink's name for it, and how
// it sets the options.
type param struct {
	name, flink string
	set         func(o *Options, value string) error
}

var kindParams = map[Kind][]param{
	KindNone: nil,
	KindFixedDelay: {
		{"attempts", "attempts", func(o *Options, v string) error { return parseAttempts(v, &o.FixedDelay.Attempts) }},
		{"delay", "delay", func(o *Options, v string) error { return parseDelay(v, &o.FixedDelay.Delay) }},
	},
	KindExponentialDelay: {
		{"initial-backoff", "initial-backoff", func(o *Options, v string) error {
			return parseBackoff(v, &o.ExponentialDelay.InitialBackoff)
		}},
		{"max-backoff", "max-backoff", func(o *Options, v string) error { return parseBackoff(v, &o.ExponentialDelay.MaxBackoff) }},
		{"multiplier", "backoff-multiplier", func(o *Options, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 1) || math.IsInf(f, 0) {
				return errors.New("want a number > 1")
			}
			o.ExponentialDelay.Multiplier = f
			return nil
		}},
		{"reset-threshold", "reset-backoff-threshold", func(o *Options, v string) error {
			return parseBackoff(v, &o.ExponentialDelay.ResetThreshold)
		}},
		{"jitter", "jitter-factor", func(o *Options, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return errors.New("want a number in [0, 1]")
			}
			if f == 0 {
				f = NoJitter
			}
			o.ExponentialDelay.Jitter = f
			return nil
		}},
		{"attempts", "attempts-before-reset-backoff", func(o *Options, v string) error {
			return parseAttempts(v, &o.ExponentialDelay.Attempts)
		}},
	},
	KindFailureRate: {
		{"max", "max-failures-per-interval", func(o *Options, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return errors.New("want a count >= 1")
			}
			o.FailureRate.MaxFailures = n
			return nil
		}},
		{"interval", "failure-rate-interval", func(o *Options, v string) error { return parseBackoff(v, &o.FailureRate.Interval) }},
		{"delay", "delay", func(o *Options, v string) error { return parseDelay(v, &o.FailureRate.Delay) }},
	},
}

// kindNames maps every accepted strategy name, Flink's aliases included, to
// its kind.
var kindNames = map[string]Kind{
	"none": KindNone, "off": KindNone, "disable": KindNone,
	"fixed-delay": KindFixedDelay, "fixeddelay": KindFixedDelay,
	"exponential-delay": KindExponentialDelay, "exponentialdelay": KindExponentialDelay,
	"failure-rate": KindFailureRate, "failurerate": KindFailureRate,
}

// Parse reads a restart strategy spec, as given on a command line:
//
//	none
//	fixed-delay:attempts=3,delay=10s
//	exponential-delay:initial-backoff=1s,max-backoff=1m,multiplier=1.5,reset-threshold=1h,jitter=0.1,attempts=unlimited
//	failure-rate:max=3,interval=5m,delay=10s
//
// Parameters are optional and take Flink's defaults (see Options); Flink's
// long names (backoff-multiplier, reset-backoff-threshold, jitter-factor,
// attempts-before-reset-backoff, max-failures-per-interval,
// failure-rate-interval) and strategy aliases (off, fixeddelay, …) are
// accepted too. A delay of 0 restarts at once; a jitter of 0 disables it.
// The result has its defaults filled and is valid.
func Parse(spec string) (Options, error) {
	fail := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w %q: %s; %s", ErrInvalidSpec, spec, fmt.Sprintf(format, args...), specHelp)
	}
	name, rest, hasParams := strings.Cut(strings.TrimSpace(spec), ":")
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return fail("empty")
	}
	kind, ok := kindNames[name]
	if !ok {
		return fail("unknown strategy %q", name)
	}
	o := Options{Kind: kind}
	params := kindParams[kind]
	if hasParams {
		seen := map[string]bool{}
		for _, kv := range strings.Split(rest, ",") {
			key, value, ok := strings.Cut(kv, "=")
			key, value = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(value)
			if !ok || key == "" || value == "" {
				return fail("parameter %q is not key=value", strings.TrimSpace(kv))
			}
			p, ok := findParam(params, key)
			if !ok {
				if len(params) == 0 {
					return fail("%s takes no parameters", kind)
				}
				return fail("%s has no parameter %q (it takes %s)", kind, key, paramNames(params))
			}
			if seen[p.name] {
				return fail("parameter %s given twice", p.name)
			}
			seen[p.name] = true
			if err := p.set(&o, value); err != nil {
				return fail("%s=%s: %v", key, value, err)
			}
		}
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return fail("%v", err)
	}
	return o, nil
}

func findParam(params []param, key string) (param, bool) {
	for _, p := range params {
		if key == p.name || key == p.flink {
			return p, true
		}
	}
	return param{}, false
}

func paramNames(params []param) string {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

func parseAttempts(v string, dst *int) error {
	switch strings.ToLower(v) {
	case "unlimited", "infinite":
		*dst = Unlimited
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return errors.New("want a count >= 1 or unlimited (for no restarts use none)")
	}
	*dst = n
	return nil
}

// parseDelay reads a restart delay: >= 0, where 0 means at once.
func parseDelay(v string, dst *time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return errors.New("want a duration >= 0 such as 500ms or 10s")
	}
	if d == 0 {
		d = NoDelay
	}
	*dst = d
	return nil
}

// parseBackoff reads a backoff, threshold or interval: >= 1ms.
func parseBackoff(v string, dst *time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < MinBackoff {
		return errors.New("want a duration >= 1ms such as 500ms or 10s")
	}
	*dst = d
	return nil
}
