package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirstream/weir/connector"
)

// Guarantee is the delivery guarantee of a Sink, as Flink's
// DeliveryGuarantee.
type Guarantee int

const (
	// AtLeastOnce flushes every record to the brokers at each checkpoint:
	// none is lost, and a restore may write some again (the default).
	AtLeastOnce Guarantee = iota
	// ExactlyOnce writes the records between two checkpoints in a Kafka
	// transaction that the checkpoint's completion commits; consumers
	// reading with read_committed see each record once.
	ExactlyOnce
	// None hands records to the producer and does not wait: a failure may
	// lose the records still buffered.
	None
)

func (g Guarantee) String() string {
	switch g {
	case AtLeastOnce:
		return "at-least-once"
	case ExactlyOnce:
		return "exactly-once"
	case None:
		return "none"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// Defaults of SinkOptions.
const (
	// DefaultTransactionTimeout stays under the broker's default
	// transaction.max.timeout.ms (15 minutes). Flink's default of one hour
	// fails against a broker with default settings.
	DefaultTransactionTimeout = 10 * time.Minute
)

// SinkOptions configures a Sink.
type SinkOptions struct {
	// Brokers are the seed brokers, "host:port". Required.
	Brokers []string
	// Topic is the topic of records whose Record.Topic is empty. The
	// topic must exist (the sink does not create topics, as Flink's).
	Topic string
	// Guarantee is the delivery guarantee. Default AtLeastOnce.
	Guarantee Guarantee
	// TransactionalIDPrefix names the transactions of ExactlyOnce:
	// "prefix-subtask-checkpoint". Required for ExactlyOnce; it must be
	// unique to the job, since transactions of this prefix that no
	// checkpoint records are aborted when the job starts.
	TransactionalIDPrefix string
	// TransactionTimeout is the timeout of each transaction; it must stay
	// under the broker's transaction.max.timeout.ms (checked when the sink
	// starts) and above CommitDeadline. Default 0: DefaultTransactionTimeout.
	TransactionTimeout time.Duration
	// CommitDeadline is the longest a pre-committed transaction may wait
	// for its commit: the checkpoint timeout plus the restart delay. The
	// sink refuses to start when TransactionTimeout is not longer. Default
	// 0: not checked.
	CommitDeadline time.Duration
	// ConnectTimeout bounds the requests of the start-up checks, of a
	// commit and of aborting transactions. Default 0: DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ClientOptions are passed on to every franz-go client the sink
	// creates (TLS, SASL, linger, batch sizes), after the sink's own.
	ClientOptions []kgo.Opt
}

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *SinkOptions) EnsureDefaults() *SinkOptions {
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	return o
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Validate reports the first field that is missing or out of range.
func (o *SinkOptions) Validate() error {
	switch {
	case len(o.Brokers) == 0:
		return errors.New("kafka sink: SinkOptions.Brokers is empty: name at least one broker host:port")
	case o.Topic == "":
		return errors.New("kafka sink: SinkOptions.Topic is empty: name the topic to write to")
	case o.Guarantee < AtLeastOnce || o.Guarantee > None:
		return fmt.Errorf("kafka sink: SinkOptions.Guarantee %d is not a Guarantee", int(o.Guarantee))
	case o.Guarantee == ExactlyOnce && o.TransactionalIDPrefix == "":
		return errors.New("kafka sink: exactly-once needs SinkOptions.TransactionalIDPrefix, unique to the job")
	case o.TransactionalIDPrefix != "" && !prefixRE.MatchString(o.TransactionalIDPrefix):
		return fmt.Errorf("kafka sink: TransactionalIDPrefix %q: use letters, digits, '.', '_' and '-'", o.TransactionalIDPrefix)
	case o.TransactionTimeout < 0 || o.CommitDeadline < 0 || o.ConnectTimeout < 0:
		return errors.New("kafka sink: SinkOptions durations must not be negative")
	}
	if o.Guarantee == ExactlyOnce {
		timeout := o.TransactionTimeout
		if timeout == 0 {
			timeout = DefaultTransactionTimeout
		}
		if o.CommitDeadline > 0 && timeout <= o.CommitDeadline {
			return fmt.Errorf("kafka sink: TransactionTimeout %v is not longer than the checkpoint timeout plus the restart delay (%v): a pre-committed transaction could time out, and its records be lost, before the checkpoint commits it; raise TransactionTimeout or shorten those",
				timeout, o.CommitDeadline)
		}
	}
	return nil
}

func (o *SinkOptions) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(o.Brokers...), kgo.DefaultProduceTopic(o.Topic)}
	opts = append(opts, extra...)
	return append(opts, o.ClientOptions...)
}

