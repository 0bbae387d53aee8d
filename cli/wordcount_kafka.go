package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/kafka"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
)

// The kafka scheme of `weir run wordcount`:
//
//	--input  kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?start=earliest|latest|committed&stop=latest&group=G&discovery=D|off]
//	--output kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?guarantee=exactly-once|at-least-once|none&transactional-id-prefix=P&transaction-timeout=D]
//
// Each input record's value is one line; each output record has the word
// as its key and "word,count" as its value.

func init() {
	registerInput("kafka", kafkaInput)
	registerOutput("kafka", kafkaOutput)
}

// Transaction timing of the wordcount's exactly-once output: a
// pre-committed transaction waits at most for the checkpoint timeout (10
// minutes, weir's default) plus the restart delay (at most a minute with
// the default exponential-delay strategy); the timeout must be longer and
// stay under the broker's default transaction.max.timeout.ms (15 minutes).
const (
	wordcountCommitDeadline = 10*time.Minute + time.Minute
	wordcountTxnTimeout     = 14 * time.Minute
)

// kafkaURL splits kafka://brokers/topic and checks the query parameters
// against known.
func kafkaURL(u *url.URL, known ...string) (brokers []string, topic string, q url.Values, err error) {
	if u.Host == "" {
		return nil, "", nil, fmt.Errorf("%q names no broker: use kafka://HOST:PORT/TOPIC", u.Redacted())
	}
	for _, b := range strings.Split(u.Host, ",") {
		if !strings.Contains(b, ":") || strings.HasPrefix(b, ":") || strings.HasSuffix(b, ":") {
			return nil, "", nil, fmt.Errorf("%q: broker %q is not HOST:PORT", u.Redacted(), b)
		}
		brokers = append(brokers, b)
	}
	topic = strings.Trim(u.Path, "/")
	if topic == "" || strings.Contains(topic, "/") {
		return nil, "", nil, fmt.Errorf("%q: name one topic after the brokers: kafka://HOST:PORT/TOPIC", u.Redacted())
	}
	q = u.Query()
	for k := range q {
		ok := false
		for _, n := range known {
			ok = ok || k == n
		}
		if !ok {
			return nil, "", nil, fmt.Errorf("%q: unknown parameter %q: use %s", u.Redacted(), k, strings.Join(known, ", "))
		}
	}
	return brokers, topic, q, nil
}

func kafkaInput(ctx context.Context, u *url.URL, f wordCountFlags) (connector.Source[string], error) {
	brokers, topic, q, err := kafkaURL(u, "start", "stop", "group", "discovery")
	if err != nil {
		return nil, err
	}
	o := kafka.SourceOptions{Brokers: brokers, Topics: []string{topic}, Group: q.Get("group")}
	switch s := q.Get("start"); s {
	case "", "earliest":
	case "latest":
		o.Start = kafka.StartLatest
	case "committed":
		o.Start = kafka.StartCommitted
		if o.Group == "" {
			return nil, fmt.Errorf("%q: start=committed needs group=G, the consumer group whose offsets to start from", u.Redacted())
		}
	default:
		return nil, fmt.Errorf("%q: start=%q: use earliest, latest or committed", u.Redacted(), s)
	}
	switch s := q.Get("stop"); s {
	case "":
	case "latest":
		o.Stop = kafka.StopLatest
	default:
		return nil, fmt.Errorf("%q: stop=%q: use latest (read up to the end offsets of the first start), or leave it out to read on", u.Redacted(), s)
	}
	switch d := q.Get("discovery"); d {
	case "":
	case "off":
		o.DiscoveryInterval = -1
	default:
		iv, err := time.ParseDuration(d)
		if err != nil || iv <= 0 {
			return nil, fmt.Errorf("%q: discovery=%q: use the interval at which to look for new partitions, such as 5m (the default), or off", u.Redacted(), d)
		}
		o.DiscoveryInterval = iv
	}
	src := kafka.NewSource(o, kafka.String())
	if err := src.Check(ctx); err != nil {
		return nil, err
	}
	if f.restore != "" {
		splits, err := restoredSplits(ctx, f, "lines")
		if err != nil {
			return nil, err
		}
		if err := kafka.CheckSplits(ctx, o, splits); err != nil {
			return nil, err
		}
	}
	return src, nil
}

// restoredSplits reads the split states of the source uid from the
// checkpoint --restore names (none if there is none yet).
func restoredSplits(ctx context.Context, f wordCountFlags, uid string) ([]connector.SplitState, error) {
	var md *checkpoint.Metadata
	if f.restore == "latest" {
		st, err := storage.Open(f.ckptDir)
		if err != nil {
			return nil, fmt.Errorf("--checkpoint-dir: %w", err)
		}
		_, m, _, err := storage.CheckpointStorage{Store: st, JobID: "wordcount"}.LatestQuick(ctx)
		if errors.Is(err, storage.ErrNoCheckpoint) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		md = m
	} else {
		_, _, m, err := storage.ResolveRestore(ctx, f.restore)
		if err != nil {
			return nil, err
		}
		md = m
	}
	var out []connector.SplitState
	for _, op := range md.Operators {
		if op.UID != uid {
			continue
		}
		for _, st := range op.Subtasks {
			for _, sp := range st.Splits {
				out = append(out, connector.SplitState{ID: sp.ID, Data: sp.Data, Position: sp.Position})
			}
		}
	}
	return out, nil
}

func kafkaOutput(ctx context.Context, u *url.URL, exactlyOnce bool, f wordCountFlags) (connector.Sink[string], error) {
	brokers, topic, q, err := kafkaURL(u, "guarantee", "transactional-id-prefix", "transaction-timeout")
	if err != nil {
		return nil, err
	}
	o := kafka.SinkOptions{Brokers: brokers, Topic: topic, Guarantee: kafka.AtLeastOnce,
		TransactionalIDPrefix: q.Get("transactional-id-prefix"), TransactionTimeout: wordcountTxnTimeout}
	if exactlyOnce {
		o.Guarantee = kafka.ExactlyOnce
	}
	switch g := q.Get("guarantee"); g {
	case "":
	case "exactly-once":
		if !exactlyOnce {
			return nil, fmt.Errorf("%q: guarantee=exactly-once commits at checkpoints: set --checkpoint-interval", u.Redacted())
		}
		o.Guarantee = kafka.ExactlyOnce
	case "at-least-once":
		o.Guarantee = kafka.AtLeastOnce
	case "none":
		o.Guarantee = kafka.None
	default:
		return nil, fmt.Errorf("%q: guarantee=%q: use exactly-once, at-least-once or none", u.Redacted(), g)
	}
	if o.Guarantee == kafka.ExactlyOnce {
		o.CommitDeadline = wordcountCommitDeadline
		if o.TransactionalIDPrefix == "" {
			o.TransactionalIDPrefix = "weir-wordcount-" + topic
		}
	}
	if s := q.Get("transaction-timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q: transaction-timeout=%q: use a duration such as 14m", u.Redacted(), s)
		}
		o.TransactionTimeout = d
	}
	sink := kafka.NewSink(o, func(s string) (kafka.Record, error) {
		w, _, _ := strings.Cut(s, ",")
		return kafka.Record{Key: []byte(w), Value: []byte(s)}, nil
	})
	if err := sink.Check(ctx); err != nil {
		return nil, err
	}
	return sink, nil
}
