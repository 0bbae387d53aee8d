package weir

import "github.com/weirstream/weir/internal/storage"

// SetCheckpointStore makes the job use st as checkpoint storage (tests
// inject faults through it).
func SetCheckpointStore(o *Options, st storage.Store) { o.Checkpointing.store = st }