func (o *SinkOptions) brokers() string { return strings.Join(o.Brokers, ",") }

// Sink writes to Kafka. See the package documentation.
type Sink[T any] struct {
	opts SinkOptions
	ser  Serializer[T]

	mu sync.Mutex
	// controls holds each live writer's control client (by subtask), used
	// by Commit so that a commit needs no new connection.
	controls map[int]*kgo.Client
	// restored is the newest checkpoint id of the committables Cleanup
	// was given: new transactions are numbered after it.
	restored int64
}

var (
	_ connector.Sink[string]        = (*Sink[string])(nil)
	_ connector.Committer           = (*Sink[string])(nil)
	_ connector.Cleaner             = (*Sink[string])(nil)
	_ connector.BatchWriter[string] = (*writer[string])(nil)
	_ connector.PreCommitter        = (*txnWriter[string])(nil)
)

// NewSink returns a sink that turns values into records with ser. Invalid
// options are reported by NewWriter and Check.
func NewSink[T any](opts SinkOptions, ser Serializer[T]) *Sink[T] {
	return &Sink[T]{opts: opts, ser: ser, controls: map[int]*kgo.Client{}}
}

func (s *Sink[T]) options() (SinkOptions, error) {
	o := s.opts
	if err := o.Validate(); err != nil {
		return o, err
	}
	if s.ser == nil {
		return o, errors.New("kafka sink: the Serializer is nil")
	}
	o.EnsureDefaults()
	return o, nil
}

// Check connects to the brokers, checks that the topic exists and, for
// ExactlyOnce, that TransactionTimeout is within the broker's
// transaction.max.timeout.ms. Writers make the same checks when they
// start.
func (s *Sink[T]) Check(ctx context.Context) error {
	o, err := s.options()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(o.clientOpts()...)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	defer cl.Close()
	return check(ctx, kadm.NewClient(cl), &o)
}

func check(ctx context.Context, adm *kadm.Client, o *SinkOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	if _, err := partitionCounts(ctx, adm, "kafka sink", o.brokers(), []string{o.Topic}); err != nil {
		return err
	}
	if o.Guarantee != ExactlyOnce {
		return nil
	}
	max, err := brokerTxnMaxTimeout(ctx, adm)
	if err != nil {
		return fmt.Errorf("kafka sink: read transaction.max.timeout.ms of brokers %s: %v", o.brokers(), err)
	}
	if o.TransactionTimeout > max {
		return fmt.Errorf("kafka sink: TransactionTimeout %v exceeds the broker's transaction.max.timeout.ms %d (%v): lower the transaction timeout or raise the broker's limit",
			o.TransactionTimeout, max.Milliseconds(), max)
	}
	return nil
}

// brokerTxnMaxTimeout reads the smallest transaction.max.timeout.ms of
// the brokers.
func brokerTxnMaxTimeout(ctx context.Context, adm *kadm.Client) (time.Duration, error) {
	rcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		return 0, err
	}
	var min time.Duration
	for _, rc := range rcs {
		if rc.Err != nil {
			return 0, rc.Err
		}
		for _, c := range rc.Configs {
			if c.Key != "transaction.max.timeout.ms" || c.Value == nil {
				continue
			}
			ms, err := strconv.ParseInt(*c.Value, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("transaction.max.timeout.ms is %q", *c.Value)
			}
			if d := time.Duration(ms) * time.Millisecond; min == 0 || d < min {
				min = d
			}
		}
	}
	if min == 0 {
		return 0, errors.New("no broker reports transaction.max.timeout.ms")
	}
	return min, nil
}

// committable is what the checkpoint stores of a pre-committed
// transaction. A subtask that wrote nothing since the last checkpoint
// stores one without a TxnID, so that every checkpoint records the
// newest checkpoint id each subtask saw.
type committable struct {
	TxnID      string `json:"txn,omitempty"`
	ProducerID int64  `json:"pid,omitempty"`
	Epoch      int16  `json:"epoch,omitempty"`
	Checkpoint int64  `json:"checkpoint"`
}

