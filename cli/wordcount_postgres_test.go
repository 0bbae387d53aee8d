package cli

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weirstream/weir/internal/testutil/pgtest"
)

// The tests of `weir run wordcount` with postgres:// endpoints share one
// real PostgreSQL server (a database each) and run real weir processes,
// killed with SIGKILL at random moments.

func pgExec(t *testing.T, url string, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// checkCountTable checks that table holds each (w, k) for k = 1..want[w]
// exactly once and nothing else, and that no prepared transaction is left.
func checkCountTable(t *testing.T, url, table string, want map[string]int) {
	t.Helper()
	seen := map[string][]int{}
	var unexpected []string
	for _, line := range pgtest.Query[string](t, url, "SELECT word || ',' || count FROM "+table) {
		w, k, ok := parseCountLine(line)
		if !ok || k < 1 || k > want[w] {
			unexpected = append(unexpected, line)
			continue
		}
		if seen[w] == nil {
			seen[w] = make([]int, want[w])
		}
		seen[w][k-1]++
	}
	var missing, dup []string
	for w, n := range want {
		for k := 1; k <= n; k++ {
			switch c := seenAt(seen, w, k); {
			case c == 0:
				missing = append(missing, fmt.Sprintf("%s,%d", w, k))
			case c > 1:
				dup = append(dup, fmt.Sprintf("%s,%d x%d", w, k, c))
			}
		}
	}
	if len(missing)+len(dup)+len(unexpected) > 0 {
		t.Fatalf("table %s: %d missing (%s), %d duplicated (%s), %d unexpected (%s)", table,
			len(missing), firstOf(missing, 10), len(dup), firstOf(dup, 10), len(unexpected), firstOf(unexpected, 10))
	}
	if p := pgtest.Query[string](t, url, "SELECT gid FROM pg_prepared_xacts"); len(p) > 0 {
		t.Fatalf("prepared transactions left: %v", p)
	}
}

// pgCount is the number of rows of table, 0 if it does not exist yet.
func pgCount(t *testing.T, url, table string) int64 {
	if pgtest.Query[bool](t, url, "SELECT to_regclass($1) IS NULL", table)[0] {
		return 0
	}
	return pgtest.Query[int64](t, url, "SELECT count(*) FROM "+table)[0]
}

func seenAt(seen map[string][]int, w string, k int) int {
	if s := seen[w]; s != nil {
		return s[k-1]
	}
	return 0
}

func pgSeed(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WEIR_SIGKILL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with WEIR_SIGKILL_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// runKilled runs weir with args, restoring after the first run, killing up
// to kills runs after a random delay up to maxDelay, then lets one run end.
func runKilled(t *testing.T, rng *rand.Rand, args []string, kills int, maxDelay time.Duration, progress func() int64) {
	t.Helper()
	for run, killed := 0, 0; ; run++ {
		a := args
		if run > 0 {
			a = append(slices.Clip(args), "--restore", "latest")
		}
		delay := 60 * time.Second
		if killed < kills {
			// Restored runs have less left to do: kill them sooner (some
			// while they restore and commit what the checkpoint holds).
			delay = 100*time.Millisecond + time.Duration(rng.Int64N(int64(max(maxDelay>>run, 100*time.Millisecond))))
		}
		r := startAndKill(t, a, delay)
		r.restore = run > 0
		t.Logf("run %d: %v; %d rows in the table", run, r, progress())
		switch {
		case r.killed && delay == 60*time.Second:
			t.Fatalf("run %d did not finish within %v", run, delay)
		case r.killed:
			killed++
			continue
		case r.code != 0:
			t.Fatalf("run %d exited %d", run, r.code)
		}
		t.Logf("%d runs, %d killed", run+1, killed)
		return
	}
}

func TestPostgresWordCount(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real weir processes against a real PostgreSQL server")
	}
	srv := pgtest.Start(t, pgtest.Options{})
	rng := pgSeed(t)
	dir := t.TempDir()
	input := wordsInput(t, dir, 60_000)
	text, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	want := wordTotals(string(text))

	// Exactly-once into a table, killed at random moments: each (word, k)
	// once, no prepared transaction left; one more restore after the end
	// changes nothing.
	t.Run("output exactly-once SIGKILL", func(t *testing.T) {
		url := srv.NewDatabase(t)
		ck := filepath.Join(t.TempDir(), "ck")
		args := []string{"run", "wordcount", "--input", input, "--output", url + "&table=counts",
			"--parallelism", "2", "--checkpoint-interval", "50ms", "--checkpoint-dir", ck}
		runKilled(t, rng, args, 4, 1500*time.Millisecond, func() int64 { return pgCount(t, url, "counts") })
		checkCountTable(t, url, "counts", want)
		n := pgtest.Query[int64](t, url, "SELECT count(*) FROM counts")
		if r := startAndKill(t, append(slices.Clip(args), "--restore", "latest"), 60*time.Second); r.code != 0 {
			t.Fatalf("restore after the end: %v", r)
		}
		if m := pgtest.Query[int64](t, url, "SELECT count(*) FROM counts"); m[0] != n[0] {
			t.Fatalf("restore after the end: %d rows, then %d", n[0], m[0])
		}
	})

	// Upsert keeps each word's latest count across kills.
	t.Run("output upsert SIGKILL", func(t *testing.T) {
		url := srv.NewDatabase(t)
		ck := filepath.Join(t.TempDir(), "ck")
		args := []string{"run", "wordcount", "--input", input, "--output", url + "&table=latest&mode=upsert",
			"--parallelism", "2", "--checkpoint-interval", "50ms", "--checkpoint-dir", ck}
		runKilled(t, rng, args, 3, 1500*time.Millisecond, func() int64 { return pgCount(t, url, "latest") })
		got := map[string]int{}
		for _, line := range pgtest.Query[string](t, url, "SELECT word || ',' || count FROM latest") {
			w, k, _ := parseCountLine(line)
			got[w] = k
		}
		if len(got) != len(want) {
			t.Fatalf("%d words, want %d", len(got), len(want))
		}
		for w, n := range want {
			if got[w] != n {
				t.Errorf("%s: %d, want %d", w, got[w], n)
			}
		}
	})

	// CDC input, unbounded: rows inserted before the start, while the job
	// runs and while it is down are each counted once.
	t.Run("input CDC SIGKILL", func(t *testing.T) {
		url := srv.NewDatabase(t)
		pgExec(t, url, "CREATE TABLE lines (id serial PRIMARY KEY, line text)")
		lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")[:3000]
		var inserted []string
		insert := func(n int) {
			batch := lines[len(inserted):min(len(lines), len(inserted)+n)]
			pgExec(t, url, "INSERT INTO lines (line) SELECT unnest($1::text[])", batch)
			inserted = append(inserted, batch...)
		}
		insert(1000) // before the start
		ck := filepath.Join(t.TempDir(), "ck")
		args := []string{"run", "wordcount", "--input", url + "&table=lines&column=line", "--output", url + "&table=counts",
			"--parallelism", "2", "--checkpoint-interval", "100ms", "--checkpoint-dir", ck}
		for run := range 4 {
			a := args
			if run > 0 {
				a = append(slices.Clip(args), "--restore", "latest")
			}
			cmd, done := startWeir(t, a)
			time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
			insert(300) // while running
			time.Sleep(time.Duration(100+rng.IntN(700)) * time.Millisecond)
			cmd.Process.Kill()
			<-done
			insert(200) // while down
		}
		wantLines := wordTotals(strings.Join(inserted, "\n"))
		total := 0
		for _, n := range wantLines {
			total += n
		}
		cmd, done := startWeir(t, append(slices.Clip(args), "--restore", "latest"))
		defer func() { cmd.Process.Kill(); <-done }()
		deadline := time.Now().Add(60 * time.Second)
		for {
			n := pgtest.Query[int64](t, url, "SELECT count(*) FROM counts")[0]
			if n >= int64(total) || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		cmd.Process.Kill()
		<-done
		checkCountTable(t, url, "counts", wantLines)
	})

	// stop=current: rows inserted after the first start are not read,
	// after restarts neither.
	t.Run("input CDC stop=current", func(t *testing.T) {
		url := srv.NewDatabase(t)
		pgExec(t, url, "CREATE TABLE lines (id serial PRIMARY KEY, line text)")
		lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
		before := lines[:2000]
		pgExec(t, url, "INSERT INTO lines (line) SELECT unnest($1::text[])", before)
		ck := filepath.Join(t.TempDir(), "ck")
		args := []string{"run", "wordcount", "--input", url + "&table=lines&column=line&stop=current", "--output", url + "&table=counts",
			"--parallelism", "2", "--checkpoint-interval", "50ms", "--checkpoint-dir", ck}
		pgExec(t, url, "CREATE TABLE counts (word text, count bigint)")
		cmd, done := startWeir(t, args)
		// Once a checkpoint holds the stop position (its commit put rows
		// in the table), rows come that must not be read; then the job is
		// killed (unless it ended) and restored. (A checkpoint taken
		// before the source's first poll holds no position: a restore
		// from it starts over, and its snapshot would hold these rows.)
		deadline := time.Now().Add(30 * time.Second)
		for pgtest.Query[int64](t, url, "SELECT count(*) FROM counts")[0] == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		pgExec(t, url, "INSERT INTO lines (line) SELECT unnest($1::text[])", lines[2000:2500])
		cmd.Process.Kill()
		<-done
		pgExec(t, url, "INSERT INTO lines (line) SELECT unnest($1::text[])", lines[2500:3000])
		if r := startAndKill(t, append(slices.Clip(args), "--restore", "latest"), 60*time.Second); r.code != 0 || r.killed {
			t.Fatalf("restored run: %v", r)
		}
		checkCountTable(t, url, "counts", wordTotals(strings.Join(before, "\n")))
	})

	// Bad input: one line naming what was wrong, exit code 1.
	t.Run("bad input", func(t *testing.T) {
		url := srv.NewDatabase(t)
		db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
		srv.CreatePasswordUser(t, db, "right")
		pgExec(t, url, "CREATE TABLE texty (word text, count text)")
		pgExec(t, url, "CREATE TABLE lines (id int, line text)")
		// A slot that another client holds.
		cfg, err := pgconn.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["replication"] = "database"
		holder, err := pgconn.ConnectConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close(context.Background())
		if _, err := pglogrepl.CreateReplicationSlot(context.Background(), holder, "held", "pgoutput", pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "NOEXPORT_SNAPSHOT"}); err != nil {
			t.Fatal(err)
		}
		pgExec(t, url, "CREATE PUBLICATION held_pub FOR TABLE lines")
		if err := pglogrepl.StartReplication(context.Background(), holder, "held", 0, pglogrepl.StartReplicationOptions{PluginArgs: []string{"proto_version '1'", "publication_names 'held_pub'"}}); err != nil {
			t.Fatal(err)
		}
		bad := fmt.Sprintf("postgres://%s:wrong@%s/%s?sslmode=disable", pgtest.PasswordUser, srv.Addr(), db)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--output", bad + "&table=t"}, "password authentication failed for user \"" + pgtest.PasswordUser + "\""},
			{[]string{"--output", url}, "add ?table=NAME"},
			{[]string{"--output", url + "&table=texty"}, "table texty: column count is of type text"},
			{[]string{"--output", url + "&table=t&mode=merge"}, "mode=merge: use append or upsert"},
			{[]string{"--input", url + "&table=nosuch&column=line"}, `table nosuch: relation "nosuch" does not exist`},
			{[]string{"--input", url + "&table=lines&column=nosuch"}, "table lines has no column nosuch"},
			{[]string{"--input", url + "&table=lines&column=id"}, "table lines, column id is of type int4"},
			{[]string{"--input", url + "&table=lines&column=line&stop=later"}, "stop=later"},
			{[]string{"--input", url + "&table=lines&column=line&slot=held"}, "replication slot held is in use by another client"},
		} {
			_, stderr, code := runWeir(t, append([]string{"run", "wordcount", "--checkpoint-interval", "100ms"}, c.args...)...)
			msg := strings.TrimSpace(stderr)
			if code == 0 || !strings.Contains(msg, c.want) || strings.Count(msg, "\n") > 0 {
				t.Errorf("%v: exit %d, stderr %q; want one line with %q", c.args, code, msg, c.want)
			}
		}
	})
}

// startWeir starts weir with args; done is closed when it has ended.
func startWeir(t *testing.T, args []string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WEIR_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		if s := stderr.String(); s != "" {
			t.Logf("stderr of %v: %s", args, s)
		}
		close(done)
	}()
	return cmd, done
}
