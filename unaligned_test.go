package weir_test

import (
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
