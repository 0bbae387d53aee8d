package config

import (
	"math"
	"time"
)

// Kind is the type of a key's value.
type Kind int

const (
	// Duration is a Go duration (1m30s) or a Flink one (10 s, 500 ms; a
	// bare number is milliseconds), bounded by Min and Max in nanoseconds.
	Duration Kind = iota
	// Int is a decimal integer in [Min, Max].
	Int
	// Bool is true or false.
	Bool
	// String is any non-empty text.
	String
	// Enum is one of Values, or an alias of one (Aliases).
	Enum
	// Host is the host part of a host:port flag (Flink's rest.address).
	Host
	// Port is the port part of a host:port flag (Flink's rest.port), an
	// integer in [Min, Max].
	Port
)

// Key is one setting of the file and the flag it sets.
type Key struct {
	// Name is Flink's key, such as "execution.checkpointing.interval".
	Name string
	// Flag is the flag the key sets, without dashes. Host and Port keys
	// share a host:port flag.
	Flag string
	Kind Kind
	// Min and Max bound Int and Port values, and Duration values in
	// nanoseconds. Max 0 means no upper bound.
	Min, Max int64
	// ZeroOK accepts 0 besides [Min, Max] (0 meaning "off").
	ZeroOK bool
	// Values are an Enum's values, as the flag takes them.
	Values []string
	// Aliases are other spellings of an Enum's values (Flink's), lower
	// case with '-' for '_', mapped to the value the flag takes.
	Aliases map[string]string
	// Accepts says in words what the key accepts, for error messages.
	Accepts string
	// AltFlag is the flag the key sets on a command that has no Flag
	// (jobmanager.rpc.address is the JobManager's --rpc-address and the
	// TaskManager's --jobmanager). Default "": none.
	AltFlag string
	// Cluster marks a key of the cluster's file, which the JobManager and
	// its TaskManagers share (as Flink's config.yaml): the role commands
	// skip it when they have no flag for it (ApplyShared).
	Cluster bool
	// MinusOne, when set, accepts Flink's -1 ("no limit") for a Duration
	// key and sets the flag to this value. Default "": -1 is refused.
	MinusOne string
}

