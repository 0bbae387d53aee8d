package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/storage"
)

// latestCheckpoint returns the newest complete checkpoint of the wordcount
// job in ck, nil when there is none yet.
func latestCheckpoint(t *testing.T, ck string) *checkpoint.Metadata {
	t.Helper()
	store, err := storage.Open(ck)
	if err != nil {
		t.Fatal(err)
	}
	_, md, _, err := storage.CheckpointStorage{Store: store, JobID: "wordcount"}.Latest(context.Background())
	if err != nil {
		return nil
	}
	return md
}

// killAfterCheckpoint runs weir with args and kills it with SIGKILL as
// soon as ck holds a complete checkpoint newer than after. It reports
// whether the kill landed (false: the process ended by itself first).
func killAfterCheckpoint(t *testing.T, args []string, ck string, after int64) (killed bool, md *checkpoint.Metadata, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(sigkillRunTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return false, nil, e.String()
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			t.Fatalf("weir %v: no checkpoint after %d within %v; stderr: %s", args, after, sigkillRunTimeout, e.String())
		case <-tick.C:
		}
		if md = latestCheckpoint(t, ck); md != nil && md.ID > after {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			return ws.Signaled() && ws.Signal() == syscall.SIGKILL, md, e.String()
		}
	}
}

// maxOperatorParallelism is the parallelism of the checkpoint's operators
// (all run at --parallelism).
func maxOperatorParallelism(md *checkpoint.Metadata) int {
	p := 0
	for _, op := range md.Operators {
		p = max(p, op.Parallelism)
	}
	return p
}

// TestWordCountRestoreAtOtherParallelism runs `weir run wordcount` at
// parallelism 4 and kills it after a checkpoint, restores the latest
// checkpoint at parallelism 2 and kills it after a newer one, then restores
// at parallelism 3 to the end: keyed state moves by key groups, source
// splits and sink transactions are redistributed, and the committed output
// is exactly once.
func TestWordCountRestoreAtOtherParallelism(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three real weir processes")
	}
	dir := t.TempDir()
	input := wordsInput(t, dir, 300_000)
	text, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	out, ck := filepath.Join(dir, "out"), filepath.Join(dir, "ck")
	args := []string{"run", "wordcount", "--input", input, "--output", out, "--checkpoint-interval", "20ms", "--checkpoint-dir", ck}
	with := func(extra ...string) []string { return append(slices.Clip(args), extra...) }

	killed, md1, stderr := killAfterCheckpoint(t, with("--parallelism", "4"), ck, 0)
	if !killed {
		t.Fatalf("run at parallelism 4 ended before its first checkpoint (make the input larger); stderr: %s", stderr)
	}
	if p := maxOperatorParallelism(md1); p != 4 {
		t.Fatalf("checkpoint %d of the first run has parallelism %d, want 4", md1.ID, p)
	}
	killed, md2, stderr := killAfterCheckpoint(t, with("--parallelism", "2", "--restore", "latest"), ck, md1.ID)
	if !killed {
		t.Fatalf("run at parallelism 2 ended before a new checkpoint (make the input larger); stderr: %s", stderr)
	}
	if p := maxOperatorParallelism(md2); p != 2 {
		t.Fatalf("checkpoint %d of the second run has parallelism %d, want 2", md2.ID, p)
	}
	if _, stderr, code := runWeir(t, with("--parallelism", "3", "--restore", "latest")...); code != 0 {
		t.Fatalf("run at parallelism 3: exit %d: %s", code, stderr)
	}
	if md3 := latestCheckpoint(t, ck); md3 == nil || md3.ID <= md2.ID || maxOperatorParallelism(md3) != 3 {
		t.Fatalf("the last run's final checkpoint: %+v, want one after %d at parallelism 3", md3, md2.ID)
	}
	checkWordCountOutput(t, out, wordTotals(string(text)))
}

// TestWordCountRestoreIntoOtherMaxParallelismFails: a checkpoint's key
// groups cannot be split differently; the error says so. (weir run has no
// flag for the max parallelism, so the checkpoint's metadata is rewritten
// as a job with another one would have written it.)
func TestWordCountRestoreIntoOtherMaxParallelismFails(t *testing.T) {
	dir := t.TempDir()
	input := wordsInput(t, dir, 1000)
	out, ck := filepath.Join(dir, "out"), filepath.Join(dir, "ck")
	args := []string{"run", "wordcount", "--input", input, "--output", out, "--checkpoint-interval", "20ms", "--checkpoint-dir", ck, "--parallelism", "2"}
	if _, stderr, code := runWeir(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	md := latestCheckpoint(t, ck)
	if md == nil {
		t.Fatal("no checkpoint after a run to the end")
	}
	md.MaxParallelism = 64
	store, err := storage.Open(ck)
	if err != nil {
		t.Fatal(err)
	}
	cs := storage.CheckpointStorage{Store: store, JobID: "wordcount"}
	b, err := checkpoint.EncodeMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	chk := filepath.Join(ck, "wordcount", fmt.Sprint("chk-", md.ID), storage.MetadataName)
	if err := os.WriteFile(chk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, md2, _, err := cs.Latest(context.Background()); err != nil || md2.MaxParallelism != 64 {
		t.Fatalf("the rewritten checkpoint is not the latest: %v", err)
	}
	_, stderr, code := runWeir(t, append(args, "--restore", "latest")...)
	if code == 0 {
		t.Fatal("restore into another max parallelism succeeded")
	}
	for _, want := range []string{"MaxParallelism 64", "the job has 128", "cannot be redistributed"} {
		if !bytes.Contains([]byte(stderr), []byte(want)) {
			t.Errorf("stderr does not say %q: %s", want, stderr)
		}
	}
}
