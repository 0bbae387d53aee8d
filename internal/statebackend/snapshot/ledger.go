package snapshot

import (
	"maps"
	"slices"
)

// SharedFile is a data file uploaded to the job's shared directory.
type SharedFile struct {
	Object string // store name
	Size   int64
	CRC    uint32
}

// Upload is where the data files of one checkpoint are: Store identifies
// the checkpoint storage (compared with ==; a base in another store is not
// reused), Files maps each local file name to its object.
type Upload struct {
	ID    int64
	Store any
	Files map[string]SharedFile
}

// Ledger is the shared-file ledger of one operator instance's incremental
// checkpoints. Every method is an event; what the caller must do comes
// back as a result. Methods are not safe for concurrent use: the caller
// serializes them (the asynchronous part reports Uploaded under its lock).
//
// Rules (Flink's incremental RocksDB checkpoints):
//
//   - A checkpoint refers only to the files of its base: the last
//     checkpoint the instance knows complete (or the checkpoint restored).
//     Files of a pending or aborted checkpoint are never reused.
//   - Complete(n) makes n's upload the base, if n's upload is known, and
//     forgets every pending checkpoint up to n (subsumed).
//   - A local checkpoint directory (chk-n) goes once n is released
//     without local recovery, aborted, or subsumed by a completion; with
//     local recovery the base's stays, and newer ones at Close (one of
//     them may have completed without the notice reaching the task).
type Ledger struct {
	keepLocal bool
	base      Upload
	pending   map[int64]Upload
}

// NewLedger returns the ledger of an instance; keepLocal is local recovery.
func NewLedger(keepLocal bool) *Ledger {
	return &Ledger{keepLocal: keepLocal, pending: make(map[int64]Upload)}
}

// Base returns the upload the next checkpoint may refer to (Files nil:
// none, upload everything).
func (l *Ledger) Base() Upload { return l.base }

// Pending returns the checkpoints uploaded and not yet known complete or
// aborted, in order.
func (l *Ledger) Pending() []int64 { return slices.Sorted(maps.Keys(l.pending)) }

// Uploaded records that checkpoint id's asynchronous part uploaded up.
func (l *Ledger) Uploaded(up Upload) { l.pending[up.ID] = up }

// Released is the end of checkpoint id's asynchronous part (or its
// abandonment): it reports whether its local directory goes now.
func (l *Ledger) Released(int64) (removeLocal bool) { return !l.keepLocal }

// Complete records that checkpoint id completed; local lists the local
// checkpoint directories present. It returns those to remove.
func (l *Ledger) Complete(id int64, local []int64) (remove []int64) {
	if up, ok := l.pending[id]; ok {
		l.base = up
	}
	for p := range l.pending {
		if p <= id {
			delete(l.pending, p)
		}
	}
	return filter(local, func(c int64) bool { return c <= id && c != l.base.ID })
}

// Aborted records that checkpoint id aborted; local lists the local
// checkpoint directories present. It returns those to remove.
func (l *Ledger) Aborted(id int64, local []int64) (remove []int64) {
	delete(l.pending, id)
	return filter(local, func(c int64) bool { return c == id })
}

// Restored makes the checkpoint restored the base: its shared files are
// not uploaded again.
func (l *Ledger) Restored(up Upload) { l.base = up }

// Close returns the local checkpoint directories to remove when the
// instance closes: all of them without local recovery, else those older
// than the base.
func (l *Ledger) Close(local []int64) (remove []int64) {
	if !l.keepLocal {
		return slices.Clone(local)
	}
	return filter(local, func(c int64) bool { return c < l.base.ID })
}

func filter(ids []int64, keep func(int64) bool) []int64 {
	var out []int64
	for _, id := range ids {
		if keep(id) {
			out = append(out, id)
		}
	}
	return out
}