func txnID(prefix string, subtask int, n int64) string {
	return fmt.Sprintf("%s-%d-%d", prefix, subtask, n)
}

// parseTxnID reads prefix-subtask-n back.
func parseTxnID(prefix, id string) (subtask int, n int64, ok bool) {
	rest, found := strings.CutPrefix(id, prefix+"-")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	st, err1 := strconv.Atoi(a)
	n, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || st < 0 || n < 0 {
		return 0, 0, false
	}
	return st, n, true
}

// Commit commits the pre-committed transactions with EndTxn, using the
// producer id and epoch each was pre-committed with. Committing one that
// was already committed succeeds.
func (s *Sink[T]) Commit(ctx context.Context, cms []connector.Committable) error {
	o, err := s.options()
	if err != nil {
		return err
	}
	var tmp *kgo.Client
	defer func() {
		if tmp != nil {
			tmp.Close()
		}
	}()
	for _, c := range cms {
		var cm committable
		if err := json.Unmarshal(c.Data, &cm); err != nil {
			return fmt.Errorf("kafka sink: committable of checkpoint %d, subtask %d, is not a Kafka transaction: %v", c.CheckpointID, c.Subtask, err)
		}
		if cm.TxnID == "" {
			continue
		}
		s.mu.Lock()
		cl := s.controls[c.Subtask]
		s.mu.Unlock()
		if cl == nil {
			if tmp == nil {
				if tmp, err = kgo.NewClient(o.clientOpts()...); err != nil {
					return fmt.Errorf("kafka sink: %w", err)
				}
			}
			cl = tmp
		}
		if err := endTxn(ctx, cl, &o, cm, true); err != nil {
			return err
		}
	}
	return nil
}

// endTxn ends a transaction by its stored producer id and epoch: franz-go
// cannot resume a transaction of another client, so this is the raw
// EndTxn request.
func endTxn(ctx context.Context, cl *kgo.Client, o *SinkOptions, cm committable, commit bool) error {
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = cm.TxnID
	req.ProducerID = cm.ProducerID
	req.ProducerEpoch = cm.Epoch
	req.Commit = commit
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
			errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable):
			select {
			case <-ctx.Done():
				return fmt.Errorf("kafka sink: commit transaction %q of checkpoint %d: %v (then %v)", cm.TxnID, cm.Checkpoint, err, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
			continue
		case errors.Is(err, kerr.InvalidTxnState) || errors.Is(err, kerr.ProducerFenced) ||
			errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerIDMapping) ||
			errors.Is(err, kerr.TransactionalIDNotFound):
			return fmt.Errorf("kafka sink: DATA MAY BE LOST: transaction %q (producer id %d, epoch %d) of checkpoint %d cannot be committed: %v; the broker aborted it, most likely because it stayed open longer than its timeout (%v) before the checkpoint completed, or another producer took its transactional id; raise TransactionTimeout (up to the broker's transaction.max.timeout.ms) or make recovery faster",
				cm.TxnID, cm.ProducerID, cm.Epoch, cm.Checkpoint, err, o.TransactionTimeout)
		default:
			return fmt.Errorf("kafka sink: commit transaction %q of checkpoint %d on %s: %v", cm.TxnID, cm.Checkpoint, o.brokers(), err)
		}
	}
}

// Cleanup aborts the open transactions of this prefix that keep does not
// name: those of writers that failed before their checkpoint completed.
func (s *Sink[T]) Cleanup(ctx context.Context, keep []connector.Committable) error {
	o, err := s.options()
	if err != nil {
		return err
	}
	if o.Guarantee != ExactlyOnce {
		return nil
	}
	names := map[string]bool{}
	var newest int64
	for _, c := range keep {
		newest = max(newest, c.CheckpointID)
		var cm committable
		if json.Unmarshal(c.Data, &cm) == nil && cm.TxnID != "" {
			names[cm.TxnID] = true
		}
	}
	s.mu.Lock()
	s.restored = max(s.restored, newest)
	s.mu.Unlock()
	cl, err := kgo.NewClient(o.clientOpts()...)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	defer cl.Close()
	_, err = abortLingering(ctx, cl, &o, func(id string, _ int) bool { return !names[id] })
	return err
}

