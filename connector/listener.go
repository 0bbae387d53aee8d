package connector

// CheckpointListener is implemented by a Reader that acts on an external
// system once a checkpoint is complete: a change-data-capture reader
// confirms to the database that the changes up to the checkpoint's
// position may be discarded, a queue reader acknowledges its messages.
// Acting at Snapshot instead would lose data when the checkpoint fails and
// the job restores an earlier one.
//
// NotifyCheckpointComplete(id) is called from the task's goroutine, like
// the Reader's other methods, after every operator of the job acknowledged
// checkpoint id. A notification may be missed (the job fails first) and a
// later one covers earlier checkpoints: id means "every checkpoint up to
// id is complete". An error fails the job.
type CheckpointListener interface {
	NotifyCheckpointComplete(checkpointID int64) error
}
