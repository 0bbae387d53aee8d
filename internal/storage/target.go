package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Errors of ResolveSavepointTarget, for callers to branch on (a REST
// server answers ErrTargetRefused with 403 and ErrNoSavepointDir and
// ErrBadURL with 400).
var (
	// ErrTargetRefused is wrapped by the error for a savepoint target that
	// lies outside every allowed root, or that names what only the
	// operator may choose (an S3 endpoint, S3 parameters, credentials).
	ErrTargetRefused = errors.New("savepoint target refused")
	// ErrNoSavepointDir is wrapped by the error for an empty target when
	// the job has no default savepoint directory.
	ErrNoSavepointDir = errors.New("no savepoint directory")
)

// SavepointRoots are the places a savepoint asked for by a client (REST
// request) may go: the job's own savepoint directory and the roots the
// operator allowed besides it. Roots are the operator's configuration and
// are trusted: an S3 root's parameters (endpoint=…, region=…) are the only
// way a client's target reaches an endpoint. ResolveSavepointTarget does
// no I/O and so cannot see symbolic links; CheckSavepointTargetOnDisk
// follows them.
type SavepointRoots struct {
	// Default is the job's savepoint directory (a storage URL or a path),
	// the target of a request that names none and the base of a relative
	// target. Default: "" (a request must then name a target under
	// Allowed).
	Default string
	// Allowed are further roots (storage URLs or paths) a target may lie
	// under. Default: none.
	Allowed []string
	// WorkDir is the absolute directory that relative file roots are
	// relative to (the process's working directory). Default: "" (a
	// relative root is then an error).
	WorkDir string
}

// ResolveSavepointTarget decides where a savepoint a client asked for
// goes, without any I/O: target is what the client sent ("" for the job's
// default directory). It returns the storage URL or absolute path to hand
// to the job ("" for the default directory), which is guaranteed to lie
// inside one of the roots: a file path that is, after cleaning, the root
// or below it; a memory or S3 location in the root's store under the
// root's prefix. A relative target is resolved under Default. An S3 target
// takes the parameters of the root it lies under; a target that carries
// parameters of its own (endpoint=, region=, …) or credentials is refused,
// so that a client can never make the job connect where the operator did
// not configure. Components ".." are resolved before the check, so
// "sp/../../etc" is refused as the "etc" it names.
//
// The error wraps ErrTargetRefused (outside every root, or parameters the
// client may not set), ErrNoSavepointDir (no target and no default) or
// ErrBadURL (a target that is no storage location at all, or a bad root),
// and names the allowed roots (without their parameters).
func ResolveSavepointTarget(target string, roots SavepointRoots) (string, error) {
	all, err := roots.parse()
	if err != nil {
		return "", err
	}
	target = strings.TrimSpace(target)
	if target == "" {
		switch {
		case len(all) == 0:
			return "", fmt.Errorf("%w: the request names no target directory, and the job has no savepoint directory and allows no other root: start the job with a savepoint directory (weir run --savepoint-dir, Options.Checkpointing.SavepointDir)", ErrNoSavepointDir)
		case strings.TrimSpace(roots.Default) == "":
			return "", fmt.Errorf("%w: the request names no target directory and the job has no savepoint directory: name one under %s, or start the job with a savepoint directory (weir run --savepoint-dir, Options.Checkpointing.SavepointDir)",
				ErrNoSavepointDir, describeRoots(all))
		}
		return "", nil
	}
	if i := strings.IndexFunc(target, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return "", fmt.Errorf("%w %q: a control character at byte %d", ErrBadURL, target, i)
	}
	var dflt *root
	if strings.TrimSpace(roots.Default) != "" {
		dflt = &all[0]
	}
	t, err := parseTarget(target, dflt, all)
	if err != nil {
		return "", err
	}
	for i := range all {
		if resolved, ok := all[i].contain(t); ok {
			return resolved, nil
		}
	}
	return "", refused(target, all, "it is outside the allowed savepoint roots")
}

// root is a parsed savepoint root, or a parsed target (whose query is
// then always empty).
type root struct {
	raw     string
	kind    rootKind
	path    string // file: absolute, clean
	store   string // memory: store name; s3: bucket
	prefix  string // memory, s3: clean prefix, "" = the whole store
	query   string // s3: the root's parameters, verbatim
	private bool   // memory:// alone
	fileURL bool   // a target given as a file URL: resolved as one
}

type rootKind int

const (
	fileRoot rootKind = iota + 1
	memoryRoot
	s3Root
)

func (r SavepointRoots) parse() ([]root, error) {
	var out []root
	add := func(what, raw string) error {
		if strings.TrimSpace(raw) == "" {
			return nil
		}
		rt, err := parseRoot(raw, r.WorkDir)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, rt)
		return nil
	}
	if err := add("the job's savepoint directory", r.Default); err != nil {
		return nil, err
	}
	for _, a := range r.Allowed {
		if err := add("allowed savepoint root", a); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CheckSavepointRoot reports whether raw is usable as a savepoint root
// (SavepointRoots.Allowed) relative to workDir; for checking configuration
// at start.
func CheckSavepointRoot(raw, workDir string) error {
	_, err := parseRoot(raw, workDir)
	return err
}

func parseRoot(raw, workDir string) (root, error) {
	s := strings.TrimSpace(raw)
	rt := root{raw: s}
	switch {
	case filepath.IsAbs(s):
		rt.kind, rt.path = fileRoot, filepath.Clean(s)
	case strings.HasPrefix(s, "file:"):
		loc, err := parseFile(raw, s)
		if err != nil {
			return root{}, err
		}
		rt.kind, rt.path = fileRoot, loc.path
	case strings.HasPrefix(s, "memory:"):
		loc, err := parseMemory(raw, s)
		if err != nil {
			return root{}, err
		}
		rt.kind, rt.store, rt.prefix, rt.private = memoryRoot, loc.name, loc.prefix, loc.private
	case strings.HasPrefix(s, "s3:"):
		u, err := parseS3URL(raw, s)
		if err != nil {
			return root{}, err
		}
		var opts S3Options
		if err := applyS3Query(&opts, u.Query()); err != nil {
			return root{}, badURL(raw, err.Error())
		}
		prefix, err := objectPrefix(raw, u.Path)
		if err != nil {
			return root{}, err
		}
		rt.kind, rt.store, rt.prefix, rt.query = s3Root, u.Host, prefix, u.RawQuery
	case strings.Contains(s, "://"):
		return root{}, badURL(raw, fmt.Sprintf("unknown scheme %q", s[:strings.Index(s, "://")]))
	default:
		if !filepath.IsAbs(workDir) {
			return root{}, badURL(raw, "a relative root needs an absolute working directory")
		}
		rt.kind, rt.path = fileRoot, filepath.Join(workDir, s)
	}
	return rt, nil
}

// parseTarget parses a client's target; a relative one is resolved under
// dflt (nil when the job has no savepoint directory).
func parseTarget(target string, dflt *root, all []root) (root, error) {
	t := root{raw: target}
	switch {
	case filepath.IsAbs(target):
		t.kind, t.path = fileRoot, filepath.Clean(target)
	case strings.HasPrefix(target, "file:"):
		loc, err := parseFile(target, target)
		if err != nil {
			return root{}, err
		}
		t.kind, t.path, t.fileURL = fileRoot, loc.path, true
	case strings.HasPrefix(target, "memory:"):
		rest, ok := strings.CutPrefix(target, "memory://")
		if !ok {
			return root{}, badURL(target, "a memory URL starts with memory://")
		}
		rest = strings.TrimSuffix(rest, "/")
		if rest == "" {
			t.kind, t.private = memoryRoot, true
			break
		}
		name, prefix, _ := strings.Cut(rest, "/")
		if err := validName(name); err != nil {
			return root{}, badURL(target, fmt.Sprintf("memory store name %q: %v", name, err))
		}
		p, err := objectPrefix(target, prefix)
		if err != nil {
			return root{}, err
		}
		t.kind, t.store, t.prefix = memoryRoot, name, p
	case strings.HasPrefix(target, "s3:"):
		if u, err := url.Parse(target); err == nil && u.User != nil {
			return root{}, refused(u.Redacted(), all, "credentials never come from a request: the job uses the operator's")
		}
		u, err := parseS3URL(target, target)
		if err != nil {
			return root{}, err
		}
		if u.RawQuery != "" || u.ForceQuery {
			return root{}, refused(target, all, "a request may not set S3 parameters (endpoint, region, secure, pathstyle, partsize, parallel): they come from the operator's configuration; name only s3://BUCKET/PREFIX under an allowed root")
		}
		p, err := objectPrefix(target, u.Path)
		if err != nil {
			return root{}, err
		}
		t.kind, t.store, t.prefix = s3Root, u.Host, p
	case strings.Contains(target, "://"):
		return root{}, badURL(target, fmt.Sprintf("unknown scheme %q", target[:strings.Index(target, "://")]))
	default: // relative: under the job's savepoint directory
		if dflt == nil {
			return root{}, refused(target, all, "a relative target lies under the job's savepoint directory, and the job has none (start it with weir run --savepoint-dir, Options.Checkpointing.SavepointDir)")
		}
		t = *dflt
		t.raw, t.query = target, ""
		switch dflt.kind {
		case fileRoot:
			t.path = filepath.Join(dflt.path, target)
		default:
			if dflt.private {
				return root{}, refused(target, all, "the job's savepoint directory is a private memory store, which has no subdirectories")
			}
			p, err := objectPrefix(target, path.Join(dflt.prefix, target))
			if err != nil {
				return root{}, err
			}
			t.prefix = p
		}
	}
	return t, nil
}

// parseS3URL checks the parts of an s3 URL common to roots and targets.
func parseS3URL(raw, s string) (*url.URL, error) {
	if !strings.HasPrefix(s, "s3://") {
		return nil, badURL(raw, "an s3 URL starts with s3:// (s3://BUCKET/PREFIX)")
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, badURL(raw, err.Error())
	case u.User != nil:
		return nil, badURL(u.Redacted(), "credentials do not belong in an s3 URL: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	case u.Fragment != "":
		return nil, badURL(raw, "an s3 URL takes no fragment")
	case u.Host == "":
		return nil, badURL(raw, "no bucket: write s3://BUCKET/PREFIX")
	}
	if err := s3utils.CheckValidBucketName(u.Host); err != nil {
		return nil, badURL(raw, fmt.Sprintf("bucket %q: %v", u.Host, err))
	}
	return u, nil
}

// objectPrefix cleans the key prefix of a memory or S3 location: "." and
// ".." components are resolved (never above the store's root), and what
// remains must be a valid name.
func objectPrefix(raw, p string) (string, error) {
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	prefix, err := cleanPrefix(c)
	if err != nil {
		return "", badURL(raw, err.Error())
	}
	return prefix, nil
}

// contain reports whether t lies inside r and returns the location to hand
// to the job: t with r's parameters.
func (r *root) contain(t root) (string, bool) {
	if r.kind != t.kind {
		return "", false
	}
	switch r.kind {
	case fileRoot:
		if !inDir(t.path, r.path) {
			return "", false
		}
		if t.fileURL { // escaped, so that it parses back to the same path
			return (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.path)}).String(), true
		}
		return t.path, true
	case memoryRoot:
		if r.private || t.private {
			return "memory://", r.private && t.private
		}
		if r.store != t.store || !inPrefix(t.prefix, r.prefix) {
			return "", false
		}
		return "memory://" + join(t.store, t.prefix), true
	default:
		if r.store != t.store || !inPrefix(t.prefix, r.prefix) {
			return "", false
		}
		// Built as a URL, so that a "?" or "#" of the prefix is escaped
		// and cannot start parameters of its own.
		u := url.URL{Scheme: "s3", Host: t.store, RawQuery: r.query}
		if t.prefix != "" {
			u.Path = "/" + t.prefix
		}
		return u.String(), true
	}
}

// inDir reports whether the clean absolute path p is dir or below it.
func inDir(p, dir string) bool {
	if p == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(p, dir)
}

// inPrefix reports whether the clean prefix p is prefix or below it.
func inPrefix(p, prefix string) bool { return p == prefix || under(p, prefix) }

func refused(target string, all []root, why string) error {
	return fmt.Errorf("%w: %q: %s; allowed: %s", ErrTargetRefused, target, why, describeRoots(all))
}

// describeRoots names the roots for an error, without their parameters
// (an endpoint is the operator's business).
func describeRoots(all []root) string {
	if len(all) == 0 {
		return "no savepoint root is configured (start the job with weir run --savepoint-dir, or allow roots with --savepoint-allowed-roots)"
	}
	names := make([]string, len(all))
	for i, r := range all {
		switch r.kind {
		case fileRoot:
			names[i] = r.path
		case memoryRoot:
			names[i] = "memory://" + join(r.store, r.prefix)
		default:
			names[i] = "s3://" + join(r.store, r.prefix)
		}
	}
	return strings.Join(names, ", ")
}

// CheckSavepointTargetOnDisk is the half of the check that needs the file
// system, for a location ResolveSavepointTarget returned: the symbolic
// links of a file target (of its longest part that exists) and of the
// roots are followed, and a target whose real path leaves every file root
// is refused (ErrTargetRefused), so that a link someone made inside a root
// cannot carry a savepoint out of it. Memory and S3 locations and the
// default directory ("") pass. A link made after the check is not seen.
func CheckSavepointTargetOnDisk(resolved string, roots SavepointRoots) error {
	p := ""
	switch {
	case filepath.IsAbs(resolved):
		p = resolved
	case strings.HasPrefix(resolved, "file:"):
		u, err := url.Parse(resolved)
		if err != nil {
			return badURL(resolved, err.Error())
		}
		p = filepath.FromSlash(u.Path)
	default:
		return nil
	}
	all, err := roots.parse()
	if err != nil {
		return err
	}
	real, err := realPath(p)
	if err != nil {
		return fmt.Errorf("savepoint target %q: %w", resolved, err)
	}
	for _, r := range all {
		if r.kind != fileRoot {
			continue
		}
		rootReal, err := realPath(r.path)
		if err != nil {
			continue
		}
		if inDir(real, rootReal) {
			return nil
		}
	}
	return refused(resolved, all, "a symbolic link leads it out of the allowed savepoint roots")
}

// realPath is the clean absolute path p with the symbolic links of its
// longest existing part followed.
func realPath(p string) (string, error) {
	rest := ""
	for q := filepath.Clean(p); ; q = filepath.Dir(q) {
		r, err := filepath.EvalSymlinks(q)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", err
		}
		if parent := filepath.Dir(q); parent == q {
			return filepath.Join(q, rest), nil
		}
		rest = filepath.Join(filepath.Base(q), rest)
	}
}