// abortLingering aborts the ongoing transactions of the prefix for which
// which(id, subtask) is true, by initializing a producer on their ids
// (which makes the coordinator abort them). It returns the highest
// checkpoint number of the prefix the broker knows.
func abortLingering(ctx context.Context, cl *kgo.Client, o *SinkOptions, which func(id string, subtask int) bool) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	listed, err := kadm.NewClient(cl).ListTransactions(ctx, nil, nil)
	if err != nil {
		return 0, fmt.Errorf("kafka sink: list the transactions on %s (to abort those a failed run left open): %v", o.brokers(), err)
	}
	var newest int64
	for id, t := range listed {
		st, n, ok := parseTxnID(o.TransactionalIDPrefix, id)
		if !ok {
			continue
		}
		newest = max(newest, n)
		if t.State != "Ongoing" || !which(id, st) {
			continue
		}
		if err := abortTxn(ctx, cl, o, id); err != nil {
			return newest, err
		}
	}
	return newest, nil
}

func abortTxn(ctx context.Context, cl *kgo.Client, o *SinkOptions, id string) error {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = int32(o.TransactionTimeout.Milliseconds())
	req.ProducerID, req.ProducerEpoch = -1, -1
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
			errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable):
			select {
			case <-ctx.Done():
				return fmt.Errorf("kafka sink: abort lingering transaction %q: %v (then %v)", id, err, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		default:
			return fmt.Errorf("kafka sink: abort lingering transaction %q on %s: %v", id, o.brokers(), err)
		}
	}
}

// NewWriter returns the writer of one subtask. It connects on its first
// record or checkpoint.
func (s *Sink[T]) NewWriter(ctx connector.WriterContext) (connector.Writer[T], error) {
	o, err := s.options()
	if err != nil {
		return nil, err
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return nil, fmt.Errorf("kafka sink: invalid writer context: subtask %d of parallelism %d", ctx.Subtask, ctx.Parallelism)
	}
	logger := ctx.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s.mu.Lock()
	restored := s.restored
	s.mu.Unlock()
	w := &writer[T]{sink: s, opts: o, ser: s.ser, subtask: ctx.Subtask, parallelism: ctx.Parallelism, logger: logger, last: restored}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if o.Guarantee == ExactlyOnce {
		return &txnWriter[T]{w}, nil
	}
	return w, nil
}

type writer[T any] struct {
	sink                 *Sink[T]
	opts                 SinkOptions
	ser                  Serializer[T]
	subtask, parallelism int
	logger               *slog.Logger
	ctx                  context.Context
	cancel               context.CancelFunc

	// ctl is the writer's non-transactional client: it produces for
	// AtLeastOnce and None, and commits for ExactlyOnce.
	ctl     *kgo.Client
	started bool

	// cur is the client of the open transaction (ExactlyOnce), curID its
	// transactional id and curN the number in it.
	cur   *kgo.Client
	curID string
	curN  int64
	// last is the newest checkpoint or transaction number seen.
	last int64

	mu     sync.Mutex
	err    error // first produce error
	closed bool
}

// txnWriter is the writer of ExactlyOnce: it is a PreCommitter.
type txnWriter[T any] struct{ *writer[T] }

func (w *txnWriter[T]) PreCommit(checkpointID int64) ([]byte, error) {
	return w.preCommit(checkpointID)
}

var errSinkClosed = errors.New("kafka sink: writer is closed")

// start makes the start-up checks and opens the control client.
func (w *writer[T]) start() error {
	w.started = true
	cl, err := kgo.NewClient(w.opts.clientOpts(w.producerOpts()...)...)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	w.ctl = cl
	if err := check(w.ctx, kadm.NewClient(cl), &w.opts); err != nil {
		return err
	}
	if w.opts.Guarantee != ExactlyOnce {
		return nil
	}
	// A fresh start gets no Cleanup: abort what earlier runs of this
	// subtask (and, for subtask 0, of subtasks beyond the parallelism)
	// left open, and number the transactions after theirs.
	if _, err := abortLingering(w.ctx, cl, &w.opts, func(_ string, st int) bool {
		return st == w.subtask || (w.subtask == 0 && st >= w.parallelism)
	}); err != nil {
		return err
	}
	w.sink.mu.Lock()
	w.sink.controls[w.subtask] = cl
	w.sink.mu.Unlock()
	return nil
}

