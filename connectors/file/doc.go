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
// to the offset and goes on with the next line. The files must not change
// while a job, or a job restored from its checkpoints, reads them.
//
// A line ends at '\n'; one '\r' before it is dropped, so CRLF files read like
// LF files. The last line of a file needs no '\n'. Empty lines are read as "".
// Lines may be longer than the read buffer.
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
// after a restore, into the part files of the new attempt. The exactly-once
// file sink, which writes pending files and renames them into place when
// their checkpoint completes, is a separate sink. A record holding '\n'
// spans several lines of the part file.
//
// # Usage
//
//	lines := env.FromSource("lines", file.Lines("in/"))
//	counts.SinkTo("out", file.PartFilesOf("out/", func(c WordCount) string {
//		return fmt.Sprintf("%s,%d", c.Word, c.Count)
//	}, file.Options{}))
package file
