package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/internal/deploy"
)

// TestReactive runs the scripts under testdata/reactive. Times are
// milliseconds from an epoch. Commands:
//
//	new caps=C1,C2,… [maxpar=N] [min-increase=N] [stabilization=MS] [wait-timeout=MS] at=MS
//	                      a job whose vertices have those MaxParallelism (0: maxpar, default 128)
//	slots n=N at=MS       the job may use N slots
//	deployed n=N          an attempt runs at parallelism N
//	released at=MS        the attempt ended (or is cancelled to rescale)
//	decide at=MS          prints the decision
//
// Every command then prints the slots, the target parallelism, the
// running one and the cumulative parallelism of both.
func TestReactive(t *testing.T) {
	epoch := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }
	datadriven.Walk(t, "testdata/reactive", func(t *testing.T, path string) {
		var r *Reactive
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			var ms, n int
			if td.HasArg("at") {
				td.ScanArgs(t, "at", &ms)
			}
			if td.HasArg("n") {
				td.ScanArgs(t, "n", &n)
			}
			var b strings.Builder
			switch td.Cmd {
			case "new":
				var caps string
				td.ScanArgs(t, "caps", &caps)
				plan := deploy.Plan{MaxParallelism: 128}
				if td.HasArg("maxpar") {
					td.ScanArgs(t, "maxpar", &plan.MaxParallelism)
				}
				for i, c := range strings.Split(caps, ",") {
					v, err := strconv.Atoi(c)
					if err != nil {
						t.Fatalf("%s: caps: %v", td.Pos, err)
					}
					plan.Vertices = append(plan.Vertices, deploy.Vertex{ID: i, Parallelism: 1, MaxParallelism: v})
				}
				var o ReactiveOptions
				if td.HasArg("min-increase") {
					td.ScanArgs(t, "min-increase", &o.MinParallelismIncrease)
				}
				for key, d := range map[string]*time.Duration{"stabilization": &o.StabilizationTimeout, "wait-timeout": &o.WaitTimeout} {
					if td.HasArg(key) {
						var v int
						td.ScanArgs(t, key, &v)
						*d = time.Duration(v) * time.Millisecond
					}
				}
				o.EnsureDefaults()
				if err := o.Validate(); err != nil {
					return fmt.Sprintf("error: %v\n", err)
				}
				r = NewReactive(o, plan, at(ms))
				fmt.Fprintf(&b, "most=%d\n", r.Most())
			case "slots":
				r.Slots(n, at(ms))
			case "deployed":
				r.Deployed(n)
			case "released":
				r.Released(at(ms))
			case "decide":
				switch d := r.Decide(at(ms)).(type) {
				case Wait:
					if d.Until.IsZero() {
						b.WriteString("wait until the slots change\n")
					} else {
						fmt.Fprintf(&b, "wait until=%d\n", d.Until.Sub(epoch).Milliseconds())
					}
				case fmt.Stringer:
					fmt.Fprintf(&b, "%s\n", d)
				}
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			fmt.Fprintf(&b, "slots=%d target=%d running=%d cumulative=%d/%d\n",
				r.slots, r.Target(), r.Running(), r.Cumulative(r.Target()), r.Cumulative(r.Running()))
			return b.String()
		})
	})
}

// TestReactiveOptions: each invalid field is an error naming it and
// Flink's key.
func TestReactiveOptions(t *testing.T) {
	for _, tc := range []struct {
		o    ReactiveOptions
		want string
	}{
		{ReactiveOptions{MinParallelismIncrease: -1}, "min-parallelism-increase"},
		{ReactiveOptions{StabilizationTimeout: -time.Second}, "resource-stabilization-timeout"},
		{ReactiveOptions{WaitTimeout: -time.Second}, "resource-wait-timeout"},
	} {
		tc.o.EnsureDefaults()
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate() = %v, want an error naming %s", tc.o, err, tc.want)
		}
	}
}
