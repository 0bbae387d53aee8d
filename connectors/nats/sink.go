package nats

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirstream/weir/connector"
)

// Delivery is a sink's guarantee.
type Delivery int

const (
	// ExactlyOnce publishes a checkpoint's records when the checkpoint
	// completes, with deterministic message IDs (see the package
	// documentation).
	ExactlyOnce Delivery = iota
	// AtLeastOnce publishes records as they come and waits for their
	// acknowledgements at each checkpoint; records after the last
	// checkpoint are published again after a restore.
	AtLeastOnce
)

// Atomic says whether a sink uses atomic batch publish.
type Atomic int

const (
	// AtomicAuto uses atomic batches when the stream allows them
	// (AllowAtomicPublish, nats-server 2.12 and later).
	AtomicAuto Atomic = iota
	// AtomicOff never uses them.
	AtomicOff
	// AtomicOn requires them: the sink fails at start if the stream does
	// not allow atomic publish.
	AtomicOn
)

// Defaults and limits of SinkOptions.
const (
	DefaultAckTimeout    = 30 * time.Second
	DefaultRecoveryTime  = time.Minute
	DefaultAtomicBatch   = 1000 // nats-server's default max_batch_size
	DefaultMaxAckPending = 4096
)

// SinkOptions configures a JetStream sink.
type SinkOptions struct {
	// Delivery is the guarantee. Default ExactlyOnce.
	Delivery Delivery
	// Atomic selects atomic batch publish for ExactlyOnce. Default
	// AtomicAuto.
	Atomic Atomic
	// AtomicBatchSize is the most messages in one atomic batch; it must not
	// exceed the server's max_batch_size. Default 0: DefaultAtomicBatch.
	AtomicBatchSize int
	// MaxAckPending is the most publishes in flight without an
	// acknowledgement. Default 0: DefaultMaxAckPending.
	MaxAckPending int
	// AckTimeout bounds the wait for the acknowledgements of one commit or
	// flush. Default 0: DefaultAckTimeout.
	AckTimeout time.Duration
	// RecoveryTime is the longest time expected between a failure during a
	// commit and the restored job's repeat of that commit. The sink warns at
	// start when the stream's duplicate window is shorter. Default 0:
	// DefaultRecoveryTime.
	RecoveryTime time.Duration
	// ConnectTimeout bounds connecting. Default 0: DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Logger receives the duplicate-window warning of Check and Commit.
	// Default nil: slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *SinkOptions) EnsureDefaults() *SinkOptions {
	if o.AtomicBatchSize == 0 {
		o.AtomicBatchSize = DefaultAtomicBatch
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = DefaultMaxAckPending
	}
	if o.AckTimeout == 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.RecoveryTime == 0 {
		o.RecoveryTime = DefaultRecoveryTime
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports the first field that holds a value out of its range.
func (o *SinkOptions) Validate() error {
	switch {
	case o.Delivery != ExactlyOnce && o.Delivery != AtLeastOnce:
		return fmt.Errorf("nats sink: SinkOptions.Delivery %d is unknown: use ExactlyOnce or AtLeastOnce", o.Delivery)
	case o.Atomic < AtomicAuto || o.Atomic > AtomicOn:
		return fmt.Errorf("nats sink: SinkOptions.Atomic %d is unknown: use AtomicAuto, AtomicOff or AtomicOn", o.Atomic)
	case o.AtomicBatchSize < 0:
		return fmt.Errorf("nats sink: SinkOptions.AtomicBatchSize must be >= 1 (0 means %d), got %d", DefaultAtomicBatch, o.AtomicBatchSize)
	case o.MaxAckPending < 0:
		return fmt.Errorf("nats sink: SinkOptions.MaxAckPending must be >= 1 (0 means %d), got %d", DefaultMaxAckPending, o.MaxAckPending)
	case o.AckTimeout < 0 || o.RecoveryTime < 0 || o.ConnectTimeout < 0:
		return fmt.Errorf("nats sink: SinkOptions.AckTimeout, RecoveryTime and ConnectTimeout must be >= 0 (0 means the default)")
	}
	return nil
}

// Sink publishes records to a JetStream subject. See the package
// documentation.
type Sink[T any] struct {
	url, subject string
	encode       func(T) Message
	opts         SinkOptions

	// conn is shared by the writers of the sink and by Commit.
	mu   sync.Mutex
	conn *sinkConn
	refs int
}

var (
	_ connector.Sink[string] = (*Sink[string])(nil)
	_ connector.Committer    = (*Sink[string])(nil)
)

// StringSink returns a sink that publishes each record as a message's
// payload.
func StringSink(url, subject string, opts SinkOptions) *Sink[string] {
	return SinkOf(url, subject, func(s string) Message { return Message{Data: []byte(s)} }, opts)
}

// SinkOf returns a sink that publishes the message encode makes of each
// record, to subject unless the message names its own.
func SinkOf[T any](url, subject string, encode func(T) Message, opts SinkOptions) *Sink[T] {
	return &Sink[T]{url: url, subject: subject, encode: encode, opts: opts}
}

// sinkConn is a connection and what it learnt of the stream.
type sinkConn struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
	atomic bool
	lost   *lostSignal // fires when the connection is lost
}

// lostSignal is a channel closed when the connection is lost, and
// replaced by a new one then.
type lostSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newLostSignal() *lostSignal { return &lostSignal{ch: make(chan struct{})} }

// current returns the channel the next loss of the connection closes.
func (l *lostSignal) current() <-chan struct{} {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ch
}

func (l *lostSignal) fire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.ch)
	l.ch = make(chan struct{})
}

