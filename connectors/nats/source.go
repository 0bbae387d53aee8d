package nats

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirstream/weir/connector"
)

// Message is one JetStream message as a source's decode function sees it
// and as a sink's encode function produces it.
type Message struct {
	// Subject is the message's subject. A sink publishes to its own subject
	// when Subject is empty.
	Subject string
	// Header holds the message's headers; nil means none.
	Header nats.Header
	// Data is the payload. A decode function must not keep it beyond the
	// call: copy what must outlive it.
	Data []byte
	// Sequence is the message's stream sequence (source only).
	Sequence uint64
	// Timestamp is when the server stored the message (source only).
	Timestamp time.Time
}

// EventTime says where a source takes the event-time timestamp of a record.
type EventTime int

const (
	// NoEventTime emits records without timestamps.
	NoEventTime EventTime = iota
	// MessageTime uses the time the server stored the message.
	MessageTime
	// HeaderTime reads SourceOptions.TimestampHeader: milliseconds since the
	// Unix epoch, in decimal.
	HeaderTime
)

// Defaults and limits of SourceOptions.
const (
	DefaultSourceBatchSize = 1024
	DefaultPullMaxMessages = 4096
	DefaultConnectTimeout  = 5 * time.Second
	MaxSourceBatchSize     = 1 << 16
)

// SourceOptions configures a JetStream source. The zero value reads the
// whole stream from its first message and never ends.
type SourceOptions struct {
	// Subjects filter the stream: each subject (wildcards allowed) is one
	// split, read by its own ordered consumer, so a source with several
	// subjects spreads over several subtasks. The subjects must not overlap,
	// or a message is read once per subject it matches. Default nil: the
	// whole stream is one split.
	Subjects []string
	// StartSequence is the stream sequence the first run reads from.
	// Default 0: the stream's first message.
	StartSequence uint64
	// Bounded makes the source end at the stream's last sequence as it was
	// when the job first started (that sequence is in the checkpoint, so a
	// restored job stops at the same message). Default false: unbounded.
	Bounded bool
	// EventTime selects the records' event-time timestamps. Default
	// NoEventTime.
	EventTime EventTime
	// TimestampHeader names the header that HeaderTime reads. Required with
	// HeaderTime, unused otherwise.
	TimestampHeader string
	// BatchSize is the most records one Poll emits, in [1,
	// MaxSourceBatchSize]. Default 0: DefaultSourceBatchSize.
	BatchSize int
	// PullMaxMessages is how many messages each consumer keeps in flight
	// from the server. Default 0: DefaultPullMaxMessages.
	PullMaxMessages int
	// ConnectTimeout bounds connecting to the server. Default 0:
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
}

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *SourceOptions) EnsureDefaults() *SourceOptions {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultSourceBatchSize
	}
	if o.PullMaxMessages == 0 {
		o.PullMaxMessages = DefaultPullMaxMessages
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	return o
}

// Validate reports the first field that holds a value out of its range.
func (o *SourceOptions) Validate() error {
	switch {
	case o.BatchSize < 0 || o.BatchSize > MaxSourceBatchSize:
		return fmt.Errorf("nats source: SourceOptions.BatchSize must be in [1, %d] (0 means %d), got %d", MaxSourceBatchSize, DefaultSourceBatchSize, o.BatchSize)
	case o.PullMaxMessages < 0:
		return fmt.Errorf("nats source: SourceOptions.PullMaxMessages must be >= 1 (0 means %d), got %d", DefaultPullMaxMessages, o.PullMaxMessages)
	case o.ConnectTimeout < 0:
		return fmt.Errorf("nats source: SourceOptions.ConnectTimeout must be > 0 (0 means %v), got %v", DefaultConnectTimeout, o.ConnectTimeout)
	case o.EventTime < NoEventTime || o.EventTime > HeaderTime:
		return fmt.Errorf("nats source: SourceOptions.EventTime %d is unknown: use NoEventTime, MessageTime or HeaderTime", o.EventTime)
	case o.EventTime == HeaderTime && o.TimestampHeader == "":
		return fmt.Errorf("nats source: SourceOptions.EventTime is HeaderTime but TimestampHeader is empty: name the header that holds the timestamp")
	}
	seen := map[string]bool{}
	for _, s := range o.Subjects {
		if s == "" || seen[s] {
			return fmt.Errorf("nats source: SourceOptions.Subjects holds an empty or repeated subject %q", s)
		}
		seen[s] = true
	}
	return nil
}

// Source reads a JetStream stream. It is a description: it holds
// configuration only and may be shared by all subtasks. See the package
// documentation.
type Source[T any] struct {
	url, stream string
	decode      func(*Message) (T, error)
	opts        SourceOptions
}

var _ connector.Source[string] = (*Source[string])(nil)

