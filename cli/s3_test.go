package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/testutil/miniotest"
)

// s3CheckpointDir starts a MinIO server for t, points the AWS credential
// variables at it and returns a --checkpoint-dir URL in a fresh bucket.
func s3CheckpointDir(t *testing.T, prefix string) (*miniotest.Server, string) {
	t.Helper()
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	return srv, fmt.Sprintf("s3://%s/%s?endpoint=%s&secure=false&pathstyle=true", bucket, prefix, srv.Endpoint)
}

// TestS3SIGKILLRestoreLatest kills `weir run wordcount` processes whose
// checkpoints go to S3 (a real MinIO server) and restarts them with
// `--restore latest`: every restart is a fresh process that finds its
// checkpoint in the bucket. The committed output must be exactly once.
func TestS3SIGKILLRestoreLatest(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real weir processes against a MinIO server")
	}
	_, ck := s3CheckpointDir(t, "wordcount-ck")
	dir := t.TempDir()
	input := wordsInput(t, dir, sigkillInputLines)
	text, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	want := wordTotals(string(text))
	rng := rand.New(rand.NewPCG(11, 13))
	r := sigkillRoundAt(t, rng, filepath.Join(dir, "round"), ck, input, want, sigkillMaxDelay, 3)
	if r.kills == 0 {
		t.Logf("no run was killed before it ended (the machine is fast): the restore after the end still ran from S3")
	}
}

// TestS3CheckpointDirErrors checks that a missing bucket and wrong
// credentials stop `weir run` at startup with a message naming
// --checkpoint-dir and saying what to fix.
func TestS3CheckpointDirErrors(t *testing.T) {
	srv, _ := s3CheckpointDir(t, "x")
	dir := t.TempDir()
	input := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(input, []byte("a b c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := fmt.Sprintf("s3://no-such-bucket-%d/ck?endpoint=%s&secure=false&pathstyle=true", os.Getpid(), srv.Endpoint)
	_, stderr, code := runWeir(t, "run", "wordcount", "--input", input, "--output", filepath.Join(dir, "out1"),
		"--checkpoint-interval", "100ms", "--checkpoint-dir", missing)
	if code == 0 || !strings.Contains(stderr, "--checkpoint-dir") || !strings.Contains(stderr, "create it first") {
		t.Errorf("missing bucket: exit %d, stderr %q; want a non-zero exit naming --checkpoint-dir and saying to create the bucket", code, stderr)
	}
	if strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("missing bucket: want a one-line message, got %q", stderr)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	good := fmt.Sprintf("s3://%s/ck?endpoint=%s&secure=false&pathstyle=true", srv.NewBucket(t), srv.Endpoint)
	_, stderr, code = runWeir(t, "run", "wordcount", "--input", input, "--output", filepath.Join(dir, "out2"),
		"--checkpoint-interval", "100ms", "--checkpoint-dir", good)
	if code == 0 || !strings.Contains(stderr, "--checkpoint-dir") || !strings.Contains(stderr, "credentials") {
		t.Errorf("wrong credentials: exit %d, stderr %q; want a non-zero exit naming --checkpoint-dir and the credentials", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out2")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(dir, "out2"))
		if len(entries) > 0 {
			t.Errorf("wrong credentials: the job wrote output before failing: %d entries", len(entries))
		}
	}
}