// Keys are the keys the file may hold: what weir's commands can set
// today. A key is accepted by the commands that have its flag.
var Keys = []Key{
	{Name: "parallelism.default", Flag: "parallelism", Kind: Int, Min: 1, Max: 128,
		Accepts: "an integer from 1 to 128"},

	{Name: "execution.checkpointing.interval", Flag: "checkpoint-interval", Kind: Duration,
		Min: int64(time.Millisecond), ZeroOK: true,
		Accepts: "0 (no periodic checkpoints) or a duration of at least 1ms, such as 10s"},
	{Name: "execution.checkpointing.mode", Flag: "checkpointing-mode", Kind: Enum,
		Values:  []string{"exactly-once", "at-least-once"},
		Accepts: "EXACTLY_ONCE or AT_LEAST_ONCE (or exactly-once, at-least-once)"},
	{Name: "execution.checkpointing.timeout", Flag: "checkpoint-timeout", Kind: Duration,
		Min:     int64(time.Millisecond),
		Accepts: "a duration of at least 1ms, such as 10min"},
	{Name: "execution.checkpointing.min-pause", Flag: "checkpoint-min-pause", Kind: Duration,
		Min:     0,
		Accepts: "0 or a positive duration, such as 500ms"},
	{Name: "execution.checkpointing.max-concurrent-checkpoints", Flag: "max-concurrent-checkpoints", Kind: Int,
		Min: 1, Max: math.MaxInt32,
		Accepts: "an integer of at least 1"},
	{Name: "execution.checkpointing.tolerable-failed-checkpoints", Flag: "tolerable-failed-checkpoints", Kind: Int,
		Min: -1, Max: math.MaxInt32,
		Accepts: "an integer of at least 0, or -1 for unlimited"},
	{Name: "execution.checkpointing.unaligned.enabled", Flag: "unaligned", Kind: Bool,
		Accepts: "true or false"},
	{Name: "execution.checkpointing.aligned-checkpoint-timeout", Flag: "aligned-checkpoint-timeout", Kind: Duration,
		Min: 0, ZeroOK: true,
		Accepts: "0 (always unaligned) or a positive duration, such as 30s"},
	{Name: "execution.buffer-timeout.interval", Flag: "buffer-timeout", Kind: Duration,
		Min: int64(time.Millisecond), ZeroOK: true,
		Accepts: "0 (a flush after every record) or a duration of at least 1 ms, such as 100 ms"},
	{Name: "execution.buffer-timeout.enabled", Flag: "buffer-timeout-enabled", Kind: Bool,
		Accepts: "true or false"},
	{Name: "execution.checkpointing.savepoint-dir", Flag: "savepoint-dir", Kind: String,
		Accepts: "a directory or a storage URL (file:///path, s3://bucket/prefix)"},

	{Name: "state.backend.type", Flag: "state-backend", Kind: Enum,
		Values:  []string{"heap", "pebble"},
		Aliases: map[string]string{"hashmap": "heap", "rocksdb": "pebble"},
		Accepts: "heap or pebble (Flink's hashmap and rocksdb are read as heap and pebble)"},
	{Name: "state.checkpoints.dir", Flag: "checkpoint-dir", Kind: String,
		Accepts: "a directory or a storage URL (file:///path, s3://bucket/prefix, memory://name)"},
	{Name: "state.checkpoints.num-retained", Flag: "retained-checkpoints", Kind: Int,
		Min: 1, Max: math.MaxInt32,
		Accepts: "an integer of at least 1"},
	{Name: "state.backend.incremental", Flag: "incremental", Kind: Bool,
		Accepts: "true or false"},
	{Name: "state.changelog.enabled", Flag: "changelog", Kind: Bool,
		Accepts: "true or false"},

	{Name: "rest.address", Flag: "rest-address", Kind: Host, Cluster: true,
		Accepts: "a host name or IP address, such as 127.0.0.1"},
	{Name: "rest.port", Flag: "rest-address", Kind: Port, Min: 0, Max: 65535, Cluster: true,
		Accepts: "a port from 0 (any free port) to 65535"},

	// The cluster's processes (weir jobmanager, weir taskmanager).
	{Name: "jobmanager.rpc.address", Flag: "rpc-address", AltFlag: "jobmanager", Kind: Host, Cluster: true,
		Accepts: "a host name or IP address, such as 127.0.0.1"},
	{Name: "jobmanager.rpc.port", Flag: "rpc-address", AltFlag: "jobmanager", Kind: Port, Min: 0, Max: 65535, Cluster: true,
		Accepts: "a port from 0 (any free port) to 65535"},
	{Name: "taskmanager.numberOfTaskSlots", Flag: "slots", Kind: Int, Min: 1, Max: 1024, Cluster: true,
		Accepts: "an integer from 1 to 1024"},
	{Name: "heartbeat.interval", Flag: "heartbeat-interval", Kind: Duration, Min: int64(time.Millisecond), Cluster: true,
		Accepts: "a duration of at least 1ms, such as 1 s"},
	{Name: "heartbeat.timeout", Flag: "heartbeat-timeout", Kind: Duration, Min: int64(time.Millisecond), Cluster: true,
		Accepts: "a duration longer than heartbeat.interval, such as 6 s"},
	{Name: "slot.request.timeout", Flag: "slot-request-timeout", Kind: Duration, Min: int64(time.Millisecond), Cluster: true,
		Accepts: "a duration of at least 1ms, such as 5 min"},
	// Reactive mode (weir jobmanager --scheduler reactive; docs/cluster.md).
	{Name: "scheduler-mode", Flag: "scheduler", Kind: Enum, Cluster: true,
		Values:  []string{"default", "reactive"},
		Accepts: "reactive (or default: each job at the parallelism of its flags)"},
	{Name: "jobmanager.adaptive-scheduler.min-parallelism-increase", Flag: "min-parallelism-increase", Kind: Int,
		Min: 1, Max: math.MaxInt32, Cluster: true,
		Accepts: "an integer of at least 1"},
	{Name: "jobmanager.adaptive-scheduler.resource-stabilization-timeout", Flag: "resource-stabilization-timeout", Kind: Duration,
		Min: 0, Cluster: true,
		Accepts: "0 or a positive duration, such as 10 s"},
	{Name: "jobmanager.adaptive-scheduler.resource-wait-timeout", Flag: "resource-wait-timeout", Kind: Duration,
		Min: int64(time.Millisecond), MinusOne: "0s", Cluster: true,
		Accepts: "-1 (wait for ever, the default in reactive mode) or a duration of at least 1ms, such as 5 min"},
	{Name: "taskmanager.registration.timeout", Flag: "registration-timeout", Kind: Duration, Min: int64(time.Millisecond), Cluster: true,
		Accepts: "a duration of at least 1ms, such as 5 min"},

	// High availability of the JobManager (weir jobmanager and weir
	// taskmanager; docs/ha.md).
	{Name: "high-availability.type", Flag: "ha", Kind: Enum, Cluster: true,
		Values:  []string{"none", "etcd"},
		Accepts: "NONE or etcd (weir keeps its HA state in etcd; ZooKeeper and Kubernetes are not supported)"},
	{Name: "high-availability.etcd.endpoints", Flag: "ha-endpoints", Kind: String, Cluster: true,
		Accepts: "etcd's client endpoints, comma-separated, such as 127.0.0.1:2379"},
	{Name: "high-availability.cluster-id", Flag: "ha-cluster-id", Kind: String, Cluster: true,
		Accepts: "a name of letters, digits, '.', '_' or '-', such as prod-1"},
	{Name: "high-availability.etcd.session-ttl", Flag: "ha-session-ttl", Kind: Duration, Min: int64(time.Second), Cluster: true,
		Accepts: "whole seconds, at least 1 s, such as 15 s"},
}

// lookup returns the key named name.
func lookup(name string) (*Key, bool) {
	for i := range Keys {
		if Keys[i].Name == name {
			return &Keys[i], true
		}
	}
	return nil, false
}
