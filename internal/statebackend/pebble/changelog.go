package pebble

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The changelog (Flink's FLIP-158, "generic log-based incremental
// checkpoints"): with a Changelog attached (SetChangelog), every write the
// backend makes to its database — a batch commit, a direct set, delete or
// range deletion — is also appended, in the order of the writes, to a local
// log file. The runtime cuts the log at each checkpoint's barrier (Rotate:
// O(buffer)), uploads the closed segment, and on restore replays the
// segments written since the last materialization (a native checkpoint of
// the database) on top of it (ReplayChangelog).
//
// The hooks are the backend's lowest-level write functions (dbSet,
// dbDelete, dbDeleteRange, commitBatch): every write of every state kind,
// of restores and of layout conversions goes through one of them, and so
// does anything built above them (a write-back cache's flushes).
//
// A segment file is a sequence of records, each an uvarint length and a
// pebble batch representation (pebble's Batch.Repr, whose format is part of
// pebble's on-disk write-ahead log format): a committed batch as it is, a
// direct write as a batch of one operation. Replay applies the records in
// order to a database opened on the materialized checkpoint, so merge
// operands (list appends) are applied exactly once: the materialization and
// the cut of the log are taken at the same instant, on the task goroutine.

// ChangelogSegmentPrefix starts the file name of every changelog segment,
// followed by its sequence number, zero-padded to 12 digits.
const ChangelogSegmentPrefix = "changelog-"

// ChangelogSegmentName returns the file name of segment seq.
func ChangelogSegmentName(seq int64) string {
	return fmt.Sprintf("%s%012d", ChangelogSegmentPrefix, seq)
}

// ParseChangelogSegmentName returns the sequence number of a segment's file
// name; ok is false for any other name.
func ParseChangelogSegmentName(name string) (seq int64, ok bool) {
	digits, ok := strings.CutPrefix(name, ChangelogSegmentPrefix)
	if !ok || len(digits) != 12 {
		return 0, false
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || seq < 0 {
		return 0, false
	}
	return seq, true
}

// changelogBufferSize is the write buffer of the open segment.
const changelogBufferSize = 256 << 10

// Changelog is the local, segmented log of a backend's writes. It is not
// safe for concurrent use: it is written on the task goroutine (through the
// backend) and rotated there too. Closed segments are plain files that
// other goroutines may read and remove.
type Changelog struct {
	fs   vfs.FS
	dir  string
	seq  int64 // the open segment
	f    vfs.File
	w    *bufio.Writer
	size int64 // bytes written to the open segment
	err  error // the first write error: every later Rotate returns it

	hdr [binary.MaxVarintLen64]byte
	rec []byte // a one-operation batch being encoded
}

// ChangelogSegment is a closed segment.
type ChangelogSegment struct {
	Seq  int64
	Path string // the local file
	Size int64
}

// OpenChangelog creates dir in fs (nil: vfs.Default) if needed and opens
// segment first in it, empty (an existing file of that name is truncated).
func OpenChangelog(fs vfs.FS, dir string, first int64) (*Changelog, error) {
	if fs == nil {
		fs = vfs.Default
	}
	if first < 0 {
		return nil, fmt.Errorf("pebble changelog: first segment %d: want >= 0", first)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pebble changelog: %w", err)
	}
	c := &Changelog{fs: fs, dir: dir, seq: first}
	if err := c.open(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Changelog) open() error {
	f, err := c.fs.Create(c.SegmentPath(c.seq), vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("pebble changelog: %w", err)
	}
	c.f, c.size = f, 0
	if c.w == nil {
		c.w = bufio.NewWriterSize(f, changelogBufferSize)
	} else {
		c.w.Reset(f)
	}
	return nil
}

// SegmentPath is the local file of segment seq.
func (c *Changelog) SegmentPath(seq int64) string {
	return filepath.Join(c.dir, ChangelogSegmentName(seq))
}

// Seq is the sequence number of the open segment: the writes from now on
// go into it.
func (c *Changelog) Seq() int64 { return c.seq }

// OpenSize is the number of bytes written to the open segment so far.
func (c *Changelog) OpenSize() int64 { return c.size }

// Rotate closes the open segment and opens the next one: the writes before
// the call are in the segment returned, those after it in the next. It
// returns the first error any write to the log met since it was opened:
// a log with a hole in it must not be used.
func (c *Changelog) Rotate() (ChangelogSegment, error) {
	if c.err != nil {
		return ChangelogSegment{}, c.err
	}
	if c.f == nil {
		return ChangelogSegment{}, errors.New("pebble changelog: closed")
	}
	seg := ChangelogSegment{Seq: c.seq, Path: c.SegmentPath(c.seq), Size: c.size}
	err := c.w.Flush()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	if err != nil {
		c.err = fmt.Errorf("pebble changelog: segment %d: %w", seg.Seq, err)
		return ChangelogSegment{}, c.err
	}
	c.seq++
	if err := c.open(); err != nil {
		c.err = err
		return ChangelogSegment{}, err
	}
	return seg, nil
}

// Close closes the open segment (its file stays, unflushed writes are
// dropped: a segment is only used once Rotate returned it).
func (c *Changelog) Close() error {
	if c.f == nil {
		return nil
	}
	err := c.f.Close()
	c.f = nil
	return err
}

// Remove removes the local files of the closed segments below seq.
func (c *Changelog) Remove(below int64) {
	names, err := c.fs.List(c.dir)
	if err != nil {
		return
	}
	for _, name := range names {
		if s, ok := ParseChangelogSegmentName(name); ok && s < below && s < c.seq {
			_ = c.fs.Remove(filepath.Join(c.dir, name))
		}
	}
}

// append writes one record: the representation of a batch.
func (c *Changelog) append(repr []byte) {
	if c.err != nil || c.f == nil {
		return
	}
	n := binary.PutUvarint(c.hdr[:], uint64(len(repr)))
	if _, err := c.w.Write(c.hdr[:n]); err != nil {
		c.err = fmt.Errorf("pebble changelog: segment %d: %w", c.seq, err)
		return
	}
	if _, err := c.w.Write(repr); err != nil {
		c.err = fmt.Errorf("pebble changelog: segment %d: %w", c.seq, err)
		return
	}
	c.size += int64(n + len(repr))
}

// batchHeaderLen is the length of a batch representation's header: an
// 8-byte sequence number and a 4-byte count, little-endian.
const batchHeaderLen = 12

// appendOp writes one record: a batch of one operation of kind, with key
// and, for a set or a range deletion, value (the end key of the range).
func (c *Changelog) appendOp(kind pebble.InternalKeyKind, key, value []byte, withValue bool) {
	r := append(c.rec[:0], make([]byte, batchHeaderLen)...)
	binary.LittleEndian.PutUint32(r[8:], 1)
	r = append(r, byte(kind))
	r = binary.AppendUvarint(r, uint64(len(key)))
	r = append(r, key...)
	if withValue {
		r = binary.AppendUvarint(r, uint64(len(value)))
		r = append(r, value...)
	}
	c.rec = r
	c.append(r)
}

// SetChangelog attaches c to the backend: from now on every write to the
// database is also appended to it. nil detaches the log. Call
// FlushWriteCache first: writes still in the write-back cache reach the
// log only when they are written back.
func (b *Backend[K]) SetChangelog(c *Changelog) { b.changelog = c }

// CutChangelog cuts the attached changelog at this instant: it writes the
// write-back cache's dirty entries to the database (and the log), then
// closes the open segment (Changelog.Rotate) and returns it.
func (b *Backend[K]) CutChangelog() (ChangelogSegment, error) {
	if b.changelog == nil {
		return ChangelogSegment{}, errors.New("pebble backend: no changelog attached")
	}
	if err := b.FlushWriteCache(); err != nil {
		return ChangelogSegment{}, err
	}
	return b.changelog.Rotate()
}

// FlushWriteCache writes the dirty entries of the write-back cache to the
// database (and so to the changelog): a checkpoint's cut of the log must
// follow it, so that the segment before the cut holds every write made
// before the barrier.
func (b *Backend[K]) FlushWriteCache() error {
	if b.closed {
		return fmt.Errorf("flush: %w", ErrClosed)
	}
	return b.flushCache()
}

// dbSet, dbDelete, dbDeleteRange and commitBatch are the only ways the
// backend writes to its database: each writes and then, with a changelog
// attached, logs the write.

func (b *Backend[K]) dbSet(key, value []byte) error {
	if err := b.db.Set(key, value, pebble.NoSync); err != nil {
		return err
	}
	if b.changelog != nil {
		b.changelog.appendOp(pebble.InternalKeyKindSet, key, value, true)
	}
	return nil
}

func (b *Backend[K]) dbDelete(key []byte) error {
	if err := b.db.Delete(key, pebble.NoSync); err != nil {
		return err
	}
	if b.changelog != nil {
		b.changelog.appendOp(pebble.InternalKeyKindDelete, key, nil, false)
	}
	return nil
}

func (b *Backend[K]) dbDeleteRange(lo, hi []byte) error {
	if err := b.db.DeleteRange(lo, hi, pebble.NoSync); err != nil {
		return err
	}
	if b.changelog != nil {
		b.changelog.appendOp(pebble.InternalKeyKindRangeDelete, lo, hi, true)
	}
	return nil
}

// commitBatch commits batch (made by b.db.NewBatch); the caller resets or
// closes it.
func (b *Backend[K]) commitBatch(batch *pebble.Batch) error {
	if err := batch.Commit(pebble.NoSync); err != nil {
		return err
	}
	if b.changelog != nil && !batch.Empty() {
		b.changelog.append(batch.Repr())
	}
	return nil
}

// ReplayChangelog applies the changelog segments (local files, in order)
// to the native checkpoint in dir, which becomes the database state as of
// the end of the last segment. It opens dir as a database with the
// backend's options (the list merger), applies every record and flushes.
// A record that does not decode is an error wrapping ErrCorruptChangelog.
// Call it before RestoreNative, on the directories it is then given.
func (b *Backend[K]) ReplayChangelog(dir string, segments []string) (err error) {
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, b.opts.dbOptions(cache, false))
	if err != nil {
		return fmt.Errorf("pebble backend: replay changelog: open %s: %w", dir, err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("pebble backend: replay changelog: %w", cerr)
		}
	}()
	for _, seg := range segments {
		if err := replaySegment(b.opts.FS, db, seg); err != nil {
			return fmt.Errorf("pebble backend: replay changelog segment %s: %w", filepath.Base(seg), err)
		}
	}
	if err := db.Flush(); err != nil { // no write-ahead log: Close would drop the memtable
		return fmt.Errorf("pebble backend: replay changelog: flush: %w", err)
	}
	return nil
}

// ErrCorruptChangelog is wrapped by the errors of a changelog segment that
// does not decode.
var ErrCorruptChangelog = errors.New("corrupt changelog segment")

func replaySegment(fs vfs.FS, db *pebble.DB, name string) error {
	f, err := fs.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, changelogBufferSize)
	for i := 0; ; i++ {
		n, err := binary.ReadUvarint(r)
		if err == io.EOF {
			return nil
		}
		if err != nil || n < batchHeaderLen || n > 1<<31 {
			return fmt.Errorf("%w: record %d: bad length %d (%v)", ErrCorruptChangelog, i, n, err)
		}
		repr := make([]byte, n)
		if _, err := io.ReadFull(r, repr); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrCorruptChangelog, i, err)
		}
		batch := db.NewBatch()
		if err := batch.SetRepr(repr); err != nil {
			batch.Close()
			return fmt.Errorf("%w: record %d: %v", ErrCorruptChangelog, i, err)
		}
		err = db.Apply(batch, pebble.NoSync)
		batch.Close()
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
	}
}
