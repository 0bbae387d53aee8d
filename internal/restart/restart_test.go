package restart

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// step is one failure at t0+at and the decision expected for it.
type step struct {
	at      time.Duration
	restart bool
	delay   time.Duration
}

func runSteps(t *testing.T, s Strategy, steps []step) {
	t.Helper()
	for i, st := range steps {
		restart, delay := s.OnFailure(t0.Add(st.at))
		if restart != st.restart || delay != st.delay {
			t.Fatalf("%s: failure %d at +%v: OnFailure = %v, %v; want %v, %v",
				s, i+1, st.at, restart, delay, st.restart, st.delay)
		}
	}
}

func mustNew(t *testing.T, o Options, rnd Rand) Strategy {
	t.Helper()
	s, err := New(o, rnd)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fixedRand returns the same draw each time: 0 for the least jitter,
// n-1 for the most.
type fixedRand struct{ top bool }

func (r fixedRand) Int64N(n int64) int64 {
	if r.top {
		return n - 1
	}
	return 0
}

func TestStrategies(t *testing.T) {
	noJitter := ExponentialDelayOptions{Jitter: NoJitter}
	tests := []struct {
		name  string
		opts  Options
		rnd   Rand
		steps []step
	}{
		{"none", Options{Kind: KindNone}, nil, []step{{0, false, 0}, {time.Hour, false, 0}}},
		{"fixed-delay defaults: one restart after 1s", Options{Kind: KindFixedDelay}, nil, []step{
			{0, true, time.Second}, {time.Hour, false, 0}, {2 * time.Hour, false, 0},
		}},
		{"fixed-delay: attempts are for life", Options{Kind: KindFixedDelay, FixedDelay: FixedDelayOptions{Attempts: 3, Delay: 10 * time.Second}}, nil, []step{
			{0, true, 10 * time.Second}, {time.Minute, true, 10 * time.Second}, {24 * time.Hour, true, 10 * time.Second}, {48 * time.Hour, false, 0},
		}},
		{"fixed-delay: no delay", Options{Kind: KindFixedDelay, FixedDelay: FixedDelayOptions{Attempts: Unlimited, Delay: NoDelay}}, nil, []step{
			{0, true, 0}, {time.Millisecond, true, 0}, {2 * time.Millisecond, true, 0},
		}},
		{"failure-rate defaults: one failure per minute", Options{Kind: KindFailureRate}, nil, []step{
			{0, true, time.Second}, {time.Minute + time.Millisecond, true, time.Second}, {2 * time.Minute, false, 0},
		}},
		{"failure-rate: 3 per 5m, sliding", Options{Kind: KindFailureRate, FailureRate: FailureRateOptions{MaxFailures: 3, Interval: 5 * time.Minute, Delay: NoDelay}}, nil, []step{
			{0, true, 0},
			{1 * time.Minute, true, 0},
			{2 * time.Minute, true, 0},
			{5*time.Minute + time.Second, true, 0}, // 0s is more than 5m ago: 3 failures in the window
			{6 * time.Minute, false, 0},            // 1m, 2m, 5:01, 6m: 4 failures within 5m (inclusive)
		}},
		{"exponential-delay defaults without jitter", Options{ExponentialDelay: noJitter}, nil, []step{
			{0, true, time.Second},
			{2 * time.Second, true, 1500 * time.Millisecond},
			{4 * time.Second, true, 2250 * time.Millisecond},
			{7 * time.Second, true, 3375 * time.Millisecond},
		}},
		{"exponential-delay caps at max backoff", Options{ExponentialDelay: ExponentialDelayOptions{InitialBackoff: time.Second, MaxBackoff: 5 * time.Second, Multiplier: 2, Jitter: NoJitter}}, nil, []step{
			{0, true, 1 * time.Second},
			{10 * time.Second, true, 2 * time.Second},
			{20 * time.Second, true, 4 * time.Second},
			{30 * time.Second, true, 5 * time.Second},
			{40 * time.Second, true, 5 * time.Second},
		}},
		{"exponential-delay resets after a quiet threshold", Options{ExponentialDelay: ExponentialDelayOptions{Multiplier: 2, ResetThreshold: time.Minute, Jitter: NoJitter}}, nil, []step{
			{0, true, 1 * time.Second},                 // restart at 1s
			{10 * time.Second, true, 2 * time.Second},  // restart at 12s
			{71 * time.Second, true, 4 * time.Second},  // ran 59s < 1m: restart at 75s
			{135 * time.Second, true, 1 * time.Second}, // ran exactly 1m: reset
			{140 * time.Second, true, 2 * time.Second}, // restart at 142s
		}},
		{"exponential-delay attempts in a row, renewed by a reset", Options{ExponentialDelay: ExponentialDelayOptions{Attempts: 2, ResetThreshold: time.Minute, Jitter: NoJitter}}, nil, []step{
			{0, true, time.Second},
			{10 * time.Second, true, 1500 * time.Millisecond},
			{20 * time.Second, false, 0},
		}},
		{"exponential-delay merges failures while a restart is pending", Options{ExponentialDelay: ExponentialDelayOptions{Multiplier: 2, Jitter: NoJitter}}, nil, []step{
			{0, true, time.Second},
			{300 * time.Millisecond, true, 700 * time.Millisecond}, // the same restart
			{time.Second, true, 0},                                 // still the same: due now
			{5 * time.Second, true, 2 * time.Second},               // a new failure: the second attempt
		}},
		{"exponential-delay least jitter", Options{ExponentialDelay: ExponentialDelayOptions{InitialBackoff: 10 * time.Second, MaxBackoff: time.Hour, Multiplier: 2, Jitter: 0.25}}, fixedRand{}, []step{
			{0, true, 10 * time.Second},               // 10s - 2.5s, but never below InitialBackoff
			{time.Minute, true, 15 * time.Second},     // 20s - 5s
			{2 * time.Minute, true, 30 * time.Second}, // 40s - 10s
		}},
		{"exponential-delay most jitter", Options{ExponentialDelay: ExponentialDelayOptions{InitialBackoff: 10 * time.Second, MaxBackoff: 45 * time.Second, Multiplier: 2, Jitter: 0.25}}, fixedRand{top: true}, []step{
			{0, true, 12500 * time.Millisecond},
			{time.Minute, true, 25 * time.Second},
			{2 * time.Minute, true, 45 * time.Second}, // 40s + 10s, capped
			{3 * time.Minute, true, 45 * time.Second}, // 45s + 11.25s, capped
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, mustNew(t, tt.opts, tt.rnd), tt.steps)
		})
	}
}

