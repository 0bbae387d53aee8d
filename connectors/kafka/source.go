package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
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

// Start says where a source that starts without a checkpoint begins to
// read each partition.
type Start int

const (
	// StartEarliest reads each partition from its earliest offset (the
	// default, as Flink's KafkaSource).
	StartEarliest Start = iota
	// StartLatest reads only what is written after the job started.
	StartLatest
	// StartTimestamp reads from the first record whose timestamp is at or
	// after SourceOptions.StartTimestamp.
	StartTimestamp
	// StartCommitted reads from the offsets committed by
	// SourceOptions.Group; a partition without a committed offset is read
	// from its earliest offset.
	StartCommitted
)

func (s Start) String() string {
	switch s {
	case StartEarliest:
		return "earliest"
	case StartLatest:
		return "latest"
	case StartTimestamp:
		return "timestamp"
	case StartCommitted:
		return "committed"
	}
	return fmt.Sprintf("Start(%d)", int(s))
}

// Stop says whether a source ends.
type Stop int

const (
	// StopNever reads on until the job is cancelled (unbounded; the
	// default).
	StopNever Stop = iota
	// StopLatest fixes, when the job first starts, the end offset of every
	// partition (its last stable offset under read_committed, its high
	// watermark otherwise) and ends each partition there: the source is
	// bounded (Flink's setBounded(OffsetsInitializer.latest())). The stop
	// offsets are kept in the checkpoint, so a restored job stops at the
	// same place.
	StopLatest
)

// Defaults of SourceOptions.
const (
	DefaultBatchSize         = 2048
	DefaultConnectTimeout    = 10 * time.Second
	DefaultDiscoveryInterval = 5 * time.Minute
)

// SourceOptions configures a Source.
type SourceOptions struct {
	// Brokers are the seed brokers, "host:port". Required.
	Brokers []string
	// Topics are the topics to read. Required unless TopicPattern is set.
	Topics []string
	// TopicPattern, a regular expression (RE2, anchored at both ends),
	// reads every topic whose whole name it matches (beside Topics, if
	// both are set): those listed when the job first starts, and those
	// created later that partition discovery finds.
	TopicPattern string
	// DiscoveryInterval is how often each reader of an unbounded source
	// looks for partitions added to its topics, and for topics created
	// since that TopicPattern matches (Flink's
	// partition.discovery.interval.ms). A partition found is read from its
	// earliest offset, whatever Start says (Start is for the partitions of
	// the first start; Flink does the same). Negative turns discovery off:
	// the source reads the partitions of its first start only. A bounded
	// source (Stop set) never discovers. Default 0:
	// DefaultDiscoveryInterval (5 minutes, Flink's KafkaSource default).
	DiscoveryInterval time.Duration
	// Group is the consumer group whose committed offsets StartCommitted
	// reads and to which the source commits the offsets of its
	// checkpoints, for monitoring only (the checkpoint is the truth).
	// Default "": no group, no commits.
	Group string
	// Start is where a job that starts without a checkpoint begins.
	// Default StartEarliest.
	Start Start
	// StartTimestamp is the time StartTimestamp starts at.
	StartTimestamp time.Time
	// Stop is whether the source ends. Default StopNever.
	Stop Stop
	// ReadUncommitted reads records of open and aborted transactions too.
	// Default false: read_committed, as Flink.
	ReadUncommitted bool
	// OnDeserializeError receives each record the deserializer rejects,
	// with the deserializer's error; it may write it to a dead-letter
	// topic, log it or count it. If it returns an error the job fails.
	// Default nil: a record that fails to deserialize fails the job.
	OnDeserializeError func(r *kgo.Record, err error) error
	// BatchSize is the most records a reader emits per Poll. Default 0:
	// DefaultBatchSize.
	BatchSize int
	// ConnectTimeout bounds the requests made when the job starts (listing
	// partitions and offsets). Default 0: DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ClientOptions are passed on to every franz-go client the source
	// creates (TLS, SASL, fetch sizes), after the source's own.
	ClientOptions []kgo.Opt
}

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *SourceOptions) EnsureDefaults() *SourceOptions {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.DiscoveryInterval == 0 {
		o.DiscoveryInterval = DefaultDiscoveryInterval
	}
	return o
}