// Strings returns a source of the payloads of the stream's messages as
// strings, one record per message.
func Strings(url, stream string, opts SourceOptions) *Source[string] {
	return SourceOf(url, stream, func(m *Message) (string, error) { return string(m.Data), nil }, opts)
}

// SourceOf returns a source of the records decode makes of the stream's
// messages. An error of decode fails the job.
func SourceOf[T any](url, stream string, decode func(*Message) (T, error), opts SourceOptions) *Source[T] {
	return &Source[T]{url: url, stream: stream, decode: decode, opts: opts}
}

// Boundedness reports Bounded when SourceOptions.Bounded is set.
func (s *Source[T]) Boundedness() connector.Boundedness {
	if s.opts.Bounded {
		return connector.Bounded
	}
	return connector.Unbounded
}

// splitSpec is a split's Data.
type splitSpec struct {
	Stream  string `json:"stream"`
	Subject string `json:"subject,omitempty"`
	// Start is the first sequence to read when the split has no position.
	Start uint64 `json:"start"`
	// Stop, when Bounded, is the last sequence to read.
	Stop    uint64 `json:"stop,omitempty"`
	Bounded bool   `json:"bounded,omitempty"`
}

// Check connects to the server and verifies that the stream exists and
// holds every subject of SourceOptions.Subjects. It returns a one-line
// error naming what is wrong.
func (s *Source[T]) Check(ctx context.Context) error {
	_, err := s.describe(ctx)
	return err
}

// describe connects, checks the stream and subjects and returns the
// stream's state.
func (s *Source[T]) describe(ctx context.Context) (*jetstream.StreamInfo, error) {
	if err := s.opts.Validate(); err != nil {
		return nil, err
	}
	opts := s.opts
	opts.EnsureDefaults()
	nc, err := connect(s.url, opts.ConnectTimeout, "weir source")
	if err != nil {
		return nil, fmt.Errorf("nats source: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("nats source: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	st, err := js.Stream(ctx, s.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("nats source: stream %q does not exist on %s: create it or name an existing stream", s.stream, s.url)
	}
	if err != nil {
		return nil, fmt.Errorf("nats source: look up stream %q on %s: %w", s.stream, s.url, err)
	}
	for _, subj := range s.opts.Subjects {
		name, err := js.StreamNameBySubject(ctx, subj)
		if err != nil || name != s.stream {
			return nil, fmt.Errorf("nats source: subject %q is not in stream %q (its subjects: %v)", subj, s.stream, st.CachedInfo().Config.Subjects)
		}
	}
	return st.CachedInfo(), nil
}

// Splits returns one split per subject of SourceOptions.Subjects, or one
// for the whole stream. In bounded mode each split stops at the stream's
// current last sequence.
func (s *Source[T]) Splits(ctx context.Context, parallelism int) ([]connector.SplitState, error) {
	if parallelism < 1 {
		return nil, fmt.Errorf("nats source: parallelism must be >= 1, got %d", parallelism)
	}
	info, err := s.describe(ctx)
	if err != nil {
		return nil, err
	}
	spec := splitSpec{Stream: s.stream, Start: max(1, s.opts.StartSequence), Bounded: s.opts.Bounded}
	if s.opts.Bounded {
		spec.Stop = info.State.LastSeq
	}
	subjects := s.opts.Subjects
	if len(subjects) == 0 {
		subjects = []string{""}
	}
	splits := make([]connector.SplitState, 0, len(subjects))
	for _, subj := range subjects {
		sp := spec
		sp.Subject = subj
		data, err := json.Marshal(sp)
		if err != nil {
			return nil, err
		}
		id := "nats:" + s.stream
		if subj != "" {
			id += ":" + subj
		}
		splits = append(splits, connector.SplitState{ID: id, Data: data})
	}
	return splits, nil
}

// NewReader returns the reader of one subtask. It connects on its first
// Poll.
func (s *Source[T]) NewReader(ctx connector.ReaderContext) (connector.Reader[T], error) {
	if err := s.opts.Validate(); err != nil {
		return nil, err
	}
	opts := s.opts
	opts.EnsureDefaults()
	logger := ctx.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &reader[T]{src: s, opts: opts, logger: logger, notify: make(chan struct{}, 1)}, nil
}

func connect(url string, timeout time.Duration, name string, more ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(name), nats.Timeout(timeout),
		// A server restart must not end the job: reconnect for as long as
		// it takes (the job's own failure handling bounds that).
		nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, more...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %v", url, err)
	}
	return nc, nil
}

// splitReader is one split being read by an ordered consumer.
type splitReader struct {
	id   string
	spec splitSpec
	// next is the sequence after the last emitted message: the position.
	next uint64
	done bool
	cc   jetstream.ConsumeContext

	// local are messages taken from buf, not all emitted yet.
	local []jetstream.Msg
	at    int

	mu   sync.Mutex
	cond *sync.Cond
	buf  []jetstream.Msg
	// stopped is set by Close to release a handler waiting for room.
	stopped bool
	err     error
}

type reader[T any] struct {
	src    *Source[T]
	opts   SourceOptions
	logger *slog.Logger

	splits  []*splitReader
	noMore  bool
	started bool
	nc      *nats.Conn
	js      jetstream.JetStream
	notify  chan struct{}
	closed  bool
	msg     Message
}

var errClosed = errors.New("nats source: reader is closed")

func (r *reader[T]) AddSplits(splits []connector.SplitState) error {
	if r.closed {
		return errClosed
	}
	add := make([]*splitReader, 0, len(splits))
	for _, st := range splits {
		var spec splitSpec
		if err := json.Unmarshal(st.Data, &spec); err != nil || spec.Stream == "" {
			return fmt.Errorf("nats source: split %q: Data is not a JetStream split: %v", st.ID, err)
		}
		sr := &splitReader{id: st.ID, spec: spec, next: max(1, spec.Start)}
		switch len(st.Position) {
		case 0:
		case 8:
			sr.next = binary.BigEndian.Uint64(st.Position)
		default:
			return fmt.Errorf("nats source: split %q: Position has %d bytes, want 8 (a stream sequence) or none", st.ID, len(st.Position))
		}
		if spec.Bounded && sr.next > spec.Stop {
			sr.done = true
		}
		sr.cond = sync.NewCond(&sr.mu)
		add = append(add, sr)
	}
	r.splits = append(r.splits, add...)
	if r.started {
		for _, sr := range add {
			if err := r.startSplit(sr); err != nil {
				return err
			}
		}
	}
	r.wake()
	return nil
}

func (r *reader[T]) NoMoreSplits() { r.noMore = true; r.wake() }

func (r *reader[T]) wake() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *reader[T]) start() error {
	r.started = true
	if r.pendingSplits() == 0 {
		return nil
	}
	nc, err := connect(r.src.url, r.opts.ConnectTimeout, "weir source "+r.src.stream)
	if err != nil {
		return fmt.Errorf("nats source: %w", err)
	}
	r.nc = nc
	if r.js, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("nats source: %w", err)
	}
	for _, sr := range r.splits {
		if err := r.startSplit(sr); err != nil {
			return err
		}
	}
	return nil
}

