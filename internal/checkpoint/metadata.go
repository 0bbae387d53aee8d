package checkpoint

// Metadata is the content of a checkpoint's or savepoint's _metadata file:
// the commit point of a checkpoint, listing every piece of state it holds.
// It refers to state files by paths relative to the checkpoint's own
// directory (exclusive files) or to the job directory (shared files, later),
// so that a savepoint directory can be moved as a whole.
type Metadata struct {
	// Version is the format version of the encoding (MetadataVersion).
	Version int    `json:"version"`
	JobID   string `json:"jobId"`
	ID      int64  `json:"id"`
	Kind    Kind   `json:"kind"`
	// Timestamp is the trigger time, epoch milliseconds.
	Timestamp int64 `json:"timestamp"`
	// MaxParallelism is the number of key groups of the job's keyed operators.
	MaxParallelism int `json:"maxParallelism"`
	// Operators holds the state of every operator with state, by uid.
	Operators []OperatorState `json:"operators"`
}

// MetadataVersion is the newest format version this code writes and reads.
// Version 2 adds incremental keyed state handles (KeyedStateHandle.Files),
// version 3 changelog segments in them (KeyedStateHandle.Changelog, which a
// version-2 reader would ignore, restoring a stale state), version 4 the
// channel state of unaligned checkpoints (SubtaskState.Channels, which an
// older reader would ignore, losing the in-flight records); metadata is
// written in the oldest version that holds it, which older weirs read.
// Versions MinMetadataVersion..MetadataVersion are read.
const MetadataVersion = 4

// MinMetadataVersion is the oldest format version this code reads.
const MinMetadataVersion = 1

// versionFor returns the oldest format version that can hold m.
func versionFor(m *Metadata) int {
	v := 1
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			if st.Channels != nil {
				return 4
			}
		}
	}
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			for _, h := range st.Keyed {
				if h.Changelog != 0 {
					return 3
				}
				if h.Incremental() || len(h.Files) > 0 {
					v = 2
				}
			}
		}
	}
	return v
}

// OperatorState is the state of all subtasks of one operator.
type OperatorState struct {
	UID         string `json:"uid"`
	Name        string `json:"name"`
	Parallelism int    `json:"parallelism"`
	// Subtasks are indexed by subtask.
	Subtasks []SubtaskState `json:"subtasks"`
}

// SubtaskState is the state one subtask of an operator snapshotted.
type SubtaskState struct {
	Subtask int `json:"subtask"`
	// Keyed holds keyed state, each handle covering a range of key groups.
	Keyed []KeyedStateHandle `json:"keyed,omitempty"`
	// Splits are a source's unfinished splits with their positions.
	Splits []SplitState `json:"splits,omitempty"`
	// Committables are a two-phase-commit sink's pre-committed transactions
	// not yet known to be committed.
	Committables []Committable `json:"committables,omitempty"`
	// Lists are operator list states by name (redistributed on rescale).
	Lists []ListState `json:"lists,omitempty"`
	// Broadcast are broadcast states by name: every subtask writes its own
	// copy, and on restore each new subtask gets one copy.
	Broadcast []BroadcastState `json:"broadcast,omitempty"`
	// Channels is the channel state of an unaligned checkpoint: the
	// records in flight in the task's channels, kept by the task's head
	// operator. Written only with format version 4.
	Channels *ChannelState `json:"channels,omitempty"`
}

// ChannelState is one task's channel state in an unaligned checkpoint: a
// file (or inline bytes) holding the records of each of its channels one
// after the other, and where each channel's part is.
type ChannelState struct {
	// Path is relative to the checkpoint directory; empty when Inline is set.
	Path   string `json:"path,omitempty"`
	Inline []byte `json:"inline,omitempty"`
	// Size and CRC (Castagnoli) of the file or of Inline.
	Size     int64                `json:"size"`
	CRC      uint32               `json:"crc"`
	Channels []ChannelStateHandle `json:"channels"`
}

// ChannelStateHandle is the part of a ChannelState of one channel.
type ChannelStateHandle struct {
	// Output: records the task had queued for the consumer when its
	// unaligned barrier overtook them (replayed by the producer); else
	// input: records the task read from the channel after its snapshot and
	// before the channel's barrier (replayed by the consumer).
	Output bool `json:"output,omitempty"`
	// Edge names the edge ("uid[:side]->uid/input"); Producer and Consumer
	// are the subtasks the channel connects.
	Edge     string `json:"edge"`
	Producer int    `json:"producer"`
	Consumer int    `json:"consumer"`
	// Producers and Consumers are the parallelisms of the edge's ends when
	// the checkpoint was taken.
	Producers int `json:"producers"`
	Consumers int `json:"consumers"`
	// Offset and Length locate the records in the file; each record is its
	// timestamp (a zig-zag varint) and its encoding by the edge's codec,
	// or, with NoTimestamps (no record had one), its encoding alone.
	NoTimestamps bool  `json:"no_timestamps,omitempty"`
	Offset       int64 `json:"offset"`
	Length       int64 `json:"length"`
	Records      int64 `json:"records"`
}

