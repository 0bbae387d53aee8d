package incremental

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/internal/keygroup"
)

// Options configures the checkpoint lifecycle of one operator instance's
// pebble keyed state.
type Options struct {
	// Groups is the instance's key-group range. Required (not empty).
	Groups keygroup.Range
	// LocalDir is the instance's own local directory: the native
	// checkpoints (chk-<n>), materializations (mat-<n>) and the changelog
	// go there. It is created when the first snapshot needs it. Required.
	LocalDir string
	// Prefix starts the name of every object the instance uploads; it must
	// be unique among the job's operator instances (the root package uses
	// <uid>-<subtask>). Required; only [A-Za-z0-9._-].
	Prefix string
	// LocalRecovery keeps the local copy of the last completed checkpoint,
	// and of newer ones at Close, so that a restore of that checkpoint on
	// the same machine links its files instead of downloading them.
	// Default: false. Not with Changelog.
	LocalRecovery bool
	// Changelog turns on changelog-based checkpoints (Changelog.Enabled).
	// Default: off (incremental native checkpoints).
	Changelog ChangelogOptions
	// FS is the file system of every local file operation of the
	// lifecycle: the seam through which tests inject local-disk errors. It
	// must be the pebble backend's file system too (native checkpoints are
	// hard links of its files). Default (nil): vfs.Default, the disk.
	FS vfs.FS
	// Clock returns the current time (materialization intervals, durations
	// logged). Default (nil): time.Now.
	Clock func() time.Time
	// Logger receives warnings and the materializations' reports. Default
	// (nil): discarded.
	Logger *slog.Logger
	// Workers is the number of files one instance uploads or downloads at
	// once. Default (0): 4.
	Workers int
	// OnMaterialized, when set (tests), is called after each background
	// materialization is uploaded, on the materialization's goroutine.
	// Default: nil.
	OnMaterialized func()
}

// ChangelogOptions configures changelog-based checkpoints, as Flink's
// state.changelog.* options (the root package's weir.ChangelogOptions
// converts to it).
type ChangelogOptions struct {
	// Enabled turns the changelog on. Default: false.
	Enabled bool
	// MaterializationInterval is the time between two materializations: at
	// the first checkpoint after it elapsed since the last one started, a
	// new one is taken. Default (0): 10 minutes. Negative: only the size
	// trigger.
	MaterializationInterval time.Duration
	// MaterializationLogRatio triggers a materialization when the log since
	// the last one exceeds this fraction of the last materialization's
	// size. Default (0): 0.5. Negative: only the interval.
	MaterializationLogRatio float64
}

// Defaults of Options.
const (
	DefaultMaterializationInterval = 10 * time.Minute
	DefaultMaterializationLogRatio = 0.5
	DefaultWorkers                 = 4
)

// EnsureDefaults fills every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.Changelog.MaterializationInterval == 0 {
		o.Changelog.MaterializationInterval = DefaultMaterializationInterval
	}
	if o.Changelog.MaterializationLogRatio == 0 {
		o.Changelog.MaterializationLogRatio = DefaultMaterializationLogRatio
	}
}

// Validate reports the first field that is wrong, after EnsureDefaults.
func (o *Options) Validate() error {
	switch {
	case o.Groups.End <= o.Groups.Start:
		return fmt.Errorf("incremental: Options.Groups %v is empty: want the instance's key groups", o.Groups)
	case o.LocalDir == "":
		return errors.New("incremental: Options.LocalDir is empty: want the instance's local directory")
	case o.Prefix == "" || !safeName(o.Prefix):
		return fmt.Errorf("incremental: Options.Prefix %q: want a non-empty name of [A-Za-z0-9._-]", o.Prefix)
	case o.Workers < 0:
		return fmt.Errorf("incremental: Options.Workers %d: want >= 1 (0: %d)", o.Workers, DefaultWorkers)
	}
	return nil
}

func safeName(s string) bool {
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}
