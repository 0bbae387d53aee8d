package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/weirstream/weir/connector"
	natsconn "github.com/weirstream/weir/connectors/nats"
)

// The nats scheme: --input nats://HOST:PORT/STREAM[?subject=S[,S2]&stop=latest]
// reads one line per message of a JetStream stream; --output
// nats://HOST:PORT/SUBJECT publishes each "word,count" as a message with
// the word in the Word header, exactly once when the job checkpoints.
func init() {
	registerInput("nats", natsInput)
	registerOutput("nats", natsOutput)
}

// natsWordHeader is the header that carries the word of a count.
const natsWordHeader = "Word"

func natsServerURL(u *url.URL) (string, error) {
	if u.Host == "" {
		return "", fmt.Errorf("%q names no server: use nats://HOST:PORT/...", u.Redacted())
	}
	return "nats://" + u.Host, nil
}

func natsInput(ctx context.Context, u *url.URL, f wordCountFlags) (connector.Source[string], error) {
	server, err := natsServerURL(u)
	if err != nil {
		return nil, err
	}
	stream := strings.Trim(u.Path, "/")
	if stream == "" || strings.Contains(stream, "/") {
		return nil, fmt.Errorf("%q: the path must be a stream name: nats://HOST:PORT/STREAM", u.Redacted())
	}
	var opts natsconn.SourceOptions
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "subject":
			opts.Subjects = strings.Split(v, ",")
		case "stop":
			if v != "latest" {
				return nil, fmt.Errorf("%q: stop=%s: the only stop is latest (the stream's last message when the job first starts)", u.Redacted(), v)
			}
			opts.Bounded = true
		default:
			return nil, fmt.Errorf("%q: unknown parameter %q: use subject or stop", u.Redacted(), k)
		}
	}
	src := natsconn.Strings(server, stream, opts)
	if err := src.Check(ctx); err != nil {
		return nil, err
	}
	return src, nil
}

func natsOutput(ctx context.Context, u *url.URL, exactlyOnce bool, f wordCountFlags) (connector.Sink[string], error) {
	server, err := natsServerURL(u)
	if err != nil {
		return nil, err
	}
	subject := strings.Trim(u.Path, "/")
	if subject == "" || strings.Contains(subject, "/") {
		return nil, fmt.Errorf("%q: the path must be a subject: nats://HOST:PORT/SUBJECT", u.Redacted())
	}
	if len(u.Query()) > 0 {
		return nil, fmt.Errorf("%q: nats outputs take no parameters", u.Redacted())
	}
	opts := natsconn.SinkOptions{Delivery: natsconn.ExactlyOnce}
	if !exactlyOnce {
		opts.Delivery = natsconn.AtLeastOnce
	}
	sink := natsconn.SinkOf(server, subject, func(line string) natsconn.Message {
		word := line
		if i := strings.LastIndexByte(line, ','); i >= 0 {
			word = line[:i]
		}
		return natsconn.Message{Data: []byte(line), Header: nats.Header{natsWordHeader: []string{word}}}
	}, opts)
	if err := sink.Check(ctx); err != nil {
		return nil, err
	}
	return sink, nil
}
