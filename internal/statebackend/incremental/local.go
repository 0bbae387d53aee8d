package incremental

import (
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/internal/checkpoint"
)

// restoreLocal fills dir from the local copy of the checkpoint restored,
// if local recovery is on and the copy holds exactly the handle's files,
// each with its size and CRC.
//
// The data files are not read: they are immutable hard links of the
// database's files, and pebble checks its blocks' checksums as it reads
// them. A data file is trusted when the record written with the checkpoint
// (writeLocalRecord) gives it the handle's size and CRC and the file still
// has the size and modification time recorded; the small MANIFEST, OPTIONS
// and marker files, and every file of a copy without a record, are read
// and checked against the CRC. Any mismatch, or an error reading the copy,
// means a download.
func (s *incrementalState) restoreLocal(from Source, h checkpoint.KeyedStateHandle, dir string) bool {
	if !s.keepLocal || from.Savepoint || h.StartGroup != s.groups.Start || h.EndGroup != s.groups.End {
		return false
	}
	local := s.checkpointDir(from.ID)
	names, err := s.fs.List(local)
	if err != nil {
		return false
	}
	record, _ := s.readLocalRecord(local) // nil if missing or unreadable: check every CRC
	n := len(names)
	if slices.Contains(names, localRecordName) {
		n--
	}
	if n != len(h.Files) {
		return false
	}
	for _, f := range h.Files {
		name := filepath.Join(local, f.Name)
		if r, ok := record[f.Name]; ok && isDataFile(f.Name) {
			if r.size != f.Size || r.crc != f.CRC || !s.sameFile(r, name) {
				return false
			}
			continue
		}
		if ok, _ := s.fileMatches(name, f.Size, f.CRC); !ok {
			return false
		}
	}
	for _, f := range h.Files {
		src, dst := filepath.Join(local, f.Name), filepath.Join(dir, f.Name)
		// Data files never change: a hard link is a copy. The others are
		// rewritten by the database opened on them: copied.
		if isDataFile(f.Name) && s.fs.Link(src, dst) == nil {
			continue
		}
		if err := vfs.Copy(s.fs, src, dst); err != nil {
			_ = s.fs.RemoveAll(dir)
			_ = s.fs.MkdirAll(dir, 0o755)
			return false
		}
	}
	return true
}

// localRecordName is the file, in a local checkpoint directory, that
// records its data files as the asynchronous part uploaded them.
const localRecordName = ".weir-local-files"

// localFile is a data file of a local checkpoint as recorded.
type localFile struct {
	size  int64
	crc   uint32 // of the bytes uploaded (or referred to) for it
	mtime int64  // UnixNano of the local file
}

// sameFile reports whether the file name still has the recorded size and
// modification time: it is the file recorded, not one truncated, rewritten
// or put in its place since.
func (s *incrementalState) sameFile(r localFile, name string) bool {
	fi, err := s.fs.Stat(name)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == r.size && fi.ModTime().UnixNano() == r.mtime
}

// writeLocalRecord records the data files of the local checkpoint in dir
// with the size and CRC of the checkpoint's handle and the size and
// modification time they have now, one "name size crc mtime" line each. It
// is written after the upload, which computed the CRCs from the files.
func (s *incrementalState) writeLocalRecord(dir string, files []checkpoint.StateFile) error {
	var b strings.Builder
	for _, f := range files {
		if !isDataFile(f.Name) {
			continue
		}
		fi, err := s.fs.Stat(filepath.Join(dir, f.Name))
		if err != nil {
			return err
		}
		if fi.Size() != f.Size {
			return fmt.Errorf("%s: %d bytes, uploaded %d", f.Name, fi.Size(), f.Size)
		}
		fmt.Fprintf(&b, "%s %d %d %d\n", f.Name, f.Size, f.CRC, fi.ModTime().UnixNano())
	}
	tmp := filepath.Join(dir, localRecordName+".tmp")
	if err := s.writeFile(tmp, []byte(b.String())); err != nil {
		return err
	}
	return s.fs.Rename(tmp, filepath.Join(dir, localRecordName))
}

func (s *incrementalState) writeFile(name string, data []byte) error {
	f, err := s.fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readLocalRecord reads what writeLocalRecord wrote in dir.
func (s *incrementalState) readLocalRecord(dir string) (map[string]localFile, error) {
	f, err := s.fs.Open(filepath.Join(dir, localRecordName))
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	out := make(map[string]localFile)
	for line := range strings.Lines(string(data)) {
		var name string
		var lf localFile
		if _, err := fmt.Sscanf(line, "%s %d %d %d\n", &name, &lf.size, &lf.crc, &lf.mtime); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", localRecordName, line, err)
		}
		out[name] = lf
	}
	return out, nil
}

// fileMatches reports whether the file has the size and CRC-32C given.
func (s *incrementalState) fileMatches(name string, size int64, crc uint32) (bool, error) {
	f, err := s.fs.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(h, f)
	return err == nil && n == size && h.Sum32() == crc, err
}
