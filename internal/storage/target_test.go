package storage

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveSavepointTarget(t *testing.T) {
	roots := SavepointRoots{
		Default: "/data/savepoints",
		Allowed: []string{"file:///mnt/backups/", "s3://bucket/sp?endpoint=minio:9000&secure=false", "memory://mem/sp", "rel"},
		WorkDir: "/work",
	}
	for _, c := range []struct {
		name, target string
		roots        SavepointRoots
		want         string
		err          error  // nil: want must match
		msg          string // in the error
	}{
		{name: "empty: the default directory", target: "", roots: roots, want: ""},
		{name: "blank: the default directory", target: "  ", roots: roots, want: ""},
		{name: "the default itself", target: "/data/savepoints", roots: roots, want: "/data/savepoints"},
		{name: "under the default", target: "/data/savepoints/nightly", roots: roots, want: "/data/savepoints/nightly"},
		{name: "relative: under the default", target: "nightly/x", roots: roots, want: "/data/savepoints/nightly/x"},
		{name: "relative with a harmless ..", target: "a/../b", roots: roots, want: "/data/savepoints/b"},
		{name: "file URL under an allowed root", target: "file:///mnt/backups/x", roots: roots, want: "file:///mnt/backups/x"},
		{name: "file URL with escapes", target: "file:///mnt/backups/a%3Fb%23c%25", roots: roots, want: "file:///mnt/backups/a%3Fb%23c%25"},
		{name: "file URL with an escaped ..", target: "file:///mnt/backups/a/..%2f", roots: roots, want: "file:///mnt/backups"},
		{name: "file URL with an escaped .. leaving", target: "file:///mnt/backups/%2e%2e/etc", roots: roots, err: ErrTargetRefused},
		{name: "file URL of localhost", target: "file://localhost/mnt/backups/./x/", roots: roots, want: "file:///mnt/backups/x"},
		{name: "path under an allowed root", target: "/mnt/backups/x/", roots: roots, want: "/mnt/backups/x"},
		{name: "under a relative root", target: "/work/rel/x", roots: roots, want: "/work/rel/x"},
		{name: "s3 under a root takes its parameters", target: "s3://bucket/sp/x", roots: roots, want: "s3://bucket/sp/x?endpoint=minio:9000&secure=false"},
		{name: "s3 root itself", target: "s3://bucket/sp/", roots: roots, want: "s3://bucket/sp?endpoint=minio:9000&secure=false"},
		{name: "memory under a root", target: "memory://mem/sp/a", roots: roots, want: "memory://mem/sp/a"},

		{name: "relative .. leaving the default", target: "../../etc", roots: roots, err: ErrTargetRefused, msg: "allowed: /data/savepoints, /mnt/backups, s3://bucket/sp, memory://mem/sp, /work/rel"},
		{name: "absolute .. leaving the default", target: "/data/savepoints/../secrets", roots: roots, err: ErrTargetRefused, msg: `"/data/savepoints/../secrets": it is outside`},
		{name: "absolute elsewhere", target: "/etc", roots: roots, err: ErrTargetRefused},
		{name: "a sibling with the root as a name prefix", target: "/data/savepoints-evil", roots: roots, err: ErrTargetRefused},
		{name: "file URL elsewhere", target: "file:///etc/cron.d", roots: roots, err: ErrTargetRefused},
		{name: "file URL with .. leaving", target: "file:///mnt/backups/../../etc", roots: roots, err: ErrTargetRefused},
		{name: "s3 with an endpoint", target: "s3://bucket/sp/x?endpoint=127.0.0.1:18199", roots: roots, err: ErrTargetRefused, msg: "may not set S3 parameters"},
		{name: "s3 with a region", target: "s3://bucket/sp/x?region=x", roots: roots, err: ErrTargetRefused},
		{name: "s3 with an empty query", target: "s3://bucket/sp/x?", roots: roots, err: ErrTargetRefused},
		{name: "s3 with credentials", target: "s3://AKIA:secret@bucket/sp/x", roots: roots, err: ErrTargetRefused, msg: "credentials never come from a request"},
		{name: "s3 with an escaped ? in the path", target: "s3://bucket/sp/x%3Fendpoint=evil:1", roots: roots, want: "s3://bucket/sp/x%3Fendpoint=evil:1?endpoint=minio:9000&secure=false"},
		{name: "s3 default: relative with ? and #", target: "x?endpoint=evil:1#y", roots: SavepointRoots{Default: "s3://bkt/sp?endpoint=m:1"}, want: "s3://bkt/sp/x%3Fendpoint=evil:1%23y?endpoint=m:1"},
		{name: "s3 other bucket", target: "s3://other/sp", roots: roots, err: ErrTargetRefused},
		{name: "s3 outside the prefix", target: "s3://bucket/spx", roots: roots, err: ErrTargetRefused},
		{name: "s3 .. leaving the prefix", target: "s3://bucket/sp/../other", roots: roots, err: ErrTargetRefused},
		{name: "memory other store", target: "memory://other/sp", roots: roots, err: ErrTargetRefused},
		{name: "private memory store", target: "memory://", roots: roots, err: ErrTargetRefused},

		{name: "unknown scheme", target: "http://evil.example/x", roots: roots, err: ErrBadURL, msg: `unknown scheme "http"`},
		{name: "a file URL naming a host", target: "file://evil.example/x", roots: roots, err: ErrBadURL},
		{name: "control character", target: "/data/savepoints/a\x00b", roots: roots, err: ErrBadURL, msg: "control character"},
		{name: "bad bucket", target: "s3://B_/x", roots: roots, err: ErrBadURL},

		{name: "no roots: empty target", target: "", roots: SavepointRoots{}, err: ErrNoSavepointDir, msg: "--savepoint-dir"},
		{name: "no roots: relative target", target: "x", roots: SavepointRoots{}, err: ErrTargetRefused, msg: "--savepoint-dir"},
		{name: "no roots: absolute target", target: "/tmp/x", roots: SavepointRoots{}, err: ErrTargetRefused, msg: "no savepoint root is configured"},
		{name: "no default: relative target", target: "x", roots: SavepointRoots{Allowed: []string{"/a"}}, err: ErrTargetRefused, msg: "the job has none"},
		{name: "no default: empty target", target: "", roots: SavepointRoots{Allowed: []string{"/a"}}, err: ErrNoSavepointDir, msg: "name one under /a"},
		{name: "no default: under an allowed root", target: "/a/b", roots: SavepointRoots{Allowed: []string{"/a"}}, want: "/a/b"},
		{name: "s3 default: relative target", target: "x", roots: SavepointRoots{Default: "s3://bkt/sp?endpoint=m:1"}, want: "s3://bkt/sp/x?endpoint=m:1"},
		{name: "s3 default: relative .. leaving", target: "../x", roots: SavepointRoots{Default: "s3://bkt/sp"}, err: ErrTargetRefused},
		{name: "relative default directory", target: "/w/sp/x", roots: SavepointRoots{Default: "sp", WorkDir: "/w"}, want: "/w/sp/x"},
		{name: "root /", target: "/anything", roots: SavepointRoots{Allowed: []string{"/"}}, want: "/anything"},
		{name: "a bad root", target: "/x", roots: SavepointRoots{Allowed: []string{"ftp://x"}}, err: ErrBadURL, msg: "allowed savepoint root"},
		{name: "a relative root without a working directory", target: "/x", roots: SavepointRoots{Allowed: []string{"x"}}, err: ErrBadURL},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ResolveSavepointTarget(c.target, c.roots)
			switch {
			case c.err == nil && err != nil:
				t.Fatalf("ResolveSavepointTarget(%q): %v", c.target, err)
			case c.err == nil && got != c.want:
				t.Fatalf("ResolveSavepointTarget(%q) = %q, want %q", c.target, got, c.want)
			case c.err != nil && !errors.Is(err, c.err):
				t.Fatalf("ResolveSavepointTarget(%q) = %q, %v; want an error wrapping %v", c.target, got, err, c.err)
			case err != nil && !strings.Contains(err.Error(), c.msg):
				t.Fatalf("ResolveSavepointTarget(%q): %v; want it to contain %q", c.target, err, c.msg)
			case err != nil && strings.Contains(err.Error(), "minio:9000"):
				t.Fatalf("the error names a root's endpoint: %v", err)
			}
		})
	}
}

