package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Defaults and limits of S3Options. The part limits are S3's: a part other
// than the last is at least 5 MiB, at most 5 GiB, and an upload has at most
// 10000 parts, so an object is at most PartSize × 10000 (160 GiB with the
// default part size).
const (
	DefaultS3Endpoint        = "s3.amazonaws.com"
	DefaultS3PartSize        = 16 << 20
	DefaultS3ParallelUploads = 4
	DefaultS3MaxRetries      = 10

	MinS3PartSize        = 5 << 20
	MaxS3PartSize        = 5 << 30
	MaxS3ParallelUploads = 64
	MaxS3Retries         = 100

	maxS3Parts = 10000
)

// The environment variables S3OptionsFromEnv reads. Credentials are read
// from the environment by the default credential chain (see S3Options).
const (
	// EnvS3Endpoint names the S3 endpoint of weir's checkpoint storage,
	// "host[:port]" or "http(s)://host[:port]"; it wins over the AWS
	// variables, so that weir can use a MinIO while other tools of the same
	// environment use AWS.
	EnvS3Endpoint = "WEIR_S3_ENDPOINT"
)

// S3Options say where an S3 store is and how it uploads. The zero value is
// AWS S3 over HTTPS, with credentials from the environment and the default
// upload settings; EnsureDefaults fills the defaults in, Validate rejects
// what S3 would.
type S3Options struct {
	// Endpoint is the S3 service: "host[:port]", or "http://host[:port]" or
	// "https://host[:port]", whose scheme decides between HTTP and HTTPS.
	// Default: DefaultS3Endpoint (AWS S3).
	Endpoint string

	// Region is the region of the bucket ("eu-west-1"). Default: "", which
	// asks the service once per bucket (GetBucketLocation) and caches the
	// answer.
	Region string

	// AccessKey and SecretKey are static credentials; SessionToken goes with
	// temporary ones. Default: all empty, which selects the credential
	// chain: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN,
	// then the shared credentials file (~/.aws/credentials, AWS_PROFILE),
	// then an IAM role of the instance or container; anonymous requests if
	// none of them gives credentials. Credentials never appear in a URL.
	AccessKey    string
	SecretKey    string
	SessionToken string

	// Insecure selects plain HTTP for an Endpoint without a scheme.
	// Default: false (HTTPS). In a URL: secure=false.
	Insecure bool

	// PathStyle forces path-style requests (http://host/bucket/key), which
	// MinIO and most S3-compatible services need. Default: false, which uses
	// virtual-host style (http://bucket.host/key) for AWS and path style
	// elsewhere.
	PathStyle bool

	// PartSize is the size of a part of a multipart upload, in bytes, and
	// the memory a writer buffers before it starts uploading. An object no
	// larger is sent by a single PUT at Commit. Default: DefaultS3PartSize
	// (16 MiB). Range: MinS3PartSize (5 MiB) to MaxS3PartSize (5 GiB).
	PartSize int64

	// ParallelUploads is how many parts of one object are in flight at
	// once; a writer holds up to ParallelUploads+1 parts in memory. Default:
	// DefaultS3ParallelUploads (4). Range: 1 to MaxS3ParallelUploads (64).
	ParallelUploads int

	// MaxRetries is how many times a request is tried before its error is
	// returned, with exponential backoff between tries (1 = no retry).
	// Default: DefaultS3MaxRetries (10). Range: 1 to MaxS3Retries (100).
	MaxRetries int
}

// S3OptionsFromEnv returns the options the environment gives an s3:// URL:
// Endpoint from WEIR_S3_ENDPOINT, else AWS_ENDPOINT_URL_S3, else
// AWS_ENDPOINT_URL; Region from AWS_REGION, else AWS_DEFAULT_REGION.
// Credentials are left empty: the credential chain reads them (see
// S3Options).
func S3OptionsFromEnv() S3Options {
	return s3OptionsFromEnv(os.Getenv)
}

func s3OptionsFromEnv(getenv func(string) string) S3Options {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := strings.TrimSpace(getenv(k)); v != "" {
				return v
			}
		}
		return ""
	}
	return S3Options{
		Endpoint: first(EnvS3Endpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:   first("AWS_REGION", "AWS_DEFAULT_REGION"),
	}
}