// Validate reports the first field that is missing or out of range.
func (o *SourceOptions) Validate() error {
	switch {
	case len(o.Brokers) == 0:
		return errors.New("kafka source: SourceOptions.Brokers is empty: name at least one broker host:port")
	case len(o.Topics) == 0 && o.TopicPattern == "":
		return errors.New("kafka source: SourceOptions.Topics is empty: name at least one topic, or set TopicPattern")
	case o.Start < StartEarliest || o.Start > StartCommitted:
		return fmt.Errorf("kafka source: SourceOptions.Start %d is not a Start", int(o.Start))
	case o.Start == StartCommitted && o.Group == "":
		return errors.New("kafka source: SourceOptions.Start is StartCommitted but Group is empty: name the consumer group")
	case o.Start == StartTimestamp && o.StartTimestamp.IsZero():
		return errors.New("kafka source: SourceOptions.Start is StartTimestamp but StartTimestamp is zero")
	case o.Stop != StopNever && o.Stop != StopLatest:
		return fmt.Errorf("kafka source: SourceOptions.Stop %d is not a Stop", int(o.Stop))
	case o.BatchSize < 0:
		return fmt.Errorf("kafka source: SourceOptions.BatchSize is %d, want >= 1 (0 means %d)", o.BatchSize, DefaultBatchSize)
	case o.ConnectTimeout < 0:
		return fmt.Errorf("kafka source: SourceOptions.ConnectTimeout is %v, want > 0", o.ConnectTimeout)
	}
	if o.TopicPattern != "" {
		if _, err := regexp.Compile("^(?:" + o.TopicPattern + ")$"); err != nil {
			return fmt.Errorf("kafka source: SourceOptions.TopicPattern %q: %v", o.TopicPattern, err)
		}
	}
	for _, t := range o.Topics {
		if t == "" || strings.Contains(t, "/") {
			return fmt.Errorf("kafka source: topic name %q is not valid", t)
		}
	}
	return nil
}

// Source reads Kafka topics; each topic partition is a split. See the
// package documentation.
type Source[T any] struct {
	opts  SourceOptions
	deser Deserializer[T]
}

var (
	_ connector.Source[string]     = (*Source[string])(nil)
	_ connector.SplitDiscoverer    = (*Source[string])(nil)
	_ connector.CheckpointListener = (*reader[string])(nil)
)

// NewSource returns a source of the records of opts.Topics, turned into
// values by deser. Invalid options are reported by Splits and NewReader.
func NewSource[T any](opts SourceOptions, deser Deserializer[T]) *Source[T] {
	return &Source[T]{opts: opts, deser: deser}
}

// Boundedness reports Bounded with StopLatest and Unbounded otherwise.
func (s *Source[T]) Boundedness() connector.Boundedness {
	if s.opts.Stop == StopLatest {
		return connector.Bounded
	}
	return connector.Unbounded
}

// DiscoversSplits reports whether the source finds partitions while the
// job runs: unbounded, with DiscoveryInterval not negative.
func (s *Source[T]) DiscoversSplits() bool {
	return s.opts.Stop == StopNever && s.opts.DiscoveryInterval >= 0
}

// SplitOwner is the owner rule of a discovering source's partitions, as
// Flink's KafkaSource assigns them: partition p of a topic goes to the
// subtask (h + p) mod parallelism, h an FNV-1a hash of the topic, so that
// the partitions of one topic spread evenly.
func (s *Source[T]) SplitOwner(splitID string, parallelism int) int {
	i := strings.LastIndexByte(splitID, '/')
	if i < 0 {
		return connector.HashOwner(splitID, parallelism)
	}
	p, err := strconv.ParseInt(splitID[i+1:], 10, 32)
	if err != nil || p < 0 {
		return connector.HashOwner(splitID, parallelism)
	}
	return (connector.HashOwner(splitID[:i], parallelism) + int(p%int64(parallelism))) % parallelism
}

func (s *Source[T]) options() (SourceOptions, error) {
	o := s.opts
	if err := o.Validate(); err != nil {
		return o, err
	}
	if s.deser == nil {
		return o, errors.New("kafka source: the Deserializer is nil")
	}
	o.EnsureDefaults()
	return o, nil
}

func (o *SourceOptions) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(o.Brokers...)}
	opts = append(opts, extra...)
	return append(opts, o.ClientOptions...)
}

func (o *SourceOptions) brokers() string { return strings.Join(o.Brokers, ",") }

// Check connects to the brokers and checks that every topic exists. It
// fails fast with an error naming the broker or the topic; Splits makes
// the same checks.
func (s *Source[T]) Check(ctx context.Context) error {
	o, err := s.options()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(o.clientOpts()...)
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	if err := resolveTopics(ctx, adm, &o); err != nil {
		return err
	}
	_, err = partitionCounts(ctx, adm, "kafka source", o.brokers(), o.Topics)
	return err
}

