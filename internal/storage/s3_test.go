package storage

import (
	"errors"
	"strings"
	"testing"
)

// envOf returns a getenv over a fixed environment, so that the tests do not
// depend on the machine's.
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestS3URLs(t *testing.T) {
	tests := []struct {
		url     string
		env     []string
		wantURL string
	}{
		{"s3://bucket", nil, "s3://bucket"},
		{"s3://bucket/", nil, "s3://bucket"},
		{"s3://bucket/a/b/", nil, "s3://bucket/a/b"},
		{" s3://bucket/a ", nil, "s3://bucket/a"},
		{"s3://bucket/with%20space", nil, "s3://bucket/with%20space"},
		{"s3://bucket/p?endpoint=127.0.0.1:9000&secure=false&pathstyle=true", nil, "s3://bucket/p?endpoint=127.0.0.1:9000&secure=false&pathstyle=true"},
		{"s3://bucket/p?pathstyle=true&secure=false&endpoint=127.0.0.1:9000", nil, "s3://bucket/p?endpoint=127.0.0.1:9000&secure=false&pathstyle=true"},
		{"s3://bucket/p?endpoint=http://minio:9000", nil, "s3://bucket/p?endpoint=minio:9000&secure=false"},
		{"s3://bucket/p?endpoint=https://minio.example.com/", nil, "s3://bucket/p?endpoint=minio.example.com"},
		{"s3://bucket/p?endpoint=s3.amazonaws.com&secure=true&pathstyle=false", nil, "s3://bucket/p"},
		{"s3://bucket?region=eu-west-1", nil, "s3://bucket?region=eu-west-1"},
		{"s3://bucket?partsize=32MiB&parallel=8", nil, "s3://bucket?partsize=32MiB&parallel=8"},
		{"s3://bucket?partsize=5242881", nil, "s3://bucket?partsize=5242881"},
		{"s3://bucket?partsize=16777216&parallel=4", nil, "s3://bucket"},
		// The environment gives what the URL leaves out; the URL wins.
		{"s3://bucket/p", []string{"WEIR_S3_ENDPOINT", "http://10.0.0.1:9000"}, "s3://bucket/p?endpoint=10.0.0.1:9000&secure=false"},
		{"s3://bucket/p", []string{"AWS_ENDPOINT_URL", "https://aws.example", "WEIR_S3_ENDPOINT", "minio.example"}, "s3://bucket/p?endpoint=minio.example"},
		{"s3://bucket/p", []string{"AWS_ENDPOINT_URL", "https://a.example", "AWS_ENDPOINT_URL_S3", "https://s3.example"}, "s3://bucket/p?endpoint=s3.example"},
		{"s3://bucket/p", []string{"AWS_DEFAULT_REGION", "us-west-2", "AWS_REGION", "eu-central-1"}, "s3://bucket/p?region=eu-central-1"},
		{"s3://bucket/p?endpoint=127.0.0.1:9000&region=r", []string{"WEIR_S3_ENDPOINT", "http://10.0.0.1:9000", "AWS_REGION", "eu-central-1"}, "s3://bucket/p?endpoint=127.0.0.1:9000&region=r"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			loc, err := parseS3(tt.url, strings.TrimSpace(tt.url), envOf(tt.env...))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			s, err := loc.open()
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if got := s.URL(); got != tt.wantURL {
				t.Fatalf("URL() = %q, want %q", got, tt.wantURL)
			}
			// The URL names the same store, whatever the environment.
			again, err := parseS3(tt.wantURL, tt.wantURL, envOf())
			if err != nil {
				t.Fatalf("parse of URL(): %v", err)
			}
			if got := again.s3.url(); got != tt.wantURL {
				t.Fatalf("URL() of URL() = %q, want %q", got, tt.wantURL)
			}
		})
	}
}