// EnsureDefaults fills the fields left zero with their defaults.
func (o *S3Options) EnsureDefaults() {
	if o.Endpoint == "" {
		o.Endpoint = DefaultS3Endpoint
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultS3PartSize
	}
	if o.ParallelUploads == 0 {
		o.ParallelUploads = DefaultS3ParallelUploads
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultS3MaxRetries
	}
}

// Validate rejects options S3 or minio-go would refuse, naming the field and
// what it accepts. Zero fields are accepted: they stand for the defaults.
func (o S3Options) Validate() error {
	if o.Endpoint != "" {
		if _, _, err := splitEndpoint(o.Endpoint); err != nil {
			return fmt.Errorf("S3Options.Endpoint %q: %w", o.Endpoint, err)
		}
		if strings.HasPrefix(o.Endpoint, "https://") && o.Insecure {
			return fmt.Errorf("S3Options.Endpoint %q says https but Insecure is set: drop one of them", o.Endpoint)
		}
	}
	if (o.AccessKey == "") != (o.SecretKey == "") {
		return errors.New("S3Options.AccessKey and S3Options.SecretKey go together: set both, or neither to use the credential chain")
	}
	if o.SessionToken != "" && o.AccessKey == "" {
		return errors.New("S3Options.SessionToken needs S3Options.AccessKey and S3Options.SecretKey")
	}
	if o.PartSize != 0 && (o.PartSize < MinS3PartSize || o.PartSize > MaxS3PartSize) {
		return fmt.Errorf("S3Options.PartSize %d out of range: want %d (5 MiB) to %d (5 GiB), or 0 for %d (16 MiB)",
			o.PartSize, MinS3PartSize, MaxS3PartSize, DefaultS3PartSize)
	}
	if o.ParallelUploads < 0 || o.ParallelUploads > MaxS3ParallelUploads {
		return fmt.Errorf("S3Options.ParallelUploads %d out of range: want 1 to %d, or 0 for %d",
			o.ParallelUploads, MaxS3ParallelUploads, DefaultS3ParallelUploads)
	}
	if o.MaxRetries < 0 || o.MaxRetries > MaxS3Retries {
		return fmt.Errorf("S3Options.MaxRetries %d out of range: want 1 to %d, or 0 for %d",
			o.MaxRetries, MaxS3Retries, DefaultS3MaxRetries)
	}
	return nil
}

// splitEndpoint returns the host[:port] of an endpoint and whether its
// scheme, if any, says HTTP.
func splitEndpoint(endpoint string) (host string, plainHTTP bool, err error) {
	host = endpoint
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		switch scheme {
		case "http":
			plainHTTP = true
		case "https":
		default:
			return "", false, fmt.Errorf("scheme %q: want http:// or https:// or none", scheme)
		}
		host = strings.TrimSuffix(rest, "/")
	}
	if host == "" || strings.ContainsAny(host, "/?#@ ") {
		return "", false, errors.New("want host[:port] or http(s)://host[:port], without a path")
	}
	if h, port, err := net.SplitHostPort(host); err == nil {
		if h == "" {
			return "", false, errors.New("no host before the port")
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return "", false, fmt.Errorf("port %q: want 1 to 65535", port)
		}
	}
	return host, plainHTTP, nil
}

// s3Location is the part of a location for an s3:// URL.
type s3Location struct {
	bucket string
	prefix string // clean key prefix inside the bucket; "" is the whole bucket
	opts   S3Options
}

// s3Params are the query parameters of an s3:// URL, in the order URL()
// writes them.
var s3Params = []string{"endpoint", "region", "secure", "pathstyle", "partsize", "parallel"}

