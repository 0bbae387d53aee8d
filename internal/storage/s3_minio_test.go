package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/testutil/miniotest"
)

// TestMain stops the MinIO server the s3 tests share.
func TestMain(m *testing.M) { os.Exit(miniotest.Main(m)) }

// The s3 store goes through the conformance tests against a real MinIO, in
// a bucket of its own per test: under a key prefix, and at the root of the
// bucket.
func init() {
	storeKinds = append(storeKinds,
		struct {
			name     string
			new      func(t *testing.T) Store
			reopens  bool
			fileRoot func(s Store) string
		}{name: "s3 MinIO with prefix", reopens: true, new: func(t *testing.T) Store {
			return openMinIO(t, "some/prefix")
		}},
		struct {
			name     string
			new      func(t *testing.T) Store
			reopens  bool
			fileRoot func(s Store) string
		}{name: "s3 MinIO whole bucket", reopens: true, new: func(t *testing.T) Store {
			return openMinIO(t, "")
		}},
	)
}

// minioEnv gives the credentials of srv through the environment, as a
// deployment would, so that Open(store.URL()) works.
func minioEnv(t *testing.T, srv *miniotest.Server) {
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
}

// minioURL is the URL of prefix in bucket of srv.
func minioURL(srv *miniotest.Server, bucket, prefix string) string {
	u := "s3://" + bucket
	if prefix != "" {
		u += "/" + prefix
	}
	return u + "?endpoint=" + srv.Endpoint + "&secure=false&pathstyle=true"
}

// openMinIO opens, by URL, a store in a new bucket of the shared server.
func openMinIO(t *testing.T, prefix string) Store {
	t.Helper()
	srv := miniotest.Shared(t)
	minioEnv(t, srv)
	s, err := Open(minioURL(srv, srv.NewBucket(t), prefix))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newMinIOStore returns a store in a new bucket of srv with small parts.
func newMinIOStore(t *testing.T, srv *miniotest.Server, opts S3Options) (Store, string) {
	t.Helper()
	bucket := srv.NewBucket(t)
	opts.Endpoint, opts.Insecure, opts.PathStyle = srv.Endpoint, true, true
	opts.AccessKey, opts.SecretKey = srv.AccessKey, srv.SecretKey
	s, err := NewS3Store(bucket, "ckpt", opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, bucket
}

// randomBytes returns n bytes of a seeded generator.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeChunks writes b to w in odd-sized pieces, as a state snapshot does.
func writeChunks(t *testing.T, w io.Writer, b []byte) {
	t.Helper()
	for len(b) > 0 {
		n := min(len(b), 100_003)
		if _, err := w.Write(b[:n]); err != nil {
			t.Fatalf("Write: %v", err)
		}
		b = b[n:]
	}
}

// incompleteUploads lists the multipart uploads in progress in bucket.
func incompleteUploads(t *testing.T, srv *miniotest.Server, bucket string) []string {
	t.Helper()
	var keys []string
	for u := range srv.Client(t).ListIncompleteUploads(context.Background(), bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("ListIncompleteUploads: %v", u.Err)
		}
		keys = append(keys, u.Key)
	}
	return keys
}

// TestS3LargeObject writes 12 MiB with 5 MiB parts: three parts, two of
// them uploaded (in parallel) before Commit, invisible until Commit, then
// read back with the CRC the checkpoint layer records.
func TestS3LargeObject(t *testing.T) {
	srv := miniotest.Shared(t)
	s, bucket := newMinIOStore(t, srv, S3Options{PartSize: MinS3PartSize, ParallelUploads: 3})
	ctx := context.Background()
	data := randomBytes(12<<20, 1)
	const name = "job/chk-1/big.state"

	w, err := s.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	writeChunks(t, w, data[:11<<20])
	// Two parts went out: a multipart upload is in progress, and nothing
	// of it is visible.
	if got := incompleteUploads(t, srv, bucket); !slices.Equal(got, []string{"ckpt/" + name}) {
		t.Fatalf("incomplete uploads before Commit = %q, want the one of %s", got, name)
	}
	mustBeMissing(t, s, name)
	if got := list(t, s, ""); len(got) != 0 {
		t.Fatalf("List during the upload = %q, want nothing", got)
	}
	writeChunks(t, w, data[11<<20:])
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}

	if size, err := s.Stat(ctx, name); err != nil || size != int64(len(data)) {
		t.Fatalf("Stat = %d, %v; want %d", size, err, len(data))
	}
	info, err := srv.Client(t).StatObject(ctx, bucket, "ckpt/"+name, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(info.ETag, "-3") {
		t.Fatalf("ETag %q: want the ETag of a 3-part upload (suffix -3)", info.ETag)
	}
	if got := incompleteUploads(t, srv, bucket); len(got) != 0 {
		t.Fatalf("incomplete uploads after Commit = %q, want none", got)
	}
	got, err := readAll(ctx, s, name)
	if err != nil {
		t.Fatal(err)
	}
	if crc32.Checksum(got, castagnoli) != Checksum(data) || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes with CRC %08x, want %d bytes with CRC %08x", len(got), Checksum(got), len(data), Checksum(data))
	}

	// The same through the checkpoint layer, which checks size and CRC.
	cs := CheckpointStorage{Store: s, JobID: "job"}
	size, crc, err := cs.WriteStateFile(ctx, cs.CheckpointDir(2), "big.state", func(w io.Writer) error {
		writeChunks(t, w, data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(data)) || crc != Checksum(data) {
		t.Fatalf("WriteStateFile = %d bytes, CRC %08x; want %d, %08x", size, crc, len(data), Checksum(data))
	}
	if b, err := cs.ReadStateFile(ctx, cs.CheckpointDir(2), "big.state", size, crc); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("ReadStateFile: %d bytes, %v", len(b), err)
	}
}

// TestS3AbortMultipart checks that Abort, and a Commit under a canceled
// context, leave neither an object nor an incomplete upload.
func TestS3AbortMultipart(t *testing.T) {
	srv := miniotest.Shared(t)
	s, bucket := newMinIOStore(t, srv, S3Options{PartSize: MinS3PartSize, ParallelUploads: 2})
	data := randomBytes(11<<20, 2)

	w, err := s.Create(context.Background(), "job/aborted")
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, w, data)
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Abort = %v, want ErrClosed", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	w, err = s.Create(ctx, "job/canceled")
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, w, data)
	cancel()
	if err := w.Commit(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit after cancel = %v, want context.Canceled", err)
	}

	mustBeMissing(t, s, "job/aborted")
	mustBeMissing(t, s, "job/canceled")
	if got := list(t, s, ""); len(got) != 0 {
		t.Fatalf("List = %q, want nothing", got)
	}
	if got := incompleteUploads(t, srv, bucket); len(got) != 0 {
		t.Fatalf("incomplete uploads = %q, want none", got)
	}
}