func TestS3URLRejects(t *testing.T) {
	tests := []struct {
		url     string
		env     []string
		wantErr string
	}{
		{"s3:bucket", nil, "starts with s3://"},
		{"s3://", nil, "no bucket"},
		{"s3:///prefix", nil, "no bucket"},
		{"s3://ab/p", nil, `bucket "ab"`},
		{"s3://bad..name/p", nil, `bucket "bad..name"`},
		{"s3://bucket/p#x", nil, "no fragment"},
		{"s3://bucket/a//b", nil, "prefix"},
		{"s3://bucket/../a", nil, "prefix"},
		{"s3://bucket/.hidden", nil, "prefix"},
		{"s3://bucket?bogus=1", nil, `unknown s3 URL parameter "bogus": accepted are endpoint, region`},
		{"s3://bucket?region=a&region=b", nil, `"region" given 2 times`},
		{"s3://bucket?endpoint=ftp://h", nil, `scheme "ftp"`},
		{"s3://bucket?endpoint=h/path", nil, "without a path"},
		{"s3://bucket?endpoint=h:99999", nil, `port "99999"`},
		{"s3://bucket?endpoint=:9000", nil, "no host"},
		{"s3://bucket?endpoint=https://h&secure=false", nil, "says https but Insecure is set"},
		{"s3://bucket?secure=maybe", nil, `secure="maybe"`},
		{"s3://bucket?pathstyle=2", nil, `pathstyle="2"`},
		{"s3://bucket?partsize=1MiB", nil, "S3Options.PartSize 1048576 out of range"},
		{"s3://bucket?partsize=lots", nil, "positive number of bytes"},
		{"s3://bucket?partsize=-5", nil, "positive number of bytes"},
		{"s3://bucket?parallel=65", nil, "S3Options.ParallelUploads 65 out of range: want 1 to 64"},
		{"s3://bucket?parallel=x", nil, `parallel="x"`},
		{"s3://bucket/p", []string{"WEIR_S3_ENDPOINT", "h/p"}, "S3Options.Endpoint \"h/p\""},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			loc, err := parseS3(tt.url, tt.url, envOf(tt.env...))
			switch {
			case err == nil:
				t.Fatalf("parse = %s, want an error", loc.s3.url())
			case !errors.Is(err, ErrBadURL):
				t.Fatalf("parse = %v, want it to wrap ErrBadURL", err)
			case !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("parse = %v, want an error containing %q", err, tt.wantErr)
			case !strings.Contains(err.Error(), `"`+tt.url+`"`):
				t.Fatalf("parse = %v, want the error to name the URL", err)
			}
		})
	}
}

func TestS3URLRedactsCredentials(t *testing.T) {
	const u = "s3://key:secret@bucket/p"
	_, err := parseS3(u, u, envOf())
	if err == nil || !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), "credentials do not belong") {
		t.Fatalf("parse = %v, want ErrBadURL saying credentials do not belong", err)
	}
	if strings.Contains(err.Error(), ":secret@") {
		t.Fatalf("parse = %v, want the secret left out", err)
	}
}

