package weir_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/internal/storage"
	"github.com/weirstream/weir/internal/testutil/miniotest"
)

// s3URL points the AWS credential variables at srv and returns the
// checkpoint-storage URL of prefix in bucket.
func s3URL(t *testing.T, srv *miniotest.Server, bucket, prefix string) string {
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&secure=false&pathstyle=true", bucket, prefix, srv.Endpoint)
}

// TestS3ServerOutage stops the MinIO server under a running job: the
// checkpoint in flight fails, the job keeps running, and the first
// checkpoint after the server is back completes.
func TestS3ServerOutage(t *testing.T) {
	srv := miniotest.Start(t)
	url := s3URL(t, srv, srv.NewBucket(t), "ck")
	opts := weir.Options{Parallelism: 2, JobID: "s3-outage", Restart: "none"}
	opts.Checkpointing.Storage = url
	opts.Checkpointing.Interval = 100 * time.Millisecond
	opts.Checkpointing.Timeout = 2 * time.Second
	opts.Checkpointing.TolerableFailures = -1
	env := weir.NewEnvironment(opts)
	src := datagen.Generator(1<<40, func(i int64) string { return fmt.Sprint("k", i%97) }).
		WithOptions(datagen.Options{RecordsPerSecond: 5000})
	sink := collect.Transactional[string]()
	env.FromSource("src", src).KeyBy(func(s string) string { return s }).
		Process("count", &runningCount{}).SinkTo("out", sink)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := env.ExecuteAsync(ctx, "s3-outage")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()

	stats := func() (weir.CheckpointSummary, []weir.CheckpointStats) { return job.Checkpoints() }
	spWait(t, "a first completed checkpoint", 30*time.Second, func() bool { s, _ := stats(); return s.Completed > 0 })
	srv.Stop()
	var failed int64
	spWait(t, "a failed checkpoint while the server is down", 30*time.Second, func() bool {
		_, hist := stats()
		for _, c := range hist {
			if c.Status == "FAILED" {
				failed = c.ID
				return true
			}
		}
		return false
	})
	select {
	case <-job.Done():
		t.Fatalf("the job ended while the server was down: %v", job.Wait())
	default:
	}
	srv.Restart(t)
	spWait(t, "a checkpoint completed after the server came back", 60*time.Second, func() bool {
		s, _ := stats()
		return s.LatestCompleted > failed
	})
	s, _ := stats()
	t.Logf("checkpoint %d failed while the server was down; %d completed after it came back (summary %+v)", failed, s.LatestCompleted, s)
	select {
	case <-job.Done():
		t.Fatalf("the job ended: %v", job.Wait())
	default:
	}
}

// TestS3StorageStartupErrors checks that a missing bucket and wrong
// credentials fail ExecuteAsync, naming the option, before any checkpoint.
func TestS3StorageStartupErrors(t *testing.T) {
	srv := miniotest.Start(t)
	for _, tc := range []struct {
		name, url, secret, want string
	}{
		{"missing bucket", s3URL(t, srv, fmt.Sprintf("no-such-bucket-%d", os.Getpid()), "ck"), srv.SecretKey, "create it first"},
		{"wrong credentials", s3URL(t, srv, srv.NewBucket(t), "ck"), "wrong-secret", "credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_SECRET_ACCESS_KEY", tc.secret)
			opts := weir.Options{Parallelism: 1, JobID: "s3-bad"}
			opts.Checkpointing.Storage = tc.url
			opts.Checkpointing.Interval = 100 * time.Millisecond
			env := weir.NewEnvironment(opts)
			env.FromSource("src", datagen.Sequence(0, 9)).SinkTo("out", collect.New[int64]())
			job, err := env.ExecuteAsync(context.Background(), "s3-bad")
			if err == nil {
				job.Cancel()
				job.Wait()
				t.Fatal("ExecuteAsync succeeded")
			}
			if !strings.Contains(err.Error(), "Options.Checkpointing.Storage") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ExecuteAsync = %v; want an error naming Options.Checkpointing.Storage and saying %q", err, tc.want)
			}
		})
	}
}

// TestExactlyOnceHarnessS3 runs the exactly-once harness with checkpoints
// in a real MinIO server (storage faults injected on top), on both
// backends.
func TestExactlyOnceHarnessS3(t *testing.T) {
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	seeds := 5
	for _, backend := range []string{"heap", "pebble", "pebble-changelog"} {
		for seed := range seeds {
			t.Run(fmt.Sprint(backend, "/seed", seed), func(t *testing.T) {
				st, err := storage.NewS3Store(bucket, backend, storage.S3Options{Endpoint: srv.Endpoint, Insecure: true,
					PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
				if err != nil {
					t.Fatal(err)
				}
				r := runHarnessWith(t, uint64(2000+seed), backend, st)
				t.Logf("faults fired %v, storage faults %d, restarts %d, checkpoints %d", r.fired, r.storage, r.restarts, r.ckpts)
			})
		}
	}
}

// TestExactlyOnceHarnessFile runs the exactly-once harness with checkpoints
// in files (storage faults injected on top), on both backends.
func TestExactlyOnceHarnessFile(t *testing.T) {
	seeds := 5
	if testing.Short() {
		seeds = 1
	}
	for _, backend := range []string{"heap", "pebble", "pebble-changelog"} {
		for seed := range seeds {
			t.Run(fmt.Sprint(backend, "/seed", seed), func(t *testing.T) {
				st, err := storage.Open(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				runHarnessWith(t, uint64(3000+seed), backend, st)
			})
		}
	}
}