func (r *reader[T]) pendingSplits() int {
	n := 0
	for _, sr := range r.splits {
		if !sr.done {
			n++
		}
	}
	return n
}

// startSplit creates the split's ordered consumer at its position.
func (r *reader[T]) startSplit(sr *splitReader) error {
	if sr.done || sr.cc != nil {
		return nil // finished, or started by the start that connected
	}
	if r.nc == nil {
		return r.start()
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.ConnectTimeout)
	defer cancel()
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: sr.next}
	if sr.spec.Subject != "" {
		cfg.FilterSubjects = []string{sr.spec.Subject}
	}
	cons, err := r.js.OrderedConsumer(ctx, sr.spec.Stream, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("nats source: stream %q does not exist on %s (split %s)", sr.spec.Stream, r.src.url, sr.id)
	}
	if err != nil {
		return fmt.Errorf("nats source: split %s: create consumer at sequence %d: %w", sr.id, sr.next, err)
	}
	if sr.spec.Bounded {
		info, err := cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("nats source: split %s: consumer info: %w", sr.id, err)
		}
		if info.NumPending == 0 {
			// Nothing left up to the stop sequence: every message up to it
			// existed when the job first started.
			sr.done = true
			return nil
		}
	}
	limit := r.opts.PullMaxMessages
	handler := func(m jetstream.Msg) {
		sr.mu.Lock()
		for len(sr.buf) >= limit && !sr.stopped {
			sr.cond.Wait()
		}
		sr.buf = append(sr.buf, m)
		sr.mu.Unlock()
		r.wake()
	}
	errh := jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		// The ordered consumer recreates itself after missed heartbeats
		// and reconnects; those are worth a log line only.
		r.logger.Warn("nats source: consumer", "split", sr.id, "err", err)
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrOrderedConsumerReset) {
			return
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			sr.mu.Lock()
			sr.err = fmt.Errorf("nats source: stream %q vanished from %s while split %s was read", sr.spec.Stream, r.src.url, sr.id)
			sr.mu.Unlock()
			r.wake()
		}
	})
	cc, err := cons.Consume(handler, jetstream.PullMaxMessages(limit), errh)
	if err != nil {
		return fmt.Errorf("nats source: split %s: consume: %w", sr.id, err)
	}
	sr.cc = cc
	return nil
}

