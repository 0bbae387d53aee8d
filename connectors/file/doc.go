// Package file reads and writes files of lines on a local (or mounted)
// file system.
//
// # Source
//
// Lines reads the lines of one file, or of every regular file directly in a
// directory (not in its subdirectories; names starting with "." or "_", such
// as ".part.tmp" or "_SUCCESS", are skipped), in name order. Each file is one
// split whose ID and Data are its path, so the splits of a directory are
// spread over the subtasks file by file and a subtask reads its files one
// after the other. The position in a split is the byte offset of the next
// unread line, which makes the source exactly-once: a restored reader seeks
// to the offset and goes on with the next line. Without LinesOptions.Watch
// (below) the files must not change while a job, or a job restored from
// its checkpoints, reads them.
//
// A line ends at '\n'; one '\r' before it is dropped, so CRLF files read like
// LF files. The last line of a file needs no '\n'. Empty lines are read as "".
// Lines may be longer than the read buffer.
//
// # Watching a directory
//
// With LinesOptions.Watch set (weir run wordcount --watch 1s), Lines
// follows a directory, as Flink's FileSource does with
// monitorContinuously: the source is unbounded, lists the directory every
// Watch interval, reads the files that appear and the lines appended to
// the files it has read, and never ends. Only complete lines are emitted:
// a last line without its '\n' waits until the newline is written. Files
// are chosen by LinesOptions.Glob (default: every name not starting with
// "." or "_"; names starting with "." are never read, as they are files
// being written).
//
// There is no coordinator to hand out files found later, so each reader
// lists the directory itself and takes the files whose base name hashes
// (FNV-1a) to its subtask modulo the parallelism: the source is a
// connector.SplitDiscoverer with that owner rule, and the runtime deals
// the files of a checkpoint by the same rule, so no file is read by two
// readers at any parallelism. A reader's checkpoint state is one split per
// file it has seen (read to its end or not), with the offset after its
// last emitted line and the file's device and inode: a restored job, at
// the parallelism of its checkpoint or another, neither rereads a file nor
// misses its new lines, and reads a file the checkpoint does not hold (one
// that appeared later, or while the job was down) from its start.
// Checkpoints of earlier versions (one split per reader) restore at their
// own parallelism only.
//
// Files of a watched directory may only grow. A file that is truncated,
// replaced under its name (another inode) or renamed (its inode appears
// under a new name) fails the job with an error naming it, or, with
// LinesOptions.OnChange set to ChangeIsNewFile, is read again from its
// start as a new file, with a warning in the log: never twice silently.
// A deleted file is forgotten (if it comes back it is new). A watched
// directory that does not exist fails Splits; one that vanishes while the
// job runs fails the reader, naming it.
//
// # Sink
//
// PartFiles writes each record as one line to a part file per subtask,
// named part-<subtask>-<attempt> (see PartFileName) in a directory that it
// creates if needed. Lines are buffered and reach the file on Flush, that is
// before each checkpoint and at the end of input (when they are also synced
// to disk). Close does not flush: records written after the last Flush are
// dropped, as the source replays them after a restore.
//
// This sink is at-least-once: it does not implement connector.PreCommitter,
// so records written after the last completed checkpoint are written again
// after a restore, into the part files of the new attempt. ExactlyOnce,
// below, is the exactly-once file sink. A record holding '\n' spans several
// lines of the part file.
//
// # Exactly-once sink
//
// ExactlyOnce (and ExactlyOnceOf) is a two-phase-commit sink, like Flink's
// FileSink: its writers implement connector.PreCommitter and the sink
// implements connector.Committer. Names starting with "." stay hidden from
// readers of the directory (the Lines source among them) until their
// checkpoint completes:
//
//	.part-<subtask>-<attempt>-<token>.inprogress   being written; <token> is random per writer
//	.part-<subtask>-<attempt>-<checkpoint>.pending  pre-committed, waiting for its checkpoint
//	part-<subtask>-<attempt>-<checkpoint>           committed (see ExactlyOnceFileName)
//
// with subtask, attempt and checkpoint id zero-padded to 5, 4 and 10
// digits, so that a subtask's files sort in the order they were written.
// Final names differ across subtasks, checkpoints and attempts, so no
// commit ever replaces an earlier file; the sink refuses to overwrite one.
//
//   - Write appends a line to the in-progress file, through a buffer;
//     Flush writes the buffer to the file. Neither makes anything visible.
//   - PreCommit(n) flushes and fsyncs the in-progress file, renames it to
//     its pending name, fsyncs the directory, and returns a JSON committable
//     naming the pending file, its final name and its size. The next record
//     opens a new in-progress file. A checkpoint with no new record creates
//     no file. The committable also lists the writer's earlier pending files
//     that are still there (their checkpoint was aborted, or its commit has
//     not run yet), so that completing n commits every record written
//     before barrier n even if a checkpoint before it was aborted.
//     PreCommit returns nil when there is nothing to commit.
//   - Commit renames each pending file to its final name, then fsyncs the
//     directory. It is idempotent: a file whose pending name is gone and
//     whose final name has the expected size was committed before. A file
//     of which neither name exists is lost, reported with
//     ErrPendingFileLost. Committables with empty Data are skipped.
//   - Close removes the in-progress file: records written since the last
//     PreCommit are dropped. Pending files stay.
//   - NewWriter removes the in-progress files that earlier attempts left
//     (the writer of subtask s those of every old subtask k with
//     k % parallelism == s), never pending files: a restored checkpoint may
//     still commit them.
//   - Cleanup removes every pending file that a given set of committables
//     does not name, and every in-progress file.
//
// ExactlyOnceOptions.NoSync skips every fsync, trading durability against
// operating-system crashes for speed.
//
// The runtime's duties, for output that is exactly-once:
//
//   - Give each restart of a job a WriterContext.Attempt that no earlier run
//     writing into the directory had. (A repeated attempt and checkpoint id
//     makes PreCommit fail rather than replace a committed file.)
//   - At checkpoint n, call Flush(false) and then PreCommit(n), and store the
//     committable (nil may be stored or dropped) in checkpoint n.
//   - Once n completes, call Commit with the committables of n (and of any
//     earlier checkpoint not committed yet). Commit may run on any
//     goroutine, also while the writers run, and concurrently with itself.
//   - On restore from checkpoint n, call Commit with every committable of
//     n, then Cleanup with the same committables (or none: they are
//     committed), before creating the writers; Cleanup must never run while
//     a writer of the sink is open. Without Cleanup, the pending files of
//     checkpoints that never completed stay, hidden, on disk.
//   - At the end of input, call Flush(true), then PreCommit of a final
//     checkpoint, Commit once it completes, then Close. Records written after
//     the last PreCommit are never visible: Close drops them.
//
// A directory belongs to one sink of one job: two sinks writing into it
// would remove each other's in-progress files and clash on final names.
//
// # Usage
//
//	lines := env.FromSource("lines", file.Lines("in/"))
//	followed := env.FromSource("lines", file.Lines("in/").WithOptions(file.LinesOptions{Watch: time.Second}))
//	counts.SinkTo("out", file.PartFilesOf("out/", func(c WordCount) string {
//		return fmt.Sprintf("%s,%d", c.Word, c.Count)
//	}, file.Options{}))
//
//	counts.SinkTo("out", file.ExactlyOnceOf("out/", formatCount, file.ExactlyOnceOptions{}))
package file
