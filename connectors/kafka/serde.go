package kafka

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Deserializer turns a Kafka record into a value of the stream. An error
// marks the record as bad: the source then fails the job or hands the
// record to SourceOptions.OnDeserializeError, never drops it silently.
type Deserializer[T any] func(r *kgo.Record) (T, error)

// Bytes returns the record's value as it is (the slice is the record's
// own, not copied).
func Bytes() Deserializer[[]byte] {
	return func(r *kgo.Record) ([]byte, error) { return r.Value, nil }
}

// String returns the record's value as a string.
func String() Deserializer[string] {
	return func(r *kgo.Record) (string, error) { return string(r.Value), nil }
}

// JSON decodes the record's value as JSON into a T.
func JSON[T any]() Deserializer[T] {
	return func(r *kgo.Record) (T, error) {
		var v T
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return v, fmt.Errorf("value is not JSON for %T: %w", v, err)
		}
		return v, nil
	}
}

// Record is what a Serializer makes of a value of the stream: the Kafka
// record to produce.
type Record struct {
	// Topic is the topic to write to; empty means SinkOptions.Topic.
	Topic string
	// Key and Value are the record's key and value; a nil Key leaves the
	// partition to the producer's partitioner (sticky), a non-nil one
	// hashes it (murmur2, as Kafka's Java client).
	Key, Value []byte
	// Headers are the record's headers.
	Headers []kgo.RecordHeader
	// Timestamp is the record's timestamp; zero means the time it is
	// produced.
	Timestamp time.Time
}

// Serializer turns a value of the stream into a Kafka record.
type Serializer[T any] func(v T) (Record, error)

// StringValues writes each string as a record value without a key.
func StringValues() Serializer[string] {
	return func(v string) (Record, error) { return Record{Value: []byte(v)}, nil }
}

// JSONValues writes each value as JSON, without a key.
func JSONValues[T any]() Serializer[T] {
	return func(v T) (Record, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return Record{}, fmt.Errorf("encode %T as JSON: %w", v, err)
		}
		return Record{Value: b}, nil
	}
}