func (r *reader[T]) Poll(out connector.Emitter[T]) (connector.Status, error) {
	if r.closed {
		return connector.EndOfInput, errClosed
	}
	if !r.started {
		if err := r.start(); err != nil {
			return connector.EndOfInput, err
		}
	}
	so, _ := out.(connector.SplitOutputs[T])
	emitted := 0
	more := false
	for _, sr := range r.splits {
		if sr.done {
			continue
		}
		if sr.at == len(sr.local) {
			sr.mu.Lock()
			if sr.err != nil {
				err := sr.err
				sr.mu.Unlock()
				return connector.EndOfInput, err
			}
			full := len(sr.buf) >= r.opts.PullMaxMessages
			sr.local, sr.buf = sr.buf, sr.local[:0]
			sr.at = 0
			if full {
				sr.cond.Broadcast()
			}
			sr.mu.Unlock()
		}
		em := out
		if so != nil {
			em = so.ForSplit(sr.id)
		}
		for sr.at < len(sr.local) && emitted < r.opts.BatchSize {
			m := sr.local[sr.at]
			sr.local[sr.at] = nil
			sr.at++
			if err := r.emit(sr, m, em); err != nil {
				return connector.EndOfInput, err
			}
			emitted++
			if sr.done {
				break
			}
		}
		if sr.done {
			r.finish(sr, so)
			continue
		}
		if sr.at < len(sr.local) {
			more = true
		}
	}
	switch {
	case more || emitted >= r.opts.BatchSize:
		return connector.MoreAvailable, nil
	case r.noMore && r.pendingSplits() == 0:
		return connector.EndOfInput, nil
	default:
		return connector.NothingAvailable, nil
	}
}

// emit decodes and emits one message and advances the split's position.
func (r *reader[T]) emit(sr *splitReader, m jetstream.Msg, out connector.Emitter[T]) error {
	meta, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("nats source: split %s: message without JetStream metadata: %w", sr.id, err)
	}
	seq := meta.Sequence.Stream
	if seq < sr.next {
		return nil // redelivered after a consumer reset: emitted already
	}
	if sr.spec.Bounded && seq > sr.spec.Stop {
		sr.done = true
		return nil
	}
	r.msg = Message{Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Sequence: seq, Timestamp: meta.Timestamp}
	rec, err := r.src.decode(&r.msg)
	if err != nil {
		return fmt.Errorf("nats source: stream %q sequence %d: %w", sr.spec.Stream, seq, err)
	}
	switch r.opts.EventTime {
	case MessageTime:
		out.EmitAt(rec, meta.Timestamp.UnixMilli())
	case HeaderTime:
		v := m.Headers().Get(r.opts.TimestampHeader)
		ts, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("nats source: stream %q sequence %d: header %s is %q, want milliseconds since the Unix epoch", sr.spec.Stream, seq, r.opts.TimestampHeader, v)
		}
		out.EmitAt(rec, ts)
	default:
		out.Emit(rec)
	}
	sr.next = seq + 1
	if sr.spec.Bounded && (seq >= sr.spec.Stop || meta.NumPending == 0) {
		// NumPending 0: no message matching the split is left now, and any
		// later one has a sequence past Stop.
		sr.done = true
	}
	return nil
}

func (r *reader[T]) finish(sr *splitReader, so connector.SplitOutputs[T]) {
	r.stopSplit(sr)
	sr.local, sr.at = nil, 0
	if so != nil {
		so.ReleaseSplit(sr.id)
	}
}

func (r *reader[T]) stopSplit(sr *splitReader) {
	sr.mu.Lock()
	sr.stopped = true
	sr.buf = nil
	sr.cond.Broadcast()
	sr.mu.Unlock()
	if sr.cc != nil {
		sr.cc.Stop()
		<-sr.cc.Closed()
		sr.cc = nil
	}
}

var ready = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Available returns a channel that a consumer's handler signals when
// messages arrive.
func (r *reader[T]) Available() <-chan struct{} {
	if !r.started {
		return ready
	}
	for _, sr := range r.splits {
		if !sr.done && sr.at < len(sr.local) {
			return ready
		}
	}
	return r.notify
}

func (r *reader[T]) Snapshot(int64) ([]connector.SplitState, error) {
	if r.closed {
		return nil, errClosed
	}
	out := make([]connector.SplitState, 0, len(r.splits))
	for _, sr := range r.splits {
		if sr.done {
			continue
		}
		data, err := json.Marshal(sr.spec)
		if err != nil {
			return nil, err
		}
		out = append(out, connector.SplitState{ID: sr.id, Data: data, Position: binary.BigEndian.AppendUint64(nil, sr.next)})
	}
	return out, nil
}

// Close stops every consumer and closes the connection, waiting for the
// consumers' goroutines.
func (r *reader[T]) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	for _, sr := range r.splits {
		r.stopSplit(sr)
	}
	if r.nc != nil {
		r.nc.Close()
		r.nc = nil
	}
	return nil
}