// TestS3ServerStopsMidWrite kills MinIO while an object is being uploaded:
// the writes fail and nothing of them becomes visible; an unavailable
// server is an error, never "no such object"; once the server is back (same
// port, same data), the committed objects are there and new writes work.
func TestS3ServerStopsMidWrite(t *testing.T) {
	srv := miniotest.Start(t)
	s, _ := newMinIOStore(t, srv, S3Options{PartSize: MinS3PartSize, ParallelUploads: 2, MaxRetries: 2})
	ctx := context.Background()
	put(t, s, "job/chk-1/_metadata", "committed before")
	data := randomBytes(12<<20, 3)

	big, err := s.Create(ctx, "job/chk-2/big.state")
	if err != nil {
		t.Fatal(err)
	}
	defer big.Abort()
	writeChunks(t, big, data[:6<<20]) // the first part is on its way
	small, err := s.Create(ctx, "job/chk-2/_metadata")
	if err != nil {
		t.Fatal(err)
	}
	defer small.Abort()
	if _, err := io.WriteString(small, "never committed"); err != nil {
		t.Fatal(err)
	}

	srv.Stop()

	_, werr := big.Write(data[6<<20:]) // sends the second part: may fail now, or at Commit
	if err := big.Commit(); err == nil {
		t.Fatalf("Commit of a multipart upload with the server down succeeded (Write: %v)", werr)
	} else {
		t.Logf("Commit with the server down: %v", err)
	}
	if err := small.Commit(); err == nil {
		t.Fatal("Commit of a small object with the server down succeeded")
	}
	if _, err := s.Stat(ctx, "job/chk-1/_metadata"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat with the server down = %v, want an error that is not ErrNotFound", err)
	}
	if _, err := s.Open(ctx, "job/chk-1/_metadata"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("Open with the server down = %v, want an error that is not ErrNotFound", err)
	}
	if names, err := s.List(ctx, "job"); err == nil {
		t.Fatalf("List with the server down = %q, want an error", names)
	}

	srv.Restart(t)

	mustBeMissing(t, s, "job/chk-2/big.state")
	mustBeMissing(t, s, "job/chk-2/_metadata")
	if got, want := list(t, s, ""), []string{"job/chk-1/_metadata"}; !slices.Equal(got, want) {
		t.Fatalf("List after the restart = %q, want %q", got, want)
	}
	mustGet(t, s, "job/chk-1/_metadata", "committed before")

	w, err := s.Create(ctx, "job/chk-2/big.state")
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, w, data)
	if err := w.Commit(); err != nil {
		t.Fatalf("Commit after the restart: %v", err)
	}
	put(t, s, "job/chk-2/_metadata", "committed after")
	got, err := readAll(ctx, s, "job/chk-2/big.state")
	if err != nil || Checksum(got) != Checksum(data) || len(got) != len(data) {
		t.Fatalf("read back after the restart: %d bytes, CRC %08x, %v; want %d bytes, CRC %08x", len(got), Checksum(got), err, len(data), Checksum(data))
	}
	if got, want := list(t, s, "job"), []string{"job/chk-1/_metadata", "job/chk-2/_metadata", "job/chk-2/big.state"}; !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
}