// FuzzResolveSavepointTarget checks the resolver's invariant: whatever
// the target, a location it accepts lies inside one of the roots (checked
// here independently, with filepath.Rel and url.Parse), and an S3
// location carries exactly its root's parameters.
func FuzzResolveSavepointTarget(f *testing.F) {
	for _, s := range []string{
		"", "x", "../x", "a/../../b", "/data/sp/../x", "/data/sp/./x", "/data/spx", "file:///data/sp/x",
		"file:///data/sp/../../etc", "file://localhost/data/sp/x", "file:/data/sp/x", "s3://bucket/sp/x", "s3://bucket/sp/../y",
		"s3://bucket/sp/x?endpoint=127.0.0.1:1", "s3://u:p@bucket/sp", "s3://bucket/sp/%2e%2e/x", "memory://mem/sp/x",
		"memory://mem/../sp", "memory://", "/mnt/b/x", "//data/sp", "/data/sp\\..\\x", "file:///data/sp/%2e%2e/x",
		"s3://bucket/sp/x%3Fendpoint=evil:1", "x?endpoint=evil:1", "x#y",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, target string, s3Default bool) {
		roots := SavepointRoots{Default: "/data/sp", Allowed: []string{"/mnt/b", "s3://bucket/sp?endpoint=minio:9000", "memory://mem/sp"}, WorkDir: "/work"}
		if s3Default {
			roots.Default = "s3://bucket/sp?endpoint=minio:9000"
		}
		got, err := ResolveSavepointTarget(target, roots)
		if err != nil || got == "" {
			return
		}
		if !insideOneOf(got, []string{"/data/sp", "/mnt/b"}, "bucket", "sp", "endpoint=minio:9000", "mem", "sp") {
			t.Fatalf("ResolveSavepointTarget(%q) = %q: outside every root", target, got)
		}
		// What the job opens is what was checked.
		loc, err := parseLocation(got)
		if err != nil {
			t.Fatalf("ResolveSavepointTarget(%q) = %q, which does not parse: %v", target, got, err)
		}
		if loc.s3 != nil && loc.s3.opts.Endpoint != "minio:9000" {
			t.Fatalf("ResolveSavepointTarget(%q) = %q: endpoint %q", target, got, loc.s3.opts.Endpoint)
		}
	})
}