// Check connects, verifies that the subject belongs to a stream and
// warns when the stream's duplicate window is shorter than
// SinkOptions.RecoveryTime. It returns a one-line error naming what is
// wrong.
func (s *Sink[T]) Check(ctx context.Context) error {
	c, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	s.release()
	_ = c
	return nil
}

func (s *Sink[T]) acquire(ctx context.Context) (*sinkConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.refs++
		return s.conn, nil
	}
	if err := s.opts.Validate(); err != nil {
		return nil, err
	}
	opts := s.opts
	opts.EnsureDefaults()
	lost := newLostSignal()
	nc, err := connect(s.url, opts.ConnectTimeout, "weir sink "+s.subject,
		nats.DisconnectErrHandler(func(*nats.Conn, error) { lost.fire() }))
	if err != nil {
		return nil, fmt.Errorf("nats sink: %w", err)
	}
	c, err := s.inspect(ctx, nc, &opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.lost = lost
	s.conn, s.refs = c, 1
	return c, nil
}

func (s *Sink[T]) inspect(ctx context.Context, nc *nats.Conn, opts *SinkOptions) (*sinkConn, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(opts.MaxAckPending))
	if err != nil {
		return nil, fmt.Errorf("nats sink: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	name, err := js.StreamNameBySubject(ctx, s.subject)
	if err != nil {
		return nil, fmt.Errorf("nats sink: subject %q is in no stream on %s: add it to a stream's subjects or publish to one that is", s.subject, s.url)
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("nats sink: look up stream %q: %w", name, err)
	}
	cfg := st.CachedInfo().Config
	c := &sinkConn{nc: nc, js: js, stream: name}
	if opts.Delivery == ExactlyOnce {
		switch {
		case opts.Atomic == AtomicOn && !cfg.AllowAtomicPublish:
			return nil, fmt.Errorf("nats sink: stream %q does not allow atomic publish: set its AllowAtomicPublish (nats-server 2.12+) or use AtomicAuto", name)
		case opts.Atomic != AtomicOff:
			c.atomic = cfg.AllowAtomicPublish
		}
		if cfg.Duplicates < opts.RecoveryTime {
			opts.Logger.Warn("nats sink: the stream's duplicate window is shorter than the recovery time: a commit repeated after a slower recovery publishes its records twice",
				"stream", name, "duplicate_window", cfg.Duplicates, "recovery_time", opts.RecoveryTime)
		}
	}
	return c, nil
}

func (s *Sink[T]) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	if s.refs == 0 && s.conn != nil {
		s.conn.nc.Close()
		s.conn = nil
	}
}

