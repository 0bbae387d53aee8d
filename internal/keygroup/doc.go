// Package keygroup assigns keys to key groups and key groups to subtasks.
//
// A key's group is hash(keyBytes) mod maxParallelism, with a hash that never
// changes (state written today must land in the same group tomorrow). Each
// subtask of a keyed operator owns one contiguous range of groups, so rescaling
// moves whole groups and, on the pebble backend, whole key ranges.
package keygroup