// insideOneOf is the fuzz test's own containment check.
func insideOneOf(got string, dirs []string, bucket, s3prefix, s3query, memStore, memPrefix string) bool {
	if filepath.IsAbs(got) {
		if filepath.Clean(got) != got {
			return false
		}
		for _, d := range dirs {
			rel, err := filepath.Rel(d, got)
			if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return true
			}
		}
		return false
	}
	if strings.HasPrefix(got, "file:") {
		u, err := url.Parse(got)
		if err != nil || u.RawQuery != "" || u.Fragment != "" || u.Host != "" {
			return false
		}
		return filepath.IsAbs(u.Path) && insideOneOf(u.Path, dirs, bucket, s3prefix, s3query, memStore, memPrefix)
	}
	safe := func(segs []string) bool {
		for _, s := range segs {
			if s == ".." || s == "." || s == "" {
				return false
			}
		}
		return true
	}
	if rest, ok := strings.CutPrefix(got, "memory://"); ok { // no escapes, no parameters
		segs := strings.Split(rest, "/")
		return len(segs) > 1 && segs[0] == memStore && segs[1] == memPrefix && safe(segs)
	}
	u, err := url.Parse(got)
	if err != nil || u.Scheme != "s3" {
		return false
	}
	segs := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	return u.Host == bucket && segs[0] == s3prefix && safe(segs) && u.RawQuery == s3query && u.User == nil && u.Fragment == ""
}

// TestCheckSavepointTargetOnDisk: a symbolic link inside a root that leads
// out of it is refused; links among the roots themselves are followed on
// both sides.
func TestCheckSavepointTargetOnDisk(t *testing.T) {
	dir := t.TempDir()
	root, outside, real := filepath.Join(dir, "root"), filepath.Join(dir, "outside"), filepath.Join(dir, "real")
	for _, d := range []string{root, outside, real, filepath.Join(root, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustLink := func(target, link string) {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	mustLink(outside, filepath.Join(root, "escape"))
	mustLink(filepath.Join(root, "sub"), filepath.Join(root, "inner"))
	mustLink(real, filepath.Join(dir, "linked-root"))
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	roots := SavepointRoots{Default: root, Allowed: []string{filepath.Join(dir, "linked-root"), "s3://bucket/sp"}}
	for _, c := range []struct {
		target string
		err    error
	}{
		{"", nil},
		{root, nil},
		{filepath.Join(root, "new", "deeper"), nil},
		{filepath.Join(root, "inner", "x"), nil},
		{filepath.Join(root, "file", "x"), nil}, // fails when written, not here
		{"file://" + filepath.Join(root, "sub"), nil},
		{filepath.Join(dir, "linked-root", "x"), nil},
		{"s3://bucket/sp/x", nil},
		{filepath.Join(root, "escape"), ErrTargetRefused},
		{filepath.Join(root, "escape", "new", "x"), ErrTargetRefused},
		{"file://" + filepath.Join(root, "escape", "x"), ErrTargetRefused},
	} {
		resolved, err := ResolveSavepointTarget(c.target, roots)
		if err != nil {
			t.Fatalf("ResolveSavepointTarget(%q): %v", c.target, err)
		}
		if err := CheckSavepointTargetOnDisk(resolved, roots); !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("CheckSavepointTargetOnDisk(%q): %v, want %v", resolved, err, c.err)
		}
	}
}