// NewWriter returns the writer of one subtask. It connects on first use.
func (s *Sink[T]) NewWriter(ctx connector.WriterContext) (connector.Writer[T], error) {
	if err := s.opts.Validate(); err != nil {
		return nil, err
	}
	opts := s.opts
	opts.EnsureDefaults()
	var token [6]byte
	if _, err := rand.Read(token[:]); err != nil {
		return nil, fmt.Errorf("nats sink: %w", err)
	}
	w := &writer[T]{sink: s, opts: opts, ctx: ctx, token: hex.EncodeToString(token[:])}
	if opts.Delivery == AtLeastOnce {
		return &eagerWriter[T]{sink: s, opts: opts}, nil
	}
	return w, nil
}

// writer is the ExactlyOnce writer: it keeps the records of the current
// checkpoint and hands them to the checkpoint as its committable.
type writer[T any] struct {
	sink *Sink[T]
	opts SinkOptions
	ctx  connector.WriterContext
	// token is random per writer: the message IDs of two writers never
	// collide, even when a job restored from an old checkpoint pre-commits
	// a checkpoint ID again.
	token string
	buf   []byte // encoded records of the current checkpoint
	n     int
	conn  *sinkConn
}

var (
	_ connector.PreCommitter     = (*writer[string])(nil)
	_ connector.BatchWriter[int] = (*eagerWriter[int])(nil)
	_ connector.BatchWriter[int] = (*writer[int])(nil)
)

func (w *writer[T]) Write(rec T) error {
	m := w.sink.encode(rec)
	w.buf = appendMessage(w.buf, &m)
	w.n++
	return nil
}

func (w *writer[T]) WriteBatch(recs []T) error {
	for _, r := range recs {
		m := w.sink.encode(r)
		w.buf = appendMessage(w.buf, &m)
	}
	w.n += len(recs)
	return nil
}

// Flush does nothing but connect: the records wait for their checkpoint.
func (w *writer[T]) Flush(bool) error {
	return w.connect()
}

// connect acquires the sink's connection; it fails early, at the first
// checkpoint, when the subject is wrong.
func (w *writer[T]) connect() error {
	if w.conn == nil {
		c, err := w.sink.acquire(context.Background())
		if err != nil {
			return err
		}
		w.conn = c
	}
	return nil
}

// PreCommit returns the checkpoint's records as its committable. The
// committable also fixes how Commit publishes them, whichever process
// commits: in atomic batches of the writer's AtomicBatchSize (when the
// stream allows atomic publish now), or one by one.
func (w *writer[T]) PreCommit(checkpointID int64) ([]byte, error) {
	if w.n == 0 {
		return nil, nil
	}
	if err := w.connect(); err != nil {
		return nil, err
	}
	batch := 0
	if w.conn.atomic {
		batch = w.opts.AtomicBatchSize
	}
	hdr := binary.AppendUvarint(nil, committableVersion)
	hdr = appendString(hdr, w.ctx.JobID)
	hdr = appendString(hdr, w.token)
	hdr = binary.AppendUvarint(hdr, uint64(batch))
	hdr = binary.AppendUvarint(hdr, uint64(w.n))
	out := append(hdr, w.buf...)
	w.buf, w.n = w.buf[:0], 0
	return out, nil
}

// Close drops the records of the current checkpoint.
func (w *writer[T]) Close() error {
	w.buf = nil
	if w.conn != nil {
		w.conn = nil
		w.sink.release()
	}
	return nil
}

// committableVersion is the version PreCommit writes. Version 1 (no
// batch field; every message had its own ID, atomic batches or not) is
// still committed the way it was written.
const committableVersion = 2

// committable is a decoded committable.
type committable struct {
	version uint64
	job     string
	token   string
	// batch is the size of the atomic batches the records are committed
	// in, each with one message ID; 0: one by one, each with its own ID.
	batch int
	msgs  []Message
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendMessage(b []byte, m *Message) []byte {
	b = appendString(b, m.Subject)
	b = binary.AppendUvarint(b, uint64(len(m.Header)))
	for k, vs := range m.Header {
		b = appendString(b, k)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendString(b, v)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(m.Data)))
	return append(b, m.Data...)
}

var errCorrupt = errors.New("corrupt committable")

type decoder struct{ b []byte }

func (d *decoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, errCorrupt
	}
	d.b = d.b[n:]
	return v, nil
}