// resolveTopics adds the topics TopicPattern matches to o.Topics.
func resolveTopics(ctx context.Context, adm *kadm.Client, o *SourceOptions) error {
	if o.TopicPattern == "" {
		return nil
	}
	re := regexp.MustCompile("^(?:" + o.TopicPattern + ")$") // checked by Validate
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("kafka source: cannot reach brokers %s: %v", o.brokers(), err)
	}
	topics := slices.Clone(o.Topics)
	for _, t := range listed.Names() {
		if re.MatchString(t) && !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return fmt.Errorf("kafka source: no topic on brokers %s matches TopicPattern %q", o.brokers(), o.TopicPattern)
	}
	o.Topics = topics
	return nil
}

// partitionCounts returns the number of partitions of each topic, or an
// error naming the brokers that could not be reached or the topic that
// does not exist.
func partitionCounts(ctx context.Context, adm *kadm.Client, who, brokers string, topics []string) (map[string]int32, error) {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot reach brokers %s: %v", who, brokers, err)
	}
	counts := make(map[string]int32, len(topics))
	for _, t := range topics {
		d, ok := md.Topics[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return nil, fmt.Errorf("%s: topic %q does not exist on brokers %s: create it first", who, t, brokers)
		case d.Err != nil:
			return nil, fmt.Errorf("%s: topic %q on brokers %s: %v", who, t, brokers, d.Err)
		}
		counts[t] = int32(len(d.Partitions))
	}
	return counts, nil
}

