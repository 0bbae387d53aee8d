package weir_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
)

// TestUnalignedOptionsValidate: the combinations Flink refuses (and the one
// weir cannot do yet) fail with an error naming the options; the good ones
// pass.
func TestUnalignedOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*weir.CheckpointOptions)
		want string // "" for valid
	}{
		{"unaligned", func(c *weir.CheckpointOptions) { c.Unaligned = true }, ""},
		{"unaligned with a timeout", func(c *weir.CheckpointOptions) { c.Unaligned, c.AlignedTimeout = true, time.Second }, ""},
		{"at-least-once", func(c *weir.CheckpointOptions) { c.Unaligned, c.Mode = true, weir.AtLeastOnce },
			"Options.Checkpointing.Unaligned needs Mode ExactlyOnce"},
		{"two concurrent", func(c *weir.CheckpointOptions) { c.Unaligned, c.MaxConcurrent = true, 2 },
			"Options.Checkpointing.Unaligned needs MaxConcurrent 1 (now 2)"},
		{"negative timeout", func(c *weir.CheckpointOptions) { c.Unaligned, c.AlignedTimeout = true, -time.Second },
			"Options.Checkpointing.AlignedTimeout is -1s; want >= 0"},
		{"timeout without unaligned", func(c *weir.CheckpointOptions) { c.AlignedTimeout = time.Second },
			"Options.Checkpointing.AlignedTimeout is 1s but Unaligned is off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := weir.Options{Exchange: "local"}
			tt.set(&o.Checkpointing)
			o.EnsureDefaults()
			err := o.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	o := weir.Options{Exchange: "tcp", Checkpointing: weir.CheckpointOptions{Unaligned: true}}
	o.EnsureDefaults()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `Unaligned is not supported with Options.Exchange "tcp"`) {
		t.Fatalf("Validate with tcp = %v, want the unsupported error", err)
	}
}

// TestExactlyOnceHarnessUnaligned runs the exactly-once harness with
// unaligned checkpoints (always unaligned, and with a short aligned timeout
// that switches) under the same random failures: the committed output must
// be exactly the expected multiset, and the checkpoints must have stored
// records in flight (else the harness proved nothing about them).
func TestExactlyOnceHarnessUnaligned(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	if s := os.Getenv("WEIR_UNALIGNED_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	for _, mode := range []string{"heap-unaligned", "heap-unaligned-timeout"} {
		t.Run(mode, func(t *testing.T) {
			var persisted, restarts, ckpts int64
			for seed := range seeds {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					r := runHarnessOn(t, uint64(7000+seed), mode)
					persisted += r.persisted
					restarts += int64(r.restarts)
					ckpts += int64(r.ckpts)
				})
			}
			t.Logf("%s, %d seeds: %d checkpoints completed, %d restarts, %d bytes of channel state", mode, seeds, ckpts, restarts, persisted)
			if !t.Failed() && persisted == 0 {
				t.Error("no completed checkpoint stored channel state: the barriers overtook nothing")
			}
		})
	}
}
