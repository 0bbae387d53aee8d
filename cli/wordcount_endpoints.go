package cli

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/weirstream/weir/connector"
)

// An endpoint scheme lets `weir run wordcount` read from or write to a
// system named by a URL (kafka://, nats://, postgres://). Each connector's
// glue registers its scheme in a file of its own (wordcount_<name>.go) from
// an init function, so that adding a connector never edits runWordCount.

// inputEndpoint builds the source of lines for an --input URL. The source
// emits one record per line (message, row) of the external system.
type inputEndpoint func(ctx context.Context, u *url.URL, f wordCountFlags) (connector.Source[string], error)

// outputEndpoint builds the sink of "word,count" records for an --output
// URL. exactlyOnce is true when the job checkpoints: the sink must then
// take part in the checkpoint's two-phase commit unless the URL asks for
// a weaker guarantee.
type outputEndpoint func(ctx context.Context, u *url.URL, exactlyOnce bool, f wordCountFlags) (connector.Sink[string], error)

var (
	inputEndpoints  = map[string]inputEndpoint{}
	outputEndpoints = map[string]outputEndpoint{}
)

func registerInput(scheme string, e inputEndpoint)   { inputEndpoints[scheme] = e }
func registerOutput(scheme string, e outputEndpoint) { outputEndpoints[scheme] = e }

// endpointURL parses s when it names a registered scheme (scheme://...);
// a plain path gives nil and no error. An unknown scheme is an error that
// lists the known ones.
func endpointURL(s string, known []string) (*url.URL, error) {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || strings.ContainsAny(scheme, `/\`) {
		return nil, nil
	}
	if scheme == "file" {
		return nil, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("cannot parse %q: %v", s, err)
	}
	for _, k := range known {
		if k == u.Scheme {
			return u, nil
		}
	}
	return nil, fmt.Errorf("%q: unknown scheme %q: use a path or one of %s", s, u.Scheme, strings.Join(known, ", "))
}

func schemes[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k+"://")
	}
	sort.Strings(out)
	for i := range out {
		out[i] = strings.TrimSuffix(out[i], "://")
	}
	return out
}