func TestS3OptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    S3Options
		wantErr string // "" for valid
	}{
		{"zero", S3Options{}, ""},
		{"minio", S3Options{Endpoint: "127.0.0.1:9000", Insecure: true, PathStyle: true, AccessKey: "a", SecretKey: "b"}, ""},
		{"http scheme", S3Options{Endpoint: "http://minio:9000"}, ""},
		{"https scheme", S3Options{Endpoint: "https://minio"}, ""},
		{"ipv6", S3Options{Endpoint: "[::1]:9000"}, ""},
		{"limits", S3Options{PartSize: MaxS3PartSize, ParallelUploads: MaxS3ParallelUploads, MaxRetries: MaxS3Retries}, ""},
		{"smallest", S3Options{PartSize: MinS3PartSize, ParallelUploads: 1, MaxRetries: 1}, ""},
		{"session token", S3Options{AccessKey: "a", SecretKey: "b", SessionToken: "t"}, ""},
		{"access key alone", S3Options{AccessKey: "a"}, "S3Options.AccessKey and S3Options.SecretKey go together"},
		{"secret key alone", S3Options{SecretKey: "b"}, "S3Options.AccessKey and S3Options.SecretKey go together"},
		{"token alone", S3Options{SessionToken: "t"}, "S3Options.SessionToken needs"},
		{"https but insecure", S3Options{Endpoint: "https://h", Insecure: true}, "says https but Insecure"},
		{"endpoint path", S3Options{Endpoint: "http://h/bucket"}, "S3Options.Endpoint"},
		{"part too small", S3Options{PartSize: MinS3PartSize - 1}, "S3Options.PartSize 5242879 out of range"},
		{"part too big", S3Options{PartSize: MaxS3PartSize + 1}, "S3Options.PartSize"},
		{"negative part", S3Options{PartSize: -1}, "S3Options.PartSize"},
		{"too parallel", S3Options{ParallelUploads: 65}, "S3Options.ParallelUploads 65"},
		{"negative parallel", S3Options{ParallelUploads: -1}, "S3Options.ParallelUploads -1"},
		{"too many retries", S3Options{MaxRetries: 101}, "S3Options.MaxRetries 101 out of range: want 1 to 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Validate = %v, want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestS3OptionsDefaults(t *testing.T) {
	var o S3Options
	o.EnsureDefaults()
	want := S3Options{Endpoint: DefaultS3Endpoint, PartSize: DefaultS3PartSize, ParallelUploads: DefaultS3ParallelUploads, MaxRetries: DefaultS3MaxRetries}
	if o != want {
		t.Fatalf("EnsureDefaults = %+v, want %+v", o, want)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	set := S3Options{Endpoint: "e", PartSize: MinS3PartSize, ParallelUploads: 1, MaxRetries: 1}
	got := set
	got.EnsureDefaults()
	if got != set {
		t.Fatalf("EnsureDefaults changed set fields: %+v, want %+v", got, set)
	}
}

func TestNewS3StoreRejects(t *testing.T) {
	tests := []struct {
		bucket, prefix string
		opts           S3Options
		wantErr        string
	}{
		{"x", "", S3Options{}, `bucket "x"`},
		{"bucket", "a//b", S3Options{}, "prefix"},
		{"bucket", "", S3Options{PartSize: 1}, "S3Options.PartSize"},
	}
	for _, tt := range tests {
		s, err := NewS3Store(tt.bucket, tt.prefix, tt.opts)
		if err == nil {
			t.Errorf("NewS3Store(%q, %q, %+v) = %s, want an error", tt.bucket, tt.prefix, tt.opts, s.URL())
			continue
		}
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("NewS3Store(%q, %q, %+v) = %v, want ErrBadURL containing %q", tt.bucket, tt.prefix, tt.opts, err, tt.wantErr)
		}
	}
	s, err := NewS3Store("bucket", "a/b/", S3Options{Endpoint: "127.0.0.1:9000", Insecure: true, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.URL(), "s3://bucket/a/b?endpoint=127.0.0.1:9000&secure=false&pathstyle=true"; got != want {
		t.Fatalf("URL() = %q, want %q", got, want)
	}
}

// TestS3Parent checks the walk up that ResolveRestore does: the options
// stay with the parent.
func TestS3Parent(t *testing.T) {
	const q = "?endpoint=127.0.0.1:9000&secure=false&pathstyle=true"
	tests := []struct {
		url        string
		wantParent string
		wantBase   string
		wantOK     bool
	}{
		{"s3://b-1/root/job/chk-3" + q, "s3://b-1/root/job" + q, "chk-3", true},
		{"s3://b-1/chk-3" + q, "s3://b-1" + q, "chk-3", true},
		{"s3://b-1" + q, "", "", false},
	}
	for _, tt := range tests {
		loc, err := parseS3(tt.url, tt.url, envOf())
		if err != nil {
			t.Fatal(err)
		}
		parent, base, ok := loc.parent()
		if ok != tt.wantOK || base != tt.wantBase || (ok && parent.s3.url() != tt.wantParent) {
			t.Errorf("parent(%s) = %s, %q, %v; want %s, %q, %v", tt.url, parent.s3.url(), base, ok, tt.wantParent, tt.wantBase, tt.wantOK)
		}
	}
}