// Splits returns one split per partition of each topic, in topic and
// partition order, with its start offset and (in bounded mode) its stop
// offset resolved now, when the job first starts.
func (s *Source[T]) Splits(ctx context.Context, parallelism int) ([]connector.SplitState, error) {
	o, err := s.options()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(o.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	if err := resolveTopics(ctx, adm, &o); err != nil {
		return nil, err
	}
	counts, err := partitionCounts(ctx, adm, "kafka source", o.brokers(), o.Topics)
	if err != nil {
		return nil, err
	}
	start, err := s.startOffsets(ctx, adm, &o)
	if err != nil {
		return nil, err
	}
	var stop kadm.ListedOffsets
	if o.Stop == StopLatest {
		if stop, err = endOffsets(ctx, adm, &o); err != nil {
			return nil, err
		}
	}
	topics := slices.Clone(o.Topics)
	slices.Sort(topics)
	topics = slices.Compact(topics)
	var splits []connector.SplitState
	for _, t := range topics {
		for p := range counts[t] {
			next, err := lookup(start, t, p, "start")
			if err != nil {
				return nil, err
			}
			ps := partitionSplit{Topic: t, Partition: p, Stop: -1}
			if stop != nil {
				if ps.Stop, err = lookup(stop, t, p, "stop"); err != nil {
					return nil, err
				}
			}
			splits = append(splits, ps.state(next))
		}
	}
	return splits, nil
}

func lookup(l kadm.ListedOffsets, t string, p int32, what string) (int64, error) {
	o, ok := l.Lookup(t, p)
	if !ok {
		return 0, fmt.Errorf("kafka source: no %s offset listed for partition %d of topic %q", what, p, t)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("kafka source: %s offset of partition %d of topic %q: %v", what, p, t, o.Err)
	}
	return o.Offset, nil
}

func endOffsets(ctx context.Context, adm *kadm.Client, o *SourceOptions) (kadm.ListedOffsets, error) {
	var l kadm.ListedOffsets
	var err error
	if o.ReadUncommitted {
		l, err = adm.ListEndOffsets(ctx, o.Topics...)
	} else {
		l, err = adm.ListCommittedOffsets(ctx, o.Topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka source: list end offsets of %s on %s: %v", strings.Join(o.Topics, ","), o.brokers(), err)
	}
	return l, nil
}

func (s *Source[T]) startOffsets(ctx context.Context, adm *kadm.Client, o *SourceOptions) (kadm.ListedOffsets, error) {
	var l kadm.ListedOffsets
	var err error
	switch o.Start {
	case StartLatest:
		return endOffsets(ctx, adm, o)
	case StartTimestamp:
		l, err = adm.ListOffsetsAfterMilli(ctx, o.StartTimestamp.UnixMilli(), o.Topics...)
	default:
		l, err = adm.ListStartOffsets(ctx, o.Topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka source: list %v offsets of %s on %s: %v", o.Start, strings.Join(o.Topics, ","), o.brokers(), err)
	}
	if o.Start != StartCommitted {
		return l, nil
	}
	committed, err := adm.FetchOffsetsForTopics(ctx, o.Group, o.Topics...)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return l, nil // a group that never committed: from the earliest offsets
	}
	if err != nil {
		return nil, fmt.Errorf("kafka source: fetch the offsets of group %q on %s: %v", o.Group, o.brokers(), err)
	}
	for t, ps := range committed {
		for p, c := range ps {
			if c.At >= 0 {
				if cur, ok := l[t][p]; ok {
					cur.Offset = c.At
					l[t][p] = cur
				}
			}
		}
	}
	return l, nil
}

// NewReader returns the reader of one subtask. It connects on its first
// Poll.
func (s *Source[T]) NewReader(ctx connector.ReaderContext) (connector.Reader[T], error) {
	o, err := s.options()
	if err != nil {
		return nil, err
	}
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return nil, fmt.Errorf("kafka source: invalid reader context: subtask %d of parallelism %d", ctx.Subtask, ctx.Parallelism)
	}
	logger := ctx.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var claims *connector.SplitClaims
	if s.DiscoversSplits() {
		claims = connector.NewSplitClaims(ctx, s.SplitOwner)
	}
	return &reader[T]{
		opts:    o,
		deser:   s.deser,
		logger:  logger,
		claims:  claims,
		owner:   func(id string) bool { return s.SplitOwner(id, ctx.Parallelism) == ctx.Subtask },
		parts:   make(map[tp]*partState),
		outs:    make(map[string]connector.Emitter[T]),
		notify:  make(chan struct{}, 1),
		drained: make(chan struct{}, 1),
	}, nil
}

type tp struct {
	topic     string
	partition int32
}

// partState is a split being read.
type partState struct {
	split partitionSplit
	id    string
	next  int64
}

func (p *partState) done() bool { return p.split.Stop >= 0 && p.next >= p.split.Stop }

type reader[T any] struct {
	opts   SourceOptions
	deser  Deserializer[T]
	logger *slog.Logger

	parts  map[tp]*partState
	order  []*partState // for Snapshot, in the order assigned
	noMore bool
	outs   map[string]connector.Emitter[T]

	// claims, when not nil, holds the partitions of a discovering reader
	// (connector.SplitDiscoverer); owner is its owner rule, for the
	// discovery goroutine.
	claims *connector.SplitClaims
	owner  func(splitID string) bool

	// cl, cancel and wg belong to the fetch goroutine started by the
	// first Poll.
	cl      *kgo.Client
	adm     *kadm.Client
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool

	// mu guards pending and fetchErr, filled by the fetch goroutine, and
	// found, filled by the discovery goroutine.
	mu       sync.Mutex
	pending  [][]*kgo.Record
	fetchErr error
	found    []foundPartition
	// notify signals that pending or fetchErr changed; drained tells the
	// fetch goroutine that Poll took pending.
	notify, drained chan struct{}

	// batch holds the chunks (each one partition's records) taken from
	// pending; batch[chunk][cursor] is the next record to look at.
	batch         [][]*kgo.Record
	chunk, cursor int

	// snaps holds the offsets of each checkpoint taken and not yet
	// complete; they go to the group when it completes. commitBusy says a
	// commit is in flight.
	snaps      map[int64]map[tp]int64
	commitBusy chan struct{}

	closed bool
}

var errClosed = errors.New("kafka source: reader is closed")

var ready = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (r *reader[T]) AddSplits(splits []connector.SplitState) error {
	if r.closed {
		return errClosed
	}
	if r.started && len(splits) > 0 {
		return errors.New("kafka source: splits added after the reader started; the reader takes its splits before its first Poll")
	}
	add := make([]*partState, 0, len(splits))
	seen := map[tp]bool{}
	for _, st := range splits {
		p, next, err := decodeSplit(st)
		if err != nil {
			return fmt.Errorf("kafka source: add splits: %w", err)
		}
		k := tp{p.Topic, p.Partition}
		if r.parts[k] != nil || seen[k] {
			return fmt.Errorf("kafka source: split %q assigned twice", st.ID)
		}
		if r.claims != nil {
			if err := r.claims.Assigned(st.ID); err != nil {
				return fmt.Errorf("kafka source: %w", err)
			}
		}
		seen[k] = true
		add = append(add, &partState{split: p, id: st.ID, next: next})
	}
	for _, ps := range add {
		if ps.done() {
			continue // already at its stop offset
		}
		r.parts[tp{ps.split.Topic, ps.split.Partition}] = ps
		r.order = append(r.order, ps)
	}
	return nil
}

func (r *reader[T]) NoMoreSplits() { r.noMore = true }

// start checks that the partitions exist and starts the client and the
// fetch goroutine.
func (r *reader[T]) start() error {
	r.started = true
	if len(r.parts) == 0 && r.claims == nil {
		return nil
	}
	iso := kgo.ReadCommitted()
	if r.opts.ReadUncommitted {
		iso = kgo.ReadUncommitted()
	}
	assign := map[string]map[int32]kgo.Offset{}
	var topics []string
	for _, ps := range r.order {
		t := ps.split.Topic
		if assign[t] == nil {
			assign[t] = map[int32]kgo.Offset{}
			topics = append(topics, t)
		}
		assign[t][ps.split.Partition] = kgo.NewOffset().At(ps.next)
	}
	own := []kgo.Opt{
		kgo.ConsumePartitions(assign),
		kgo.FetchIsolationLevel(iso),
		// Control records (transaction markers) come through so that
		// the position moves past them: a partition whose last records
		// before its stop offset are markers still finishes.
		kgo.KeepControlRecords(),
	}
	if r.claims != nil {
		// A discovered partition is read once the client's metadata
		// knows it and the fetch in flight returns: with franz-go's
		// defaults (5 s each) that takes up to 10 s; these are the Java
		// consumer's (fetch.max.wait.ms 500 ms), as a Flink user has them.
		own = append(own, kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(500*time.Millisecond))
	}
	cl, err := kgo.NewClient(r.opts.clientOpts(own...)...)
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	r.cl, r.adm = cl, kadm.NewClient(cl)
	var counts map[string]int32
	if len(topics) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.ConnectTimeout)
		counts, err = partitionCounts(ctx, r.adm, "kafka source", r.opts.brokers(), topics)
		cancel()
	}
	if err == nil {
		for _, ps := range r.order {
			if n := counts[ps.split.Topic]; ps.split.Partition >= n {
				err = fmt.Errorf("kafka source: topic %q has %d partitions, but partition %d is to be read (from the checkpoint): was the topic deleted and created again?",
					ps.split.Topic, n, ps.split.Partition)
				break
			}
		}
	}
	if err != nil {
		cl.Close()
		r.cl = nil
		return err
	}
	var seen map[string]bool
	if r.claims != nil {
		// Discover once now, before the first fetch: partitions added
		// since the checkpoint (or since Splits) are then read from the
		// start, without waiting for a fetch in flight to return.
		seen = make(map[string]bool, len(r.order))
		for _, ps := range r.order {
			seen[ps.id] = true
		}
		found, err := r.listNew(context.Background(), seen)
		if err != nil {
			r.logger.Warn("kafka source: partition discovery failed; trying again at the next interval", "interval", r.opts.DiscoveryInterval, "err", err)
		}
		for _, f := range found {
			seen[splitID(f.split.Topic, f.split.Partition)] = true
		}
		r.found = found
		r.takeFound()
	}
	fctx, fcancel := context.WithCancel(context.Background())
	r.cancel = fcancel
	r.wg.Go(func() { r.fetch(fctx) })
	if r.claims != nil {
		r.wg.Go(func() { r.discover(fctx, seen) })
	}
	return nil
}