func (d *decoder) bytes() ([]byte, error) {
	n, err := d.uvarint()
	if err != nil || n > uint64(len(d.b)) {
		return nil, errCorrupt
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v, nil
}

func (d *decoder) string() (string, error) {
	b, err := d.bytes()
	return string(b), err
}

func decodeCommittable(data []byte) (*committable, error) {
	d := &decoder{b: data}
	v, err := d.uvarint()
	if err != nil || v < 1 || v > committableVersion {
		return nil, fmt.Errorf("%w: version %d, want 1 to %d", errCorrupt, v, committableVersion)
	}
	c := &committable{version: v}
	if c.job, err = d.string(); err != nil {
		return nil, err
	}
	if c.token, err = d.string(); err != nil {
		return nil, err
	}
	if v >= 2 {
		b, err := d.uvarint()
		if err != nil || b > 1<<20 {
			return nil, errCorrupt
		}
		c.batch = int(b)
	}
	n, err := d.uvarint()
	if err != nil || n > uint64(len(d.b)) {
		return nil, errCorrupt
	}
	c.msgs = make([]Message, n)
	for i := range c.msgs {
		m := &c.msgs[i]
		if m.Subject, err = d.string(); err != nil {
			return nil, err
		}
		nh, err := d.uvarint()
		if err != nil || nh > uint64(len(d.b)) {
			return nil, errCorrupt
		}
		if nh > 0 {
			m.Header = make(nats.Header, nh)
		}
		for range nh {
			k, err := d.string()
			if err != nil {
				return nil, err
			}
			nv, err := d.uvarint()
			if err != nil || nv > uint64(len(d.b)) {
				return nil, errCorrupt
			}
			vs := make([]string, nv)
			for j := range vs {
				if vs[j], err = d.string(); err != nil {
					return nil, err
				}
			}
			m.Header[k] = vs
		}
		if m.Data, err = d.bytes(); err != nil {
			return nil, err
		}
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last message", errCorrupt, len(d.b))
	}
	return c, nil
}

// MsgID is the Nats-Msg-Id of the i-th record (from 0) that a subtask's
// writer, whose random token is writerToken, pre-committed in a
// checkpoint.
func MsgID(job string, subtask int, writerToken string, checkpoint int64, i int) string {
	b := make([]byte, 0, len(job)+48)
	b = append(b, job...)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(subtask), 10)
	b = append(b, '.')
	b = append(b, writerToken...)
	b = append(b, '.')
	b = strconv.AppendInt(b, checkpoint, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(i), 10)
	return string(b)
}

// BatchMsgID is the Nats-Msg-Id of the atomic batch whose first record
// is the i-th (from 0) of a checkpoint: the first message of the batch
// carries it, and no other. It never equals a MsgID.
func BatchMsgID(job string, subtask int, writerToken string, checkpoint int64, i int) string {
	return MsgID(job, subtask, writerToken, checkpoint, 0) + ".b" + strconv.Itoa(i)
}

// Commit publishes the records of the committables, in checkpoint and
// subtask order, and waits for the server's acknowledgements. Records the
// stream already holds (a repeated commit within the duplicate window)
// are dropped by the server. Commits of several subtasks run
// concurrently, over the connection the sink's writers share.
func (s *Sink[T]) Commit(ctx context.Context, committables []connector.Committable) error {
	if len(committables) == 0 {
		return nil
	}
	c, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.release()
	opts := s.opts
	opts.EnsureDefaults()
	sorted := slices.Clone(committables)
	slices.SortFunc(sorted, func(a, b connector.Committable) int {
		return cmp.Or(cmp.Compare(a.CheckpointID, b.CheckpointID), cmp.Compare(a.Subtask, b.Subtask))
	})
	for _, cm := range sorted {
		if len(cm.Data) == 0 {
			continue
		}
		dc, err := decodeCommittable(cm.Data)
		if err != nil {
			return fmt.Errorf("nats sink: checkpoint %d subtask %d: %w", cm.CheckpointID, cm.Subtask, err)
		}
		id := func(i int) string { return MsgID(dc.job, cm.Subtask, dc.token, cm.CheckpointID, i) }
		switch {
		case dc.version == 1 && c.atomic:
			err = s.publishAtomic(ctx, c, &opts, dc.msgs, opts.AtomicBatchSize, id, nil)
		case dc.batch > 0 && !c.atomic:
			return fmt.Errorf("nats sink: checkpoint %d subtask %d was pre-committed for atomic batches, but stream %q no longer allows atomic publish: set its AllowAtomicPublish again to commit it", cm.CheckpointID, cm.Subtask, c.stream)
		case dc.batch > 0:
			bid := func(i int) string { return BatchMsgID(dc.job, cm.Subtask, dc.token, cm.CheckpointID, i) }
			err = s.publishAtomic(ctx, c, &opts, dc.msgs, dc.batch, nil, bid)
		default:
			err = s.publishAsync(ctx, c, &opts, dc.msgs, id)
		}
		if err != nil {
			return fmt.Errorf("nats sink: commit checkpoint %d subtask %d to %s: %w", cm.CheckpointID, cm.Subtask, c.stream, err)
		}
	}
	return nil
}