func parseS3(rawURL, s string, getenv func(string) string) (location, error) {
	if !strings.HasPrefix(s, "s3://") {
		return location{}, badURL(rawURL, "an s3 URL starts with s3:// (s3://BUCKET/PREFIX)")
	}
	u, err := url.Parse(s)
	if err != nil {
		return location{}, badURL(rawURL, err.Error())
	}
	switch {
	case u.User != nil: // not echoed: the error may end up in a log
		return location{}, badURL(u.Redacted(), "credentials do not belong in an s3 URL: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	case u.Fragment != "":
		return location{}, badURL(rawURL, "an s3 URL takes no fragment")
	case u.Host == "":
		return location{}, badURL(rawURL, "no bucket: write s3://BUCKET/PREFIX")
	}
	if err := s3utils.CheckValidBucketName(u.Host); err != nil {
		return location{}, badURL(rawURL, fmt.Sprintf("bucket %q: %v", u.Host, err))
	}
	prefix, err := cleanPrefix(strings.TrimPrefix(u.Path, "/"))
	if err != nil {
		return location{}, badURL(rawURL, err.Error())
	}
	opts := s3OptionsFromEnv(getenv)
	if err := applyS3Query(&opts, u.Query()); err != nil {
		return location{}, badURL(rawURL, err.Error())
	}
	if err := opts.Validate(); err != nil {
		return location{}, badURL(rawURL, err.Error())
	}
	return location{s3: &s3Location{bucket: u.Host, prefix: prefix, opts: opts}}, nil
}

// applyS3Query overrides opts with the query parameters of an s3 URL.
func applyS3Query(opts *S3Options, q url.Values) error {
	for key, vals := range q {
		if !slices.Contains(s3Params, key) {
			return fmt.Errorf("unknown s3 URL parameter %q: accepted are %s", key, strings.Join(s3Params, ", "))
		}
		if len(vals) != 1 {
			return fmt.Errorf("s3 URL parameter %q given %d times", key, len(vals))
		}
		v := vals[0]
		var err error
		switch key {
		case "endpoint":
			opts.Endpoint = v
		case "region":
			opts.Region = v
		case "secure":
			var secure bool
			secure, err = strconv.ParseBool(v)
			opts.Insecure = !secure
		case "pathstyle":
			opts.PathStyle, err = strconv.ParseBool(v)
		case "partsize":
			opts.PartSize, err = parseSize(v)
		case "parallel":
			opts.ParallelUploads, err = strconv.Atoi(v)
		}
		if err != nil {
			return fmt.Errorf("s3 URL parameter %s=%q: %v", key, v, err)
		}
	}
	return nil
}

// parseSize reads a byte count: digits, optionally followed by KiB, MiB or
// GiB.
func parseSize(v string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if num, ok := strings.CutSuffix(v, suffix); ok {
			v, mult = num, m
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, errors.New("want a positive number of bytes, optionally with KiB, MiB or GiB")
	}
	return n * mult, nil
}

func formatSize(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return strconv.FormatInt(n, 10)
}

// url writes the location in the form Open accepts: every setting that is
// not the default is in the query, so that another process opens the same
// store whatever its environment holds — except the credentials.
func (l *s3Location) url() string {
	o := l.opts
	o.EnsureDefaults()
	host, plainHTTP, _ := splitEndpoint(o.Endpoint)
	u := url.URL{Scheme: "s3", Host: l.bucket}
	if l.prefix != "" {
		u.Path = "/" + l.prefix
	}
	var q []string
	add := func(k, v string) {
		q = append(q, k+"="+strings.ReplaceAll(url.QueryEscape(v), "%3A", ":"))
	}
	if host != DefaultS3Endpoint {
		add("endpoint", host)
	}
	if o.Region != "" {
		add("region", o.Region)
	}
	if plainHTTP || o.Insecure {
		add("secure", "false")
	}
	if o.PathStyle {
		add("pathstyle", "true")
	}
	if o.PartSize != DefaultS3PartSize {
		add("partsize", formatSize(o.PartSize))
	}
	if o.ParallelUploads != DefaultS3ParallelUploads {
		add("parallel", strconv.Itoa(o.ParallelUploads))
	}
	s := u.String()
	if len(q) > 0 {
		s += "?" + strings.Join(q, "&")
	}
	return s
}

// NewS3Store returns a Store keeping each object as an object of bucket,
// under the key prefix (slash-separated, "" for the whole bucket). The
// bucket must exist: weir does not create buckets. Nothing is sent before
// the first operation. Options are taken as given (see S3OptionsFromEnv for
// the environment's).
//
// An object becomes visible only at Commit, whole: a writer buffers up to
// PartSize bytes and, for a small object, sends them with one PUT at Commit;
// once more than PartSize bytes were written it starts a multipart upload,
// sends full parts in the background (ParallelUploads at a time) and
// completes the upload at Commit. Abort, a failed Commit and a canceled
// context abort the multipart upload. An upload whose abort could not reach
// the service (a crash, a network partition) stays behind, invisible to
// List and Open but billed: give the bucket a lifecycle rule that aborts
// incomplete multipart uploads after a day.
//
// S3 has no directories: List and DeletePrefix list the keys under
// "prefix/", which gives them the file store's meaning. Keys under the
// store's prefix that are no valid object names (written by other tools;
// "dir/" markers) are not listed, but DeletePrefix removes them.
func NewS3Store(bucket, prefix string, opts S3Options) (Store, error) {
	if err := s3utils.CheckValidBucketName(bucket); err != nil {
		return nil, fmt.Errorf("%w: s3 bucket %q: %v", ErrBadURL, bucket, err)
	}
	p, err := cleanPrefix(prefix)
	if err != nil {
		return nil, fmt.Errorf("%w: s3 key prefix: %w", ErrBadURL, err)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	return newS3Store(s3Location{bucket: bucket, prefix: p, opts: opts})
}

func newS3Store(l s3Location) (Store, error) {
	o := l.opts
	o.EnsureDefaults()
	host, plainHTTP, err := splitEndpoint(o.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: S3Options.Endpoint %q: %w", ErrBadURL, o.Endpoint, err)
	}
	var creds *credentials.Credentials
	if o.AccessKey != "" {
		creds = credentials.NewStaticV4(o.AccessKey, o.SecretKey, o.SessionToken)
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		})
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(host, &minio.Options{
		Creds:        creds,
		Secure:       !plainHTTP && !o.Insecure,
		Region:       o.Region,
		BucketLookup: lookup,
		MaxRetries:   o.MaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: s3 endpoint %q: %w", ErrBadURL, o.Endpoint, err)
	}
	l.opts = o
	return &s3Store{client: client, core: minio.Core{Client: client}, loc: l, url: l.url()}, nil
}

type s3Store struct {
	client *minio.Client
	core   minio.Core // the multipart calls
	loc    s3Location // opts with defaults filled in
	url    string
}

var _ Store = (*s3Store)(nil)

func (s *s3Store) URL() string { return s.url }

func (s *s3Store) key(name string) string { return join(s.loc.prefix, name) }

// where names an object in errors: its bucket and key, without the URL's
// options.
func (s *s3Store) where(name string) string { return "s3://" + s.loc.bucket + "/" + s.key(name) }

// s3Error adds to err what the user can do about the errors of S3 that are
// about the setup rather than the object.
func (s *s3Store) s3Error(err error) error {
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchBucket:
		return fmt.Errorf("%w (bucket %q at %s: weir does not create buckets, create it first)", err, s.loc.bucket, s.loc.opts.Endpoint)
	case minio.AccessDenied, "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return fmt.Errorf("%w (check the credentials: S3Options or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", err)
	}
	return err
}

func isNoSuchKey(err error) bool {
	return minio.ToErrorResponse(err).Code == minio.NoSuchKey
}

func (s *s3Store) Create(ctx context.Context, name string) (ObjectWriter, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	return &s3Writer{store: s, ctx: ctx, name: name, key: s.key(name)}, nil
}

func (s *s3Store) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	// Core.GetObject sends the GET now, so that a missing object is an
	// error of Open, and reads the body as it streams in.
	body, _, _, err := s.core.GetObject(ctx, s.loc.bucket, s.key(name), minio.GetObjectOptions{})
	if isNoSuchKey(err) {
		return nil, fmt.Errorf("open %s: %w", s.where(name), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, s.s3Error(err))
	}
	return body, nil
}

func (s *s3Store) Stat(ctx context.Context, name string) (int64, error) {
	if err := validName(name); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("stat %s: %w", name, err)
	}
	info, err := s.client.StatObject(ctx, s.loc.bucket, s.key(name), minio.StatObjectOptions{})
	if isNoSuchKey(err) {
		return 0, fmt.Errorf("stat %s: %w", s.where(name), ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", name, s.s3Error(err))
	}
	return info.Size, nil
}

// listKeys calls fn with every key under the directory prefix (clean, ""
// for the whole store), in S3's order.
func (s *s3Store) listKeys(ctx context.Context, prefix string, fn func(key string)) error {
	keyPrefix := s.key(prefix)
	if keyPrefix != "" {
		keyPrefix += "/"
	}
	for obj := range s.client.ListObjectsIter(ctx, s.loc.bucket, minio.ListObjectsOptions{Prefix: keyPrefix, Recursive: true}) {
		if obj.Err != nil {
			return s.s3Error(obj.Err)
		}
		fn(obj.Key)
	}
	// The iterator ends quietly when ctx is done.
	return ctx.Err()
}

func (s *s3Store) List(ctx context.Context, prefix string) ([]string, error) {
	p, err := cleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	var names []string
	err = s.listKeys(ctx, p, func(key string) {
		name := key
		if s.loc.prefix != "" {
			name = strings.TrimPrefix(key, s.loc.prefix+"/")
		}
		if validName(name) == nil {
			names = append(names, name)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	slices.Sort(names) // S3 sorts by bytes already; other services may not
	return names, nil
}

func (s *s3Store) Delete(ctx context.Context, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	// Deleting a missing key succeeds in S3.
	if err := s.client.RemoveObject(ctx, s.loc.bucket, s.key(name), minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete %s: %w", name, s.s3Error(err))
	}
	return nil
}

func (s *s3Store) DeletePrefix(ctx context.Context, prefix string) error {
	p, err := cleanPrefix(prefix)
	if err != nil {
		return err
	}
	if p == "" {
		return fmt.Errorf("%w: DeletePrefix of the whole store refused", ErrInvalidName)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete prefix %s: %w", prefix, err)
	}
	// List first, then delete: deleting under a listing in progress is
	// allowed by S3, but a listing that sees its own deletions is harder to
	// reason about than one that does not.
	var keys []minio.ObjectInfo
	if err := s.listKeys(ctx, p, func(key string) { keys = append(keys, minio.ObjectInfo{Key: key}) }); err != nil {
		return fmt.Errorf("delete prefix %s: %w", prefix, err)
	}
	if len(keys) == 0 {
		return nil
	}
	results, err := s.client.RemoveObjectsWithIter(ctx, s.loc.bucket, slices.Values(keys), minio.RemoveObjectsOptions{})
	if err != nil {
		return fmt.Errorf("delete prefix %s: %w", prefix, err)
	}
	var errs []error
	for r := range results {
		if r.Err != nil && !isNoSuchKey(r.Err) {
			errs = append(errs, fmt.Errorf("%s: %w", r.ObjectName, s.s3Error(r.Err)))
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete prefix %s: %w", prefix, errors.Join(errs...))
	}
	return nil
}

// abortTimeout bounds the abort of a multipart upload, which runs even when
// the writer's context is done.
const abortTimeout = time.Minute

// s3Writer buffers an object and uploads it as described at NewS3Store.
// Write, Commit and Abort run on the caller's goroutine; part uploads run
// on goroutines of their own, which Commit and Abort wait for.
type s3Writer struct {
	store *s3Store
	ctx   context.Context
	name  string
	key   string
	buf   []byte // the part being filled
	done  bool

	// The multipart upload, from the first full part on.
	uploadID    string
	partCtx     context.Context // canceled by the first failed part, and by Abort
	cancelParts context.CancelFunc
	nextPart    int
	slots       chan struct{} // one token per part in flight
	wg          sync.WaitGroup

	mu    sync.Mutex
	parts []minio.CompletePart
	err   error // the first failed part
}

func (w *s3Writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, ErrClosed
	}
	if err := w.partErr(); err != nil {
		return 0, err
	}
	partSize := int(w.store.loc.opts.PartSize)
	n := 0
	for len(p) > 0 {
		k := min(len(p), partSize-len(w.buf))
		if len(w.buf)+k > cap(w.buf) {
			// Grow by doubling, but never past a part: the buffer of a
			// small object stays small, and a part is one allocation.
			grown := make([]byte, len(w.buf), min(max(2*cap(w.buf), len(w.buf)+k, 4<<10), partSize))
			copy(grown, w.buf)
			w.buf = grown
		}
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		n += k
		if len(w.buf) == partSize {
			if err := w.sendPart(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (w *s3Writer) partErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// fail records the first failure of the upload, which every later Write
// and Commit returns, and stops the parts in flight.
func (w *s3Writer) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		if w.cancelParts != nil {
			w.cancelParts()
		}
	}
	return w.err
}

// sendPart uploads w.buf as the next part in the background, starting the
// multipart upload first if need be; it blocks while ParallelUploads parts
// are in flight.
func (w *s3Writer) sendPart() error {
	s := w.store
	if w.nextPart == maxS3Parts {
		return w.fail(fmt.Errorf("object larger than S3's %d parts of S3Options.PartSize %d bytes: raise PartSize", maxS3Parts, s.loc.opts.PartSize))
	}
	if w.uploadID == "" {
		id, err := s.core.NewMultipartUpload(w.ctx, s.loc.bucket, w.key, minio.PutObjectOptions{})
		if err != nil {
			return w.fail(fmt.Errorf("start multipart upload: %w", s.s3Error(err)))
		}
		w.uploadID = id
		w.partCtx, w.cancelParts = context.WithCancel(w.ctx)
		w.slots = make(chan struct{}, s.loc.opts.ParallelUploads)
	}
	select {
	case w.slots <- struct{}{}:
	case <-w.partCtx.Done():
		return w.fail(w.partCtx.Err()) // the failed part's error if there is one
	}
	w.nextPart++
	number, buf := w.nextPart, w.buf
	w.buf = make([]byte, 0, s.loc.opts.PartSize)
	w.wg.Go(func() {
		defer func() { <-w.slots }()
		part, err := s.core.PutObjectPart(w.partCtx, s.loc.bucket, w.key, w.uploadID, number,
			bytes.NewReader(buf), int64(len(buf)), minio.PutObjectPartOptions{})
		if err != nil {
			w.fail(fmt.Errorf("upload part %d: %w", number, s.s3Error(err)))
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.parts = append(w.parts, minio.CompletePart{PartNumber: number, ETag: part.ETag})
	})
	return nil
}

func (w *s3Writer) Commit() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	err := w.commit()
	w.buf = nil
	if err != nil {
		return fmt.Errorf("commit %s: %w", w.store.where(w.name), err)
	}
	return nil
}

func (w *s3Writer) commit() error {
	s := w.store
	if err := w.ctx.Err(); err != nil {
		_ = w.abortUpload()
		return err
	}
	if w.uploadID == "" {
		_, err := s.client.PutObject(w.ctx, s.loc.bucket, w.key, bytes.NewReader(w.buf), int64(len(w.buf)),
			minio.PutObjectOptions{DisableMultipart: true})
		if err != nil {
			return s.s3Error(err)
		}
		return nil
	}
	if len(w.buf) > 0 {
		if err := w.sendPart(); err != nil {
			_ = w.abortUpload()
			return err
		}
	}
	w.wg.Wait()
	err := w.partErr()
	if err == nil {
		err = w.ctx.Err()
	}
	if err != nil {
		_ = w.abortUpload()
		return err
	}
	slices.SortFunc(w.parts, func(a, b minio.CompletePart) int { return a.PartNumber - b.PartNumber })
	_, err = s.core.CompleteMultipartUpload(w.ctx, s.loc.bucket, w.key, w.uploadID, w.parts, minio.PutObjectOptions{})
	if err != nil {
		// If the upload did complete and only the answer was lost, the
		// abort fails with NoSuchUpload and the object is there: "the store
		// cannot know", as Store says.
		_ = w.abortUpload()
		return fmt.Errorf("complete multipart upload: %w", s.s3Error(err))
	}
	w.cancelParts()
	return nil
}

func (w *s3Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.buf = nil
	if err := w.abortUpload(); err != nil {
		return fmt.Errorf("abort %s: %w", w.store.where(w.name), err)
	}
	return nil
}

// abortUpload stops the parts in flight and aborts the multipart upload, if
// one was started. It uses a context of its own: the writer's may be done,
// and that is often why the upload is aborted.
func (w *s3Writer) abortUpload() error {
	if w.uploadID == "" {
		return nil
	}
	w.cancelParts()
	w.wg.Wait()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), abortTimeout)
	defer cancel()
	err := w.store.core.AbortMultipartUpload(ctx, w.store.loc.bucket, w.key, w.uploadID)
	if err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchUpload {
		return fmt.Errorf("abort multipart upload %s (it stays behind, invisible, until a lifecycle rule removes it): %w",
			w.uploadID, w.store.s3Error(err))
	}
	return nil
}