// foundPartition is a partition the discovery goroutine found for this
// reader, with its earliest offset.
type foundPartition struct {
	split partitionSplit
	next  int64
}

// discover runs on its own goroutine: every DiscoveryInterval it lists the partitions of the source's topics and
// hands those this reader owns and has not seen (seen starts with the
// assigned ones) to Poll through found. A failed listing is logged and
// tried again at the next interval.
func (r *reader[T]) discover(ctx context.Context, seen map[string]bool) {
	t := time.NewTimer(r.opts.DiscoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		found, err := r.listNew(ctx, seen)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.logger.Warn("kafka source: partition discovery failed; trying again at the next interval", "interval", r.opts.DiscoveryInterval, "err", err)
		}
		if len(found) > 0 {
			for _, f := range found {
				seen[splitID(f.split.Topic, f.split.Partition)] = true
			}
			r.mu.Lock()
			r.found = append(r.found, found...)
			r.mu.Unlock()
			select {
			case r.notify <- struct{}{}:
			default:
			}
		}
		t.Reset(r.opts.DiscoveryInterval)
	}
}

// listNew lists the partitions of the source's topics that this reader
// owns and has not seen, with their earliest offsets. The listing is a
// metadata request of its own: kadm's listings may answer from the
// client's cache, which knows only the topics the client reads.
func (r *reader[T]) listNew(ctx context.Context, seen map[string]bool) ([]foundPartition, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.ConnectTimeout)
	defer cancel()
	o := r.opts
	req := kmsg.NewPtrMetadataRequest()
	var re *regexp.Regexp
	if o.TopicPattern != "" {
		re = regexp.MustCompile("^(?:" + o.TopicPattern + ")$") // checked by Validate
		req.Topics = nil                                        // every topic
	} else {
		for _, t := range o.Topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return nil, fmt.Errorf("list the partitions of the topics on %s: %v", o.brokers(), err)
	}
	var found []foundPartition
	var topics []string
	for _, mt := range resp.Topics {
		if mt.Topic == nil || mt.ErrorCode != 0 || mt.IsInternal {
			continue // deleted, or not there yet: the readers of its partitions fail on their own
		}
		t := *mt.Topic
		if !slices.Contains(o.Topics, t) && (re == nil || !re.MatchString(t)) {
			continue
		}
		added := false
		for _, mp := range mt.Partitions {
			id := splitID(t, mp.Partition)
			if seen[id] || !r.owner(id) {
				continue
			}
			if !added {
				topics, added = append(topics, t), true
			}
			found = append(found, foundPartition{split: partitionSplit{Topic: t, Partition: mp.Partition, Stop: -1}})
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	start, err := r.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list the earliest offsets of %s on %s: %v", strings.Join(topics, ","), o.brokers(), err)
	}
	for i := range found {
		f := &found[i]
		if f.next, err = lookup(start, f.split.Topic, f.split.Partition, "start"); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(found, func(a, b foundPartition) int {
		return strings.Compare(splitID(a.split.Topic, a.split.Partition), splitID(b.split.Topic, b.split.Partition))
	})
	return found, nil
}

// takeFound adds the partitions discovery found to the reader and to the
// client's assignment.
func (r *reader[T]) takeFound() {
	r.mu.Lock()
	found := r.found
	r.found = nil
	r.mu.Unlock()
	add := map[string]map[int32]kgo.Offset{}
	for _, f := range found {
		id := splitID(f.split.Topic, f.split.Partition)
		if !r.claims.Claim(id) {
			continue
		}
		ps := &partState{split: f.split, id: id, next: f.next}
		r.parts[tp{f.split.Topic, f.split.Partition}] = ps
		r.order = append(r.order, ps)
		if add[f.split.Topic] == nil {
			add[f.split.Topic] = map[int32]kgo.Offset{}
		}
		add[f.split.Topic][f.split.Partition] = kgo.NewOffset().At(f.next)
		r.logger.Info("kafka source: reading a discovered partition", "topic", f.split.Topic, "partition", f.split.Partition, "offset", f.next)
	}
	if len(add) > 0 {
		r.cl.AddConsumePartitions(add)
	}
}

// fetch runs on its own goroutine: it polls the client and hands the
// fetched partitions to Poll through pending, one poll at a time. The
// records are not copied: a chunk is a fetched partition's own slice.
func (r *reader[T]) fetch(ctx context.Context) {
	for {
		fs := r.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		var ferr error
		var chunks [][]*kgo.Record
		for i := range fs {
			for j := range fs[i].Topics {
				ft := &fs[i].Topics[j]
				for k := range ft.Partitions {
					fp := &ft.Partitions[k]
					if fp.Err != nil && ferr == nil && !errors.Is(fp.Err, context.Canceled) {
						ferr = fmt.Errorf("kafka source: fetch partition %d of topic %q from %s: %w", fp.Partition, ft.Topic, r.opts.brokers(), fp.Err)
					}
					if len(fp.Records) > 0 {
						chunks = append(chunks, fp.Records)
					}
				}
			}
		}
		r.mu.Lock()
		r.pending = append(r.pending, chunks...)
		if ferr != nil && r.fetchErr == nil {
			r.fetchErr = ferr
		}
		r.mu.Unlock()
		select {
		case r.notify <- struct{}{}:
		default:
		}
		if ferr != nil {
			return
		}
		if len(chunks) == 0 {
			continue
		}
		select {
		case <-r.drained:
		case <-ctx.Done():
			return
		}
	}
}

// take moves the pending chunks into batch.
func (r *reader[T]) take() error {
	r.mu.Lock()
	chunks, err := r.pending, r.fetchErr
	r.pending = nil
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if len(chunks) > 0 {
		r.batch, r.chunk, r.cursor = chunks, 0, 0
		select {
		case r.drained <- struct{}{}:
		default:
		}
	}
	return nil
}

// more reports whether batch holds records not yet looked at.
func (r *reader[T]) more() bool { return r.chunk < len(r.batch) }

func (r *reader[T]) Poll(out connector.Emitter[T]) (connector.Status, error) {
	if r.closed {
		return connector.EndOfInput, errClosed
	}
	if !r.started {
		if err := r.start(); err != nil {
			return connector.EndOfInput, err
		}
	}
	if r.claims != nil {
		r.takeFound()
	}
	so, _ := out.(connector.SplitOutputs[T])
	for emitted := 0; emitted < r.opts.BatchSize && len(r.parts) > 0; {
		if !r.more() {
			r.batch, r.chunk, r.cursor = nil, 0, 0
			if err := r.take(); err != nil {
				return connector.EndOfInput, err
			}
			if !r.more() {
				break
			}
		}
		// A chunk is one partition's records: look the partition up once.
		recs := r.batch[r.chunk]
		ps := r.parts[tp{recs[0].Topic, recs[0].Partition}]
		if ps == nil {
			r.chunk, r.cursor = r.chunk+1, 0 // a finished partition
			continue
		}
		em := r.emitter(out, so, ps.id)
		for r.cursor < len(recs) && emitted < r.opts.BatchSize {
			rec := recs[r.cursor]
			r.cursor++
			if rec.Offset < ps.next {
				continue // already read
			}
			if ps.split.Stop >= 0 && rec.Offset >= ps.split.Stop {
				ps.next = ps.split.Stop
				break
			}
			ps.next = rec.Offset + 1
			if rec.Attrs.IsControl() {
				continue
			}
			v, err := r.deser(rec)
			if err != nil {
				if r.opts.OnDeserializeError == nil {
					return connector.EndOfInput, fmt.Errorf("kafka source: record at offset %d of partition %d of topic %q does not deserialize: %v (set SourceOptions.OnDeserializeError to route bad records elsewhere)",
						rec.Offset, rec.Partition, rec.Topic, err)
				}
				if herr := r.opts.OnDeserializeError(rec, err); herr != nil {
					return connector.EndOfInput, fmt.Errorf("kafka source: bad record at offset %d of partition %d of topic %q: %w", rec.Offset, rec.Partition, rec.Topic, herr)
				}
				continue
			}
			em.EmitAt(v, rec.Timestamp.UnixMilli())
			emitted++
			if ps.done() {
				break
			}
		}
		if ps.done() {
			r.finish(ps, so)
		}
		if r.cursor >= len(recs) || ps.done() {
			r.chunk, r.cursor = r.chunk+1, 0
		}
	}
	switch {
	case len(r.parts) == 0 && r.noMore && r.claims == nil:
		return connector.EndOfInput, nil
	case r.more():
		return connector.MoreAvailable, nil
	default:
		return connector.NothingAvailable, nil
	}
}

func (r *reader[T]) emitter(out connector.Emitter[T], so connector.SplitOutputs[T], id string) connector.Emitter[T] {
	if so == nil {
		return out
	}
	e, ok := r.outs[id]
	if !ok {
		e = so.ForSplit(id)
		r.outs[id] = e
	}
	return e
}

// finish drops a partition that reached its stop offset.
func (r *reader[T]) finish(ps *partState, so connector.SplitOutputs[T]) {
	delete(r.parts, tp{ps.split.Topic, ps.split.Partition})
	r.order = slices.DeleteFunc(r.order, func(o *partState) bool { return o == ps })
	if so != nil {
		so.ReleaseSplit(ps.id)
	}
	delete(r.outs, ps.id)
	if r.cl != nil {
		r.cl.RemoveConsumePartitions(map[string][]int32{ps.split.Topic: {ps.split.Partition}})
	}
}

func (r *reader[T]) Available() <-chan struct{} {
	if !r.started || r.more() || (len(r.parts) == 0 && r.noMore && r.claims == nil) {
		return ready
	}
	r.mu.Lock()
	has := len(r.pending) > 0 || r.fetchErr != nil || len(r.found) > 0
	r.mu.Unlock()
	if has {
		return ready
	}
	return r.notify
}

func (r *reader[T]) Snapshot(checkpointID int64) ([]connector.SplitState, error) {
	if r.closed {
		return nil, errClosed
	}
	states := make([]connector.SplitState, 0, len(r.order))
	snap := make(map[tp]int64, len(r.order))
	for _, ps := range r.order {
		states = append(states, ps.split.state(ps.next))
		snap[tp{ps.split.Topic, ps.split.Partition}] = ps.next
	}
	if r.opts.Group != "" {
		if r.snaps == nil {
			r.snaps = make(map[int64]map[tp]int64)
		}
		r.snaps[checkpointID] = snap
		if len(r.snaps) > maxPendingSnaps {
			// Notifications were missed (the job failed over, or
			// checkpoints are declined): forget the oldest.
			oldest := checkpointID
			for id := range r.snaps {
				oldest = min(oldest, id)
			}
			delete(r.snaps, oldest)
		}
	}
	return states, nil
}

// maxPendingSnaps bounds the offsets kept for checkpoints that have not
// completed yet.
const maxPendingSnaps = 32

// NotifyCheckpointComplete commits the offsets of checkpoint id (or of the
// newest earlier one taken by this reader) to the group, as Flink's
// KafkaSource does: for monitoring only, the checkpoint is the truth.
func (r *reader[T]) NotifyCheckpointComplete(id int64) error {
	best := int64(-1)
	for cid := range r.snaps {
		if cid <= id {
			best = max(best, cid)
		}
	}
	if best < 0 {
		return nil
	}
	offs := r.snaps[best]
	for cid := range r.snaps {
		if cid <= id {
			delete(r.snaps, cid)
		}
	}
	r.commitOffsets(offs)
	return nil
}

// commitOffsets commits offsets to the group in the background, unless a
// commit is still in flight (the next completed checkpoint covers it).
func (r *reader[T]) commitOffsets(snap map[tp]int64) {
	if r.closed || r.opts.Group == "" || r.adm == nil || len(snap) == 0 {
		return
	}
	if r.commitBusy != nil {
		select {
		case <-r.commitBusy:
		default:
			return // the last commit is still running: skip this one
		}
	}
	var offs kadm.Offsets
	for k, next := range snap {
		offs.Add(kadm.Offset{Topic: k.topic, Partition: k.partition, At: next, LeaderEpoch: -1})
	}
	done := make(chan struct{})
	r.commitBusy = done
	adm, group, logger, timeout := r.adm, r.opts.Group, r.logger, r.opts.ConnectTimeout
	r.wg.Go(func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		resp, err := adm.CommitOffsets(ctx, group, offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			logger.Warn("kafka source: committing offsets to the group failed (they are for monitoring only)", "group", group, "err", err)
		}
	})
}

