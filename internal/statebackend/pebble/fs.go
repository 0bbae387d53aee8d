package pebble

import "github.com/cockroachdb/pebble/v2/vfs"

// noSyncFS is a file system whose files and directories never sync to
// stable storage. The database is a working copy that no one reopens after
// a crash (the job restores from a checkpoint into a new directory), so a
// sync would only wait for the disk: with small memtables, every flush and
// compaction would wait several times.
type noSyncFS struct{ vfs.FS }

func (fs noSyncFS) Unwrap() vfs.FS { return fs.FS }

func (fs noSyncFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.Create(name, category))
}

func (fs noSyncFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return noSync(fs.FS.OpenReadWrite(name, category, opts...))
}

func (fs noSyncFS) OpenDir(name string) (vfs.File, error) {
	return noSync(fs.FS.OpenDir(name))
}

func (fs noSyncFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.ReuseForWrite(oldname, newname, category))
}

func noSync(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                { return nil }
func (noSyncFile) SyncData() error            { return nil }
func (noSyncFile) SyncTo(int64) (bool, error) { return true, nil }