// Sizes returns the bytes of the full state s refers to (the files of its
// keyed handles, shared or not, and its inline state) and of its inline
// state alone (inline keyed handles, operator list and broadcast state,
// which travel in the metadata).
func (s SubtaskState) Sizes() (full, inline int64) {
	for _, h := range s.Keyed {
		if h.Inline != nil {
			inline += int64(len(h.Inline))
			continue
		}
		full += h.Size
	}
	for _, l := range s.Lists {
		for _, e := range l.Entries {
			inline += int64(len(e))
		}
	}
	for _, b := range s.Broadcast {
		for _, e := range b.Entries {
			inline += int64(len(e.Key) + len(e.Value))
		}
	}
	if c := s.Channels; c != nil {
		if c.Path == "" {
			inline += int64(len(c.Inline))
		} else {
			full += c.Size
		}
	}
	return full + inline, inline
}

// SplitState mirrors connector.SplitState (this package imports nothing of
// the runtime's).
type SplitState struct {
	ID       string `json:"id"`
	Data     []byte `json:"data,omitempty"`
	Position []byte `json:"position,omitempty"`
}

// Committable mirrors connector.Committable.
type Committable struct {
	CheckpointID int64  `json:"checkpointId"`
	Subtask      int    `json:"subtask"`
	Data         []byte `json:"data"`
}

// ListState is one named operator list state of a subtask.
type ListState struct {
	Name string `json:"name"`
	// Union: on restore every subtask gets every entry of every subtask;
	// otherwise entries are split evenly.
	Union   bool     `json:"union,omitempty"`
	Entries [][]byte `json:"entries"`
}

// BroadcastState is one named broadcast state (a map) of a subtask, inline:
// broadcast state is small by design (rules, configuration). Keys and values
// are encoded by the state's codecs; entries are sorted by key bytes.
type BroadcastState struct {
	Name    string     `json:"name"`
	Entries []MapEntry `json:"entries"`
}

// MapEntry is one encoded entry of a map state.
type MapEntry struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
}

// KeyedStateHandle points at a file holding the keyed state of a range of
// key groups, or holds it inline.
type KeyedStateHandle struct {
	// Backend is the backend that wrote the file ("heap").
	Backend string `json:"backend"`
	// Path is relative to the checkpoint directory; empty when Inline is set.
	Path   string `json:"path,omitempty"`
	Inline []byte `json:"inline,omitempty"`
	// Size and CRC (Castagnoli) of the file or of Inline.
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc"`
	// StartGroup and EndGroup give the half-open key-group range covered.
	StartGroup int `json:"startGroup"`
	EndGroup   int `json:"endGroup"`
	// Offsets[i] is where key group StartGroup+i starts in the file, so that
	// a rescaled subtask reads only the groups it owns.
	Offsets []int64 `json:"offsets,omitempty"`

	// Files, for an incremental handle (Backend IncrementalBackend; Path and
	// Inline empty, Size the sum of the files' sizes, CRC 0), are the files
	// of a native pebble checkpoint of the key groups [StartGroup, EndGroup):
	// its data files under the job's shared/ directory (often uploaded by an
	// earlier checkpoint) and its other files in the checkpoint's own
	// directory. Written only with format version 2.
	Files []StateFile `json:"files,omitempty"`
	// Base is the checkpoint whose shared files an incremental handle could
	// reuse (its last checkpoint known complete when it was taken), 0 for
	// none. The job master's shared-state registry uses it to know which
	// shared files a checkpoint still in flight may refer to.
	Base int64 `json:"base,omitempty"`
	// Changelog, for an incremental handle of the changelog mode
	// (Options.Checkpointing.Changelog), is the number of files at the end
	// of Files that are segments of the backend's changelog, in the order
	// they are replayed on top of the native checkpoint the other files
	// make (the last materialization): the writes made since it, up to
	// this checkpoint's barrier. Each is a shared file named
	// "changelog-<seq>". Written only with format version 3.
	Changelog int `json:"changelog,omitempty"`
}

// IncrementalBackend is the Backend of an incremental keyed state handle:
// a native pebble checkpoint listed in KeyedStateHandle.Files.
const IncrementalBackend = "pebble-incremental"

// Incremental reports whether h is an incremental handle.
func (h KeyedStateHandle) Incremental() bool { return h.Backend == IncrementalBackend }

// StateFile is one file of an incremental keyed state handle.
type StateFile struct {
	// Name is the file's name in the native checkpoint directory
	// ("000012.sst", "MANIFEST-000008").
	Name string `json:"name"`
	// Path is where the file is, relative to the checkpoint directory, as
	// KeyedStateHandle.Path: "../shared/…" for a shared file.
	Path string `json:"path"`
	// Size and CRC (Castagnoli) of the file.
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc"`
	// Shared marks a file of the job's shared/ directory: immutable, named
	// uniquely, referenced by every checkpoint that lists it, and deleted by
	// the shared-state registry once no retained checkpoint needs it.
	Shared bool `json:"shared,omitempty"`
}