func (r *reader[T]) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.cancel != nil {
		r.cancel()
	}
	if r.cl != nil {
		r.cl.Close()
	}
	r.wg.Wait()
	return nil
}

// CheckSplits checks, before a job restores, that every partition the
// restored split states name still exists: a topic that now has fewer
// partitions than the checkpoint is an error naming the topic, which no
// restart would cure.
func CheckSplits(ctx context.Context, opts SourceOptions, splits []connector.SplitState) error {
	o := opts
	if err := o.Validate(); err != nil {
		return err
	}
	o.EnsureDefaults()
	need := map[string]int32{}
	var topics []string
	for _, st := range splits {
		p, _, err := decodeSplit(st)
		if err != nil {
			return fmt.Errorf("kafka source: %w", err)
		}
		if _, ok := need[p.Topic]; !ok {
			topics = append(topics, p.Topic)
		}
		need[p.Topic] = max(need[p.Topic], p.Partition+1)
	}
	if len(topics) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(o.clientOpts()...)
	if err != nil {
		return fmt.Errorf("kafka source: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	slices.Sort(topics)
	counts, err := partitionCounts(ctx, kadm.NewClient(cl), "kafka source", o.brokers(), topics)
	if err != nil {
		return err
	}
	for _, t := range topics {
		if counts[t] < need[t] {
			return fmt.Errorf("kafka source: topic %q has %d partitions on brokers %s, fewer than the %d of the checkpoint: was it deleted and created again? restore from a checkpoint of this topic, or start without --restore",
				t, counts[t], o.brokers(), need[t])
		}
	}
	return nil
}