func TestJitterIsSeededAndBounded(t *testing.T) {
	delays := func(seed uint64) []time.Duration {
		s := mustNew(t, Options{ExponentialDelay: ExponentialDelayOptions{Jitter: 0.5}}, rand.New(rand.NewPCG(seed, 0)))
		var ds []time.Duration
		now := t0
		for range 20 {
			ok, d := s.OnFailure(now)
			if !ok {
				t.Fatal("exponential-delay refused a restart with unlimited attempts")
			}
			if d < DefaultInitialBackoff || d > DefaultMaxBackoff {
				t.Fatalf("delay %v outside [%v, %v]", d, DefaultInitialBackoff, DefaultMaxBackoff)
			}
			ds = append(ds, d)
			now = now.Add(d + time.Second)
		}
		return ds
	}
	a, b, c := delays(1), delays(1), delays(2)
	if !equal(a, b) {
		t.Fatalf("same seed, different delays:\n%v\n%v", a, b)
	}
	if equal(a, c) {
		t.Fatalf("different seeds, same delays: %v", a)
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestManyFailuresDoNotOverflow(t *testing.T) {
	s := mustNew(t, Options{ExponentialDelay: ExponentialDelayOptions{Multiplier: 10, Jitter: 1}}, fixedRand{top: true})
	now := t0
	for range 2000 {
		ok, d := s.OnFailure(now)
		if !ok || d < DefaultInitialBackoff || d > DefaultMaxBackoff {
			t.Fatalf("OnFailure = %v, %v", ok, d)
		}
		now = now.Add(d + time.Millisecond)
	}
	if _, d := s.OnFailure(now); d != DefaultMaxBackoff {
		t.Fatalf("after 2000 failures in a row: delay %v, want the cap %v", d, DefaultMaxBackoff)
	}
}

func TestEnsureDefaults(t *testing.T) {
	got := *(&Options{}).EnsureDefaults()
	want := Options{
		Kind:       KindExponentialDelay,
		FixedDelay: FixedDelayOptions{Attempts: 1, Delay: time.Second},
		ExponentialDelay: ExponentialDelayOptions{
			InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 1.5,
			ResetThreshold: time.Hour, Jitter: 0.1, Attempts: Unlimited,
		},
		FailureRate: FailureRateOptions{MaxFailures: 1, Interval: time.Minute, Delay: time.Second},
	}
	if got != want {
		t.Fatalf("EnsureDefaults() =\n%+v\nwant\n%+v", got, want)
	}
	big := *(&Options{ExponentialDelay: ExponentialDelayOptions{InitialBackoff: 2 * time.Minute}}).EnsureDefaults()
	if big.ExponentialDelay.MaxBackoff != 2*time.Minute {
		t.Fatalf("MaxBackoff default with a 2m InitialBackoff = %v, want 2m", big.ExponentialDelay.MaxBackoff)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string // substring; empty for valid
	}{
		{"zero value", Options{}, ""},
		{"every kind's zero value", Options{Kind: KindFailureRate}, ""},
		{"unknown kind", Options{Kind: 9}, "Kind is Kind(9), want one of none"},
		{"fixed-delay negative attempts", Options{Kind: KindFixedDelay, FixedDelay: FixedDelayOptions{Attempts: -1}}, "FixedDelay.Attempts is -1, want >= 1"},
		{"fixed-delay negative delay", Options{Kind: KindFixedDelay, FixedDelay: FixedDelayOptions{Delay: -time.Second}}, "FixedDelay.Delay is -1s, want > 0 (or NoDelay)"},
		{"exponential initial below 1ms", Options{ExponentialDelay: ExponentialDelayOptions{InitialBackoff: time.Microsecond}}, "ExponentialDelay.InitialBackoff is 1µs, want >= 1ms"},
		{"exponential max below initial", Options{ExponentialDelay: ExponentialDelayOptions{InitialBackoff: time.Minute, MaxBackoff: time.Second}}, "ExponentialDelay.MaxBackoff is 1s, want >= InitialBackoff (1m0s)"},
		{"exponential multiplier 1", Options{ExponentialDelay: ExponentialDelayOptions{Multiplier: 1}}, "ExponentialDelay.Multiplier is 1, want > 1"},
		{"exponential negative reset", Options{ExponentialDelay: ExponentialDelayOptions{ResetThreshold: -time.Second}}, "ExponentialDelay.ResetThreshold is -1s"},
		{"exponential jitter above 1", Options{ExponentialDelay: ExponentialDelayOptions{Jitter: 1.5}}, "ExponentialDelay.Jitter is 1.5, want in [0, 1]"},
		{"exponential negative attempts", Options{ExponentialDelay: ExponentialDelayOptions{Attempts: -2}}, "ExponentialDelay.Attempts is -2"},
		{"failure-rate negative max", Options{Kind: KindFailureRate, FailureRate: FailureRateOptions{MaxFailures: -1}}, "FailureRate.MaxFailures is -1, want >= 1"},
		{"failure-rate tiny interval", Options{Kind: KindFailureRate, FailureRate: FailureRateOptions{Interval: time.Nanosecond}}, "FailureRate.Interval is 1ns, want >= 1ms"},
		{"failure-rate negative delay", Options{Kind: KindFailureRate, FailureRate: FailureRateOptions{Delay: -2}}, "FailureRate.Delay is -2ns"},
		{"other kinds' options are not checked", Options{Kind: KindNone, FixedDelay: FixedDelayOptions{Attempts: -1}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.EnsureDefaults().Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			case tt.wantErr != "" && !errors.Is(err, ErrInvalidOptions):
				t.Fatalf("Validate() = %v, does not wrap ErrInvalidOptions", err)
			}
		})
	}
	if _, err := New(Options{Kind: KindFixedDelay, FixedDelay: FixedDelayOptions{Attempts: -1}}, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("New with invalid options = %v, want ErrInvalidOptions", err)
	}
}

func TestParse(t *testing.T) {
	def := *(&Options{}).EnsureDefaults()
	with := func(f func(o *Options)) Options {
		o := def
		f(&o)
		return o
	}
	tests := []struct {
		spec string
		want Options
	}{
		{"none", with(func(o *Options) { o.Kind = KindNone })},
		{" OFF ", with(func(o *Options) { o.Kind = KindNone })},
		{"fixed-delay", with(func(o *Options) { o.Kind = KindFixedDelay })},
		{"fixed-delay:attempts=3,delay=1s", with(func(o *Options) {
			o.Kind = KindFixedDelay
			o.FixedDelay = FixedDelayOptions{Attempts: 3, Delay: time.Second}
		})},
		{"fixeddelay: attempts = unlimited , delay = 0", with(func(o *Options) {
			o.Kind = KindFixedDelay
			o.FixedDelay = FixedDelayOptions{Attempts: Unlimited, Delay: NoDelay}
		})},
		{"exponential-delay", def},
		{"exponential-delay:initial-backoff=100ms,max-backoff=10s,multiplier=2,reset-threshold=10m,jitter=0,attempts=5", with(func(o *Options) {
			o.ExponentialDelay = ExponentialDelayOptions{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second,
				Multiplier: 2, ResetThreshold: 10 * time.Minute, Jitter: NoJitter, Attempts: 5}
		})},
		{"exponential-delay:backoff-multiplier=1.2,reset-backoff-threshold=1m,jitter-factor=0.5,attempts-before-reset-backoff=infinite", with(func(o *Options) {
			o.ExponentialDelay.Multiplier = 1.2
			o.ExponentialDelay.ResetThreshold = time.Minute
			o.ExponentialDelay.Jitter = 0.5
		})},
		{"exponential-delay:initial-backoff=5m", with(func(o *Options) {
			o.ExponentialDelay.InitialBackoff = 5 * time.Minute
			o.ExponentialDelay.MaxBackoff = 5 * time.Minute
		})},
		{"failure-rate:max=3,interval=1m,delay=1s", with(func(o *Options) {
			o.Kind = KindFailureRate
			o.FailureRate = FailureRateOptions{MaxFailures: 3, Interval: time.Minute, Delay: time.Second}
		})},
		{"failurerate:max-failures-per-interval=2,failure-rate-interval=30s", with(func(o *Options) {
			o.Kind = KindFailureRate
			o.FailureRate.MaxFailures = 2
			o.FailureRate.Interval = 30 * time.Second
		})},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := Parse(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Parse(%q) =\n%+v\nwant\n%+v", tt.spec, got, tt.want)
			}
			again, err := Parse(got.String())
			if err != nil || again != got {
				t.Fatalf("Parse(String()) of %q: %+v, %v; want the same options back (String() = %q)", tt.spec, again, err, got.String())
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		spec    string
		wantErr string
	}{
		{"", "empty"},
		{"  ", "empty"},
		{"forever", `unknown strategy "forever"`},
		{"none:attempts=1", "none takes no parameters"},
		{"fixed-delay:", `parameter "" is not key=value`},
		{"fixed-delay:attempts", `parameter "attempts" is not key=value`},
		{"fixed-delay:attempts=", `parameter "attempts=" is not key=value`},
		{"fixed-delay:tries=3", `fixed-delay has no parameter "tries" (it takes attempts, delay)`},
		{"fixed-delay:attempts=0", "attempts=0: want a count >= 1 or unlimited (for no restarts use none)"},
		{"fixed-delay:attempts=three", "attempts=three: want a count"},
		{"fixed-delay:delay=10", "delay=10: want a duration >= 0"},
		{"fixed-delay:delay=-1s", "delay=-1s: want a duration >= 0"},
		{"fixed-delay:attempts=1,attempts=2", "parameter attempts given twice"},
		{"exponential-delay:multiplier=1", "multiplier=1: want a number > 1"},
		{"exponential-delay:multiplier=NaN", "multiplier=NaN: want a number > 1"},
		{"exponential-delay:jitter=2", "jitter=2: want a number in [0, 1]"},
		{"exponential-delay:initial-backoff=0", "initial-backoff=0: want a duration >= 1ms"},
		{"exponential-delay:initial-backoff=1m,max-backoff=1s", "ExponentialDelay.MaxBackoff is 1s, want >= InitialBackoff (1m0s)"},
		{"exponential-delay:multiplier=2,backoff-multiplier=3", "parameter multiplier given twice"},
		{"failure-rate:max=0", "max=0: want a count >= 1"},
		{"failure-rate:interval=0s", "interval=0s: want a duration >= 1ms"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			o, err := Parse(tt.spec)
			switch {
			case err == nil:
				t.Fatalf("Parse(%q) = %v, want an error", tt.spec, o)
			case !errors.Is(err, ErrInvalidSpec):
				t.Fatalf("Parse(%q) = %v, does not wrap ErrInvalidSpec", tt.spec, err)
			case !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Parse(%q) = %v, want an error containing %q", tt.spec, err, tt.wantErr)
			case !strings.Contains(err.Error(), `"`+tt.spec+`"`) || !strings.Contains(err.Error(), "accepted: none | fixed-delay"):
				t.Fatalf("Parse(%q) = %v, want it to quote the spec and list the accepted forms", tt.spec, err)
			}
		})
	}
}

func TestStrategyString(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{Kind: KindNone}, "none"},
		{Options{Kind: KindFixedDelay, FixedDelay: FixedDelayOptions{Attempts: 3, Delay: time.Second}}, "fixed-delay:attempts=3,delay=1s"},
		{Options{Kind: KindFixedDelay, FixedDelay: FixedDelayOptions{Attempts: Unlimited, Delay: NoDelay}}, "fixed-delay:attempts=unlimited,delay=0s"},
		{Options{}, "exponential-delay:initial-backoff=1s,max-backoff=1m0s,multiplier=1.5,reset-threshold=1h0m0s,jitter=0.1,attempts=unlimited"},
		{Options{Kind: KindFailureRate, FailureRate: FailureRateOptions{MaxFailures: 3}}, "failure-rate:max=3,interval=1m0s,delay=1s"},
	}
	for _, tt := range tests {
		if got := mustNew(t, tt.opts, nil).String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestTextMarshaling(t *testing.T) {
	var o Options
	if err := o.UnmarshalText([]byte("failure-rate:max=2")); err != nil {
		t.Fatal(err)
	}
	b, err := o.MarshalText()
	if err != nil || string(b) != "failure-rate:max=2,interval=1m0s,delay=1s" {
		t.Fatalf("MarshalText = %q, %v", b, err)
	}
	if err := o.UnmarshalText([]byte("sometimes")); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("UnmarshalText of a bad spec = %v, want ErrInvalidSpec", err)
	}
}

func TestVetoable(t *testing.T) {
	v := &Vetoable{Strategy: &FixedDelay{opts: FixedDelayOptions{Attempts: 5, Delay: time.Second}}}
	if ok, d := v.OnFailure(time.Time{}); !ok || d != time.Second {
		t.Fatalf("before the veto: OnFailure = %v, %v; want true, 1s (the wrapped strategy's)", ok, d)
	}
	v.Veto()
	for range 3 {
		if ok, d := v.OnFailure(time.Time{}); ok || d != 0 {
			t.Fatalf("after the veto: OnFailure = %v, %v; want false, 0", ok, d)
		}
	}
}