func (s *Sink[T]) natsMsg(m *Message) *nats.Msg {
	subj := m.Subject
	if subj == "" {
		subj = s.subject
	}
	h := make(nats.Header, len(m.Header)+4)
	for k, v := range m.Header {
		h[k] = v
	}
	return &nats.Msg{Subject: subj, Header: h, Data: m.Data}
}

// publishAsync publishes msgs with their IDs and waits for every
// acknowledgement.
func (s *Sink[T]) publishAsync(ctx context.Context, c *sinkConn, opts *SinkOptions, msgs []Message, id func(int) string) error {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	stall := jetstream.WithStallWait(opts.AckTimeout)
	for i := range msgs {
		nm := s.natsMsg(&msgs[i])
		nm.Header[jetstream.MsgIDHeader] = []string{id(i)}
		f, err := c.js.PublishMsgAsync(nm, stall)
		if err != nil {
			return err
		}
		futures = append(futures, f)
	}
	return waitAcks(ctx, opts.AckTimeout, futures)
}

func waitAcks(ctx context.Context, timeout time.Duration, futures []jetstream.PubAckFuture) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish to %s: %w", f.Msg().Subject, err)
		case <-t.C:
			return fmt.Errorf("no acknowledgement within %v", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Error codes of nats-server's atomic batch publish.
const (
	errCodeAtomicDuplicate = 10201 // JSAtomicPublishContainsDuplicateMessageErr
)

// publishAtomic publishes msgs in atomic batches of size messages (the
// last may be shorter): each batch is stored whole or not at all. With
// batchID, the first message of the batch starting at record i carries
// batchID(i) as its Nats-Msg-Id and the others carry none: the server
// checks a batch's message IDs before it stores any of it and rejects a
// batch with a duplicate whole, so one ID deduplicates the batch as a
// unit, and the server tracks one ID per batch instead of one per record.
// (Version 1 committables give msgID instead: an ID on every message.) A
// batch the stream holds already is rejected whole, which is success
// here.
//
// A batch during which the connection was lost (a server restart: the
// reply to its commit may never come) is published again, under a new
// batch ID, for as long as AckTimeout allows: its message ID makes the
// repeat harmless if the first one was stored after all.
func (s *Sink[T]) publishAtomic(ctx context.Context, c *sinkConn, opts *SinkOptions, msgs []Message, size int, msgID, batchID func(int) string) error {
	for from := 0; from < len(msgs); from += size {
		to := min(len(msgs), from+size)
		deadline := time.Now().Add(opts.AckTimeout)
		for {
			err := s.publishBatch(ctx, c, opts, msgs, from, to, msgID, batchID)
			if !errors.Is(err, errConnLost) || time.Now().After(deadline) || ctx.Err() != nil {
				if err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// errConnLost: the connection was lost while a batch was published.
var errConnLost = errors.New("the connection to the server was lost during the batch")

// publishBatch publishes msgs[from:to] as one atomic batch.
func (s *Sink[T]) publishBatch(ctx context.Context, c *sinkConn, opts *SinkOptions, msgs []Message, from, to int, msgID, batchID func(int) string) error {
	bid, err := newBatchID()
	if err != nil {
		return err
	}
	lost := c.lost.current()
	// One header map and message for the whole batch: PublishMsg encodes
	// them before it returns.
	h := make(nats.Header, 8)
	var (
		bidV = []string{bid}
		seqV = []string{""}
		idV  = []string{""}
		nm   = nats.Msg{Header: h}
	)
	for i := from; i < to; i++ {
		m := &msgs[i]
		clear(h)
		for k, v := range m.Header {
			h[k] = v
		}
		nm.Subject, nm.Data = m.Subject, m.Data
		if nm.Subject == "" {
			nm.Subject = s.subject
		}
		switch {
		case msgID != nil:
			idV[0] = msgID(i)
			h[jetstream.MsgIDHeader] = idV
		case i == from:
			idV[0] = batchID(from)
			h[jetstream.MsgIDHeader] = idV
		}
		h["Nats-Batch-Id"] = bidV
		seqV[0] = strconv.Itoa(i - from + 1)
		h["Nats-Batch-Sequence"] = seqV
		if i < to-1 {
			if err := c.nc.PublishMsg(&nm); err != nil {
				return err
			}
			continue
		}
		h["Nats-Batch-Commit"] = []string{"1"}
		rctx, cancel := context.WithTimeout(ctx, opts.AckTimeout)
		done := make(chan struct{})
		go func() {
			defer close(done)
			select {
			case <-lost:
				cancel()
			case <-rctx.Done():
			}
		}()
		resp, err := c.nc.RequestMsgWithContext(rctx, &nm)
		cancel()
		<-done
		select {
		case <-lost:
			return fmt.Errorf("atomic batch %s: %w", bid, errConnLost)
		default:
		}
		if err != nil {
			return fmt.Errorf("commit atomic batch %s: %w", bid, err)
		}
		if err := batchAckError(resp.Data); err != nil {
			return fmt.Errorf("atomic batch %s: %w", bid, err)
		}
	}
	return nil
}

// newBatchID returns a random batch ID. Batch IDs need not repeat across
// attempts (the message IDs drop repeated batches), and must not: a batch
// that a killed process left open on the server, under the same ID, would
// make the repeat look like a gap and fail it.
func newBatchID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// batchAckError reports the error of the reply to a batch's commit.
func batchAckError(data []byte) error {
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return fmt.Errorf("cannot parse the server's reply %q: %v", data, err)
	}
	switch {
	case resp.Error == nil:
		return nil
	case resp.Error.ErrCode == errCodeAtomicDuplicate:
		return nil
	default:
		return fmt.Errorf("%s (error %d)", resp.Error.Description, resp.Error.ErrCode)
	}
}

// eagerWriter is the AtLeastOnce writer: it publishes each record at
// once and waits for the acknowledgements on Flush.
type eagerWriter[T any] struct {
	sink    *Sink[T]
	opts    SinkOptions
	conn    *sinkConn
	futures []jetstream.PubAckFuture
}

// Close drops the acknowledgements not waited for.
func (w *eagerWriter[T]) Close() error {
	w.futures = nil
	if w.conn != nil {
		w.conn = nil
		w.sink.release()
	}
	return nil
}

func (w *eagerWriter[T]) Write(rec T) error {
	if w.conn == nil {
		c, err := w.sink.acquire(context.Background())
		if err != nil {
			return err
		}
		w.conn = c
	}
	m := w.sink.encode(rec)
	f, err := w.conn.js.PublishMsgAsync(w.sink.natsMsg(&m), jetstream.WithStallWait(w.opts.AckTimeout))
	if err != nil {
		return fmt.Errorf("nats sink: publish to %s: %w", w.sink.subject, err)
	}
	w.futures = append(w.futures, f)
	if len(w.futures) >= w.opts.MaxAckPending {
		return w.Flush(false)
	}
	return nil
}

func (w *eagerWriter[T]) WriteBatch(recs []T) error {
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			return err
		}
	}
	return nil
}

// Flush waits for the acknowledgements of every record written so far.
func (w *eagerWriter[T]) Flush(bool) error {
	if err := waitAcks(context.Background(), w.opts.AckTimeout, w.futures); err != nil {
		return fmt.Errorf("nats sink: %w", err)
	}
	clear(w.futures)
	w.futures = w.futures[:0]
	return nil
}