// TestS3Checkpoints runs the checkpoint layer over MinIO: Latest, and
// ResolveRestore of an s3:// checkpoint path, which keeps the URL's options
// for the job directory it opens.
func TestS3Checkpoints(t *testing.T) {
	srv := miniotest.Shared(t)
	minioEnv(t, srv)
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	root, err := Open(minioURL(srv, bucket, "root"))
	if err != nil {
		t.Fatal(err)
	}
	cs := CheckpointStorage{Store: root, JobID: "job"}
	files := map[string]string{"a.state": "alpha", "b.state": "beta"}
	writeCheckpoint(t, cs, 3, files)
	writeCheckpoint(t, cs, 4, files)
	if err := root.Delete(ctx, "job/chk-4/a.state"); err != nil { // damage 4: a state file is missing
		t.Fatal(err)
	}
	dir, m, skipped, err := cs.Latest(ctx)
	if err != nil || dir != "job/chk-3" || m.ID != 3 || len(skipped) != 1 {
		t.Fatalf("Latest = %q, %v, skipped %v, %v; want job/chk-3 with chk-4 skipped", dir, m, skipped, err)
	}

	for _, path := range []string{
		minioURL(srv, bucket, "root/job/chk-3"),
		strings.Replace(minioURL(srv, bucket, "root/job/chk-3"), "?", "/_metadata?", 1),
	} {
		st, dir, m, err := ResolveRestore(ctx, path)
		if err != nil {
			t.Fatalf("ResolveRestore(%s): %v", path, err)
		}
		if want := minioURL(srv, bucket, "root/job"); st.URL() != want || dir != "chk-3" || m.ID != 3 || m.Kind != checkpoint.KindCheckpoint {
			t.Fatalf("ResolveRestore(%s) = %s, %q, id %d; want %s, chk-3, 3", path, st.URL(), dir, m.ID, want)
		}
		h := m.Operators[0].Subtasks[0].Keyed[0]
		if b, err := (CheckpointStorage{Store: st}).ReadStateFile(ctx, dir, h.Path, h.Size, h.CRC); err != nil || string(b) != "alpha" {
			t.Fatalf("reading the restored state: %q, %v", b, err)
		}
	}
	_, _, _, err = ResolveRestore(ctx, minioURL(srv, bucket, "root/job/chk-9"))
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no such directory") {
		t.Fatalf("ResolveRestore of a missing checkpoint = %v, want ErrNotFound, no such directory", err)
	}
}

// TestS3SetupErrors checks that a missing bucket and wrong credentials are
// errors that say what to fix, and not "no such object".
func TestS3SetupErrors(t *testing.T) {
	srv := miniotest.Shared(t)
	ctx := context.Background()
	opts := S3Options{Endpoint: srv.Endpoint, Insecure: true, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, MaxRetries: 1}

	noBucket, err := NewS3Store(fmt.Sprintf("missing-%d", os.Getpid()), "p", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noBucket.List(ctx, ""); err == nil || !strings.Contains(err.Error(), "create it first") {
		t.Fatalf("List in a missing bucket = %v, want an error saying to create the bucket", err)
	}
	w, err := noBucket.Create(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "create it first") {
		t.Fatalf("Commit in a missing bucket = %v, want an error saying to create the bucket", err)
	}

	bad := opts
	bad.SecretKey = "wrong-secret"
	s, err := NewS3Store(srv.NewBucket(t), "p", bad)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"List", func() error { _, err := s.List(ctx, ""); return err }},
		{"Stat", func() error { _, err := s.Stat(ctx, "x"); return err }},
		{"Open", func() error { _, err := s.Open(ctx, "x"); return err }},
	} {
		if err := op.do(); err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "check the credentials") {
			t.Errorf("%s with a wrong secret key = %v, want an error about the credentials", op.name, err)
		}
	}
}
