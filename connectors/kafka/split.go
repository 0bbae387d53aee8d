package kafka

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/weirstream/weir/connector"
)

// partitionSplit is a topic partition as a split. Its Data (JSON) holds the
// topic, the partition and the stop offset, so that a restored job stops
// where the first run meant to; its Position holds the next offset to read
// (8 bytes, big-endian).
type partitionSplit struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Stop is the offset at which the split ends (records at Stop and
	// after are not read); -1 reads on for ever.
	Stop int64 `json:"stop"`
}

// splitID names the split of a topic partition: "topic/partition". A
// topic name cannot hold "/", so the name is unambiguous.
func splitID(topic string, partition int32) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10)
}

func (p partitionSplit) state(next int64) connector.SplitState {
	data, _ := json.Marshal(p) // plain fields: cannot fail
	return connector.SplitState{
		ID:       splitID(p.Topic, p.Partition),
		Data:     data,
		Position: binary.BigEndian.AppendUint64(nil, uint64(next)),
	}
}

// decodeSplit reads a split state back; it checks everything a checkpoint
// written by another version or edited by hand could get wrong.
func decodeSplit(st connector.SplitState) (partitionSplit, int64, error) {
	var p partitionSplit
	if err := json.Unmarshal(st.Data, &p); err != nil {
		return p, 0, fmt.Errorf("split %q: Data is not a Kafka partition (%v)", st.ID, err)
	}
	if p.Topic == "" || p.Partition < 0 || p.Stop < -1 {
		return p, 0, fmt.Errorf("split %q: Data %s: want a topic, a partition >= 0 and a stop offset >= -1", st.ID, st.Data)
	}
	if id := splitID(p.Topic, p.Partition); id != st.ID {
		return p, 0, fmt.Errorf("split %q: Data names partition %s", st.ID, id)
	}
	if len(st.Position) != 8 {
		return p, 0, fmt.Errorf("split %q: Position has %d bytes, want 8 (an offset)", st.ID, len(st.Position))
	}
	next := int64(binary.BigEndian.Uint64(st.Position))
	if next < 0 {
		return p, 0, fmt.Errorf("split %q: negative offset %d", st.ID, next)
	}
	return p, next, nil
}
