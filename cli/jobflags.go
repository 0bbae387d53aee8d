package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/internal/config"
)

// checkpointFlags are the checkpoint options of weir.CheckpointOptions that
// a job command sets besides the interval and the storage; each has its
// Flink key in the configuration file (internal/config).
type checkpointFlags struct {
	mode          string
	timeout       time.Duration
	minPause      time.Duration
	maxConcurrent int
	tolerable     int
	savepointDir  string
	unaligned     bool
	alignedTO     time.Duration
	buffer        bufferFlags
}

// bufferFlags are the buffer timeout's (weir.Options.BufferTimeout,
// Flink's execution.buffer-timeout.*), which checkpointFlags register and
// apply with theirs: every job command has both.
type bufferFlags struct {
	timeout time.Duration
	enabled bool
}

func (f *bufferFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.DurationVar(&f.timeout, "buffer-timeout", weir.DefaultBufferTimeout,
		"a busy task sends its partly filled batches this often (Flink's execution.buffer-timeout.interval); 0: after every record (batches of one record, the least latency and throughput)")
	fl.BoolVar(&f.enabled, "buffer-timeout-enabled", true,
		"false: a busy task sends a batch only when it is full (an idle task sends what it has in any case, and so does every task before a barrier or watermark)")
}

// apply checks the flags and sets them in opts.
func (f *bufferFlags) apply(opts *weir.Options) error {
	switch {
	case !f.enabled:
		opts.BufferTimeout = weir.NoBufferTimeout
	case f.timeout == 0:
		opts.BatchSize, opts.BufferTimeout = 1, weir.NoBufferTimeout
	case f.timeout < time.Millisecond:
		return fmt.Errorf("--buffer-timeout is %v: use 0 (after every record) or a duration of at least 1ms, such as 100ms", f.timeout)
	default:
		opts.BufferTimeout = f.timeout
	}
	return nil
}

func (f *checkpointFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.mode, "checkpointing-mode", "exactly-once",
		"exactly-once (barriers aligned: state reflects each record once) or at-least-once (no alignment: less latency under skew; after a restore some records may count twice)")
	fl.DurationVar(&f.timeout, "checkpoint-timeout", 10*time.Minute, "abort a checkpoint that has not completed after this long")
	fl.DurationVar(&f.minPause, "checkpoint-min-pause", 0, "least time between the end of one checkpoint and the start of the next")
	fl.IntVar(&f.maxConcurrent, "max-concurrent-checkpoints", 1, "checkpoints in progress at once")
	fl.IntVar(&f.tolerable, "tolerable-failed-checkpoints", 0, "consecutive failed checkpoints the job tolerates before it fails (-1: unlimited)")
	fl.BoolVar(&f.unaligned, "unaligned", false, "unaligned checkpoints: barriers overtake the records queued between tasks, which go into the checkpoint (checkpoints complete under backpressure; needs exactly-once and one concurrent checkpoint)")
	fl.DurationVar(&f.alignedTO, "aligned-checkpoint-timeout", 0, "with --unaligned: start each checkpoint aligned and switch to unaligned once it is this old (0: always unaligned)")
	fl.StringVar(&f.savepointDir, "savepoint-dir", "", "default directory or storage URL of savepoints (weir savepoint and weir stop without --dir)")
	f.buffer.register(c)
}

// apply checks the flags (the buffer timeout's too) and sets them in opts.
func (f *checkpointFlags) apply(opts *weir.Options) error {
	if err := f.buffer.apply(opts); err != nil {
		return err
	}
	c := &opts.Checkpointing
	switch f.mode {
	case "exactly-once":
		c.Mode = weir.ExactlyOnce
	case "at-least-once":
		c.Mode = weir.AtLeastOnce
	default:
		return fmt.Errorf("--checkpointing-mode is %q: use exactly-once or at-least-once", f.mode)
	}
	switch {
	case f.timeout < time.Millisecond:
		return fmt.Errorf("--checkpoint-timeout is %v: use a duration of at least 1ms, such as 10m", f.timeout)
	case f.minPause < 0:
		return fmt.Errorf("--checkpoint-min-pause is %v: use 0 or a positive duration such as 500ms", f.minPause)
	case f.maxConcurrent < 1:
		return fmt.Errorf("--max-concurrent-checkpoints is %d: use 1 or more", f.maxConcurrent)
	case f.tolerable < -1:
		return fmt.Errorf("--tolerable-failed-checkpoints is %d: use 0 or more, or -1 for unlimited", f.tolerable)
	case f.alignedTO < 0:
		return fmt.Errorf("--aligned-checkpoint-timeout is %v: use 0 (always unaligned) or a positive duration such as 30s", f.alignedTO)
	case f.alignedTO > 0 && !f.unaligned:
		return fmt.Errorf("--aligned-checkpoint-timeout %v needs --unaligned: it switches aligned checkpoints to unaligned ones", f.alignedTO)
	case f.unaligned && c.Mode != weir.ExactlyOnce:
		return fmt.Errorf("--unaligned needs --checkpointing-mode exactly-once: at-least-once checkpoints do not align")
	case f.unaligned && f.maxConcurrent != 1:
		return fmt.Errorf("--unaligned needs --max-concurrent-checkpoints 1 (now %d), as in Flink", f.maxConcurrent)
	}
	c.Unaligned, c.AlignedTimeout = f.unaligned, f.alignedTO
	c.Timeout, c.MinPause, c.MaxConcurrent, c.TolerableFailures = f.timeout, f.minPause, f.maxConcurrent, f.tolerable
	// Absolute, so that the savepoint paths weir prints work from any
	// directory (weir stop runs elsewhere).
	c.SavepointDir = f.savepointDir
	if c.SavepointDir != "" && !strings.Contains(c.SavepointDir, "://") {
		if abs, err := filepath.Abs(c.SavepointDir); err == nil {
			c.SavepointDir = abs
		}
	}
	return nil
}

// addConfigFlag gives c a --config flag: a YAML file with Flink's keys
// whose settings apply to c's flags unless given on the command line.
func addConfigFlag(c *cobra.Command, path *string) {
	c.Flags().StringVar(path, "config", "", "YAML file of settings under Flink's keys (execution.checkpointing.interval, state.backend.type, …); flags override it")
}

// applyConfig loads the --config file, if any, into cmd's flags.
func applyConfig(cmd *cobra.Command, path string) error {
	if path == "" {
		return nil
	}
	f, err := config.Load(path)
	if err != nil {
		return err
	}
	return f.Apply(cmd.Flags(), cmd.CommandPath())
}