func (w *writer[T]) producerOpts() []kgo.Opt {
	var opts []kgo.Opt
	if w.opts.Guarantee == None {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	return opts
}

func (w *writer[T]) Write(v T) error {
	if w.closed {
		return errSinkClosed
	}
	rec, err := w.ser(v)
	if err != nil {
		return fmt.Errorf("kafka sink: serialize %T: %w", v, err)
	}
	cl, err := w.client()
	if err != nil {
		return err
	}
	if err := w.failed(); err != nil {
		return err
	}
	cl.Produce(w.ctx, &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp}, w.promise)
	return nil
}

// WriteBatch writes recs in order (connector.BatchWriter).
func (w *writer[T]) WriteBatch(recs []T) error {
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer[T]) promise(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	if w.err == nil {
		w.err = fmt.Errorf("kafka sink: produce to partition %d of topic %q on %s: %w", r.Partition, r.Topic, w.opts.brokers(), err)
	}
	w.mu.Unlock()
}

func (w *writer[T]) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// client returns the client to produce with, opening a transaction first
// under ExactlyOnce.
func (w *writer[T]) client() (*kgo.Client, error) {
	if !w.started {
		if err := w.start(); err != nil {
			return nil, err
		}
	}
	if w.opts.Guarantee != ExactlyOnce {
		return w.ctl, nil
	}
	if w.cur != nil {
		return w.cur, nil
	}
	n := w.last + 1
	id := txnID(w.opts.TransactionalIDPrefix, w.subtask, n)
	cl, err := kgo.NewClient(w.opts.clientOpts(kgo.TransactionalID(id), kgo.TransactionTimeout(w.opts.TransactionTimeout))...)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka sink: begin transaction %q: %w", id, err)
	}
	w.cur, w.curID, w.curN, w.last = cl, id, n, n
	return cl, nil
}

func (w *writer[T]) Flush(endOfInput bool) error {
	if w.closed {
		return errSinkClosed
	}
	if w.opts.Guarantee == None && !endOfInput {
		return w.failed()
	}
	cl := w.cur
	if w.opts.Guarantee != ExactlyOnce {
		cl = w.ctl
	}
	if cl != nil {
		if err := cl.Flush(w.ctx); err != nil {
			return fmt.Errorf("kafka sink: flush: %w", err)
		}
	}
	return w.failed()
}

func (w *writer[T]) preCommit(checkpointID int64) ([]byte, error) {
	if w.closed {
		return nil, errSinkClosed
	}
	if !w.started {
		if err := w.start(); err != nil {
			return nil, err
		}
	}
	cm := committable{Checkpoint: checkpointID}
	if w.cur != nil {
		if err := w.cur.Flush(w.ctx); err != nil {
			return nil, fmt.Errorf("kafka sink: flush transaction %q: %w", w.curID, err)
		}
		if err := w.failed(); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(w.ctx, w.opts.ConnectTimeout)
		pid, epoch, err := w.cur.ProducerID(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("kafka sink: producer id of transaction %q: %w", w.curID, err)
		}
		cm.TxnID, cm.ProducerID, cm.Epoch = w.curID, pid, epoch
		// The transaction stays open on the broker: Commit ends it by
		// producer id and epoch. Closing the client does not end it.
		w.cur.Close()
		w.cur = nil
	}
	w.last = max(w.last, checkpointID)
	return json.Marshal(cm)
}

func (w *writer[T]) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.cur != nil {
		// Abort the transaction no checkpoint pre-committed, so that it
		// does not hold read_committed consumers back until its timeout.
		ctx, cancel := context.WithTimeout(context.Background(), w.opts.ConnectTimeout)
		if err := w.cur.AbortBufferedRecords(ctx); err == nil {
			_ = w.cur.EndTransaction(ctx, kgo.TryAbort) // a failure leaves it to the timeout or the next start
		}
		cancel()
		w.cur.Close()
		w.cur = nil
	}
	w.cancel()
	if w.ctl != nil {
		w.sink.mu.Lock()
		if w.sink.controls[w.subtask] == w.ctl {
			delete(w.sink.controls, w.subtask)
		}
		w.sink.mu.Unlock()
		w.ctl.Close()
	}
	return nil
}
