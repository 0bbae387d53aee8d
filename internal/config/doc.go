// Package config reads the configuration file of the weir command
// (`weir run wordcount --config weir.yaml`): YAML with Apache Flink's key
// names, so that a Flink user's settings carry over.
//
// Each key maps to a flag of the command (Keys, in keys.go, is the table):
// the file sets the flags the command line left alone, so flags override
// the file. A key may be written flat or nested, as in Flink's config.yaml:
//
//	execution.checkpointing.interval: 10s
//	execution:
//	  checkpointing:
//	    mode: AT_LEAST_ONCE
//
// Loading is strict, so that no setting is lost without a word: an unknown
// key is an error that names it and the nearest known key; a value is
// checked against its key's kind and range before any flag is set, and a
// bad one is an error that names the key, its line and the accepted values;
// a key whose flag the command does not have is an error too.
//
// Durations take Go's form (1m30s) or Flink's (10 s, 500 ms, 2 min; a bare
// number is milliseconds). Enumerations accept Flink's spellings
// (EXACTLY_ONCE, hashmap, rocksdb) beside weir's.
//
// # Usage
//
//	f, err := config.Load(path) // checks every key and value
//	if err != nil { ... }
//	err = f.Apply(cmd.Flags(), cmd.CommandPath()) // sets the flags not given on the command line
//
// # Adding a key
//
// Append a Key to Keys with its Flink name, the flag it sets, its Kind and
// range; the flag must exist on the commands that accept the key. The
// table's test checks that names are unique and ranges are consistent.
package config
