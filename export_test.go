package weir

import (
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/storage"
)

// SetCheckpointStore makes the job use st as checkpoint storage (tests
// inject faults through it).
func SetCheckpointStore(o *Options, st storage.Store) { o.Checkpointing.store = st }

// FaultHooks fail tasks at points of the checkpoint protocol.
type FaultHooks = runtime.FaultHooks

// SetFaultHooks installs f in the job's tasks.
func SetFaultHooks(o *Options, f *FaultHooks) { o.Checkpointing.faults = f }
