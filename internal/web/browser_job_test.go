package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/state"
)

// TestBrowserRunningJob opens the dashboard on a real running weir job
// (two unbounded sources, a union, a keyed count, a discarding sink;
// checkpoints every 200ms), sees a checkpoint complete, clicks "Trigger
// checkpoint" and sees the new checkpoint appear in the history, opens its
// per-subtask timeline, and takes a savepoint.
func TestBrowserRunningJob(t *testing.T) {
	b := newBrowser(t, 2*time.Minute)
	url, savepoints := serveJobs(t)

	// The jobs overview lists the running job and a finished one.
	b.do(t, "open the dashboard", chromedp.Navigate(url+"/"))
	b.waitFor(t, "the job is listed as running", `document.querySelector('tr[data-job-id="clicks"]')?.textContent.includes("RUNNING")`)
	b.waitFor(t, "the bounded job is listed as finished", `document.querySelector('tr[data-job-id="backfill"]')?.textContent.includes("FINISHED")`)
	b.screenshot(t, "overview")

	// The job graph: four vertices, the union's inputs in one column, and
	// records per second once two polls have been seen.
	b.do(t, "open the job", chromedp.Click(chromedp.CSS(`tr[data-job-id="clicks"] a`)))
	b.waitFor(t, "the graph shows four vertices and three edges",
		`document.querySelectorAll("#job-graph g.vertex").length === 4 && document.querySelectorAll("#job-graph g.edge").length === 3`)
	b.waitFor(t, "records per second show", `[...document.querySelectorAll("#vertices-body tr td:nth-child(7)")].some((td) => td.textContent !== "—" && td.textContent !== "0")`)
	b.waitFor(t, "every operator of the chains shows its records",
		`document.querySelectorAll("#operators-body tr").length >= 5 && [...document.querySelectorAll("#operators-body tr td:nth-child(3)")].some((td) => td.textContent !== "0")`)
	b.screenshot(t, "job-graph")

	// The checkpoint history shows completed periodic checkpoints.
	b.do(t, "open the checkpoints", chromedp.Click(chromedp.CSS(`nav.tabs a[href$="/checkpoints"]`)))
	b.waitFor(t, "a checkpoint completed", `document.querySelector('#history-body tr[data-status="COMPLETED"]') !== null`)
	before := evaluate[int64](t, b, `Math.max(...[...document.querySelectorAll('#history-body tr[data-status="COMPLETED"]')].map((tr) => Number(tr.dataset.checkpointId)))`)

	// Trigger one by hand: the page polls the trigger id, then the new
	// checkpoint is in the history.
	b.do(t, "trigger a checkpoint", chromedp.Click(chromedp.ID("trigger-checkpoint")))
	b.waitFor(t, "the triggered checkpoint completes", `document.getElementById("op-status").dataset.state === "completed"`)
	id := evaluate[int64](t, b, `Number(document.getElementById("op-status").dataset.checkpointId)`)
	if id <= before {
		t.Fatalf("triggered checkpoint %d, not after the completed checkpoint %d seen before", id, before)
	}
	b.waitFor(t, fmt.Sprintf("checkpoint %d is in the history", id),
		fmt.Sprintf(`document.querySelector('#history-body tr[data-checkpoint-id="%d"][data-status="COMPLETED"]') !== null`, id))
	if got := evaluate[string](t, b, `document.getElementById("op-status").textContent`); !strings.Contains(got, fmt.Sprintf("Checkpoint %d completed", id)) {
		t.Errorf("operation status %q", got)
	}

	// The triggered checkpoint's timeline: one row per subtask, every one
	// acknowledged.
	b.do(t, "open the checkpoint", chromedp.Click(chromedp.CSS(`#op-status a`)))
	b.waitFor(t, "the timeline shows six subtasks", `document.querySelectorAll("#checkpoint-timeline g.tl-row").length === 6`)
	if n := evaluate[int](t, b, `document.querySelectorAll("#checkpoint-timeline text.pending").length`); n != 0 {
		t.Errorf("%d subtasks not acknowledged in a completed checkpoint", n)
	}
	b.screenshot(t, "checkpoint-timeline")

	// Back on the history, a savepoint into the job's default directory.
	b.do(t, "back to the checkpoints", chromedp.Click(chromedp.CSS(`nav.tabs a[href$="/checkpoints"]`)))
	// The history page is mounted (its action bar replaced the one of the
	// checkpoint's page) before its button is clicked.
	b.waitFor(t, "the history shows", `document.querySelector('#history-body tr') !== null`)
	b.do(t, "take a savepoint", chromedp.Click(chromedp.ID("trigger-savepoint")))
	b.waitFor(t, "the savepoint completes", `document.getElementById("op-status").dataset.state === "completed" && document.getElementById("op-status").dataset.kind === "savepoint"`)
	if got := evaluate[string](t, b, `document.getElementById("op-status").textContent`); !strings.Contains(got, savepoints) {
		t.Errorf("savepoint status %q does not name the directory %s", got, savepoints)
	}
	b.waitFor(t, "the savepoint is in the history", `document.querySelector('#history-body tr[data-status="COMPLETED"] .badge.savepoint') !== null`)
	b.waitFor(t, "the charts have points", `document.querySelectorAll("#chart-duration circle.point").length >= 3 && document.querySelectorAll("#chart-size rect.bar").length >= 3`)
	b.screenshot(t, "checkpoints")
	b.checkNoPageErrors(t)
}

// serveJobs runs a bounded job to its end, starts an unbounded one, and
// serves both with a REST server; the job and the server end with the
// test. It returns the server's URL and the job's savepoint directory.
func serveJobs(t *testing.T) (url, savepoints string) {
	t.Helper()
	backfill := weir.NewEnvironment(weir.Options{Parallelism: 2})
	backfill.FromSource("history", datagen.Sequence(0, 99_999)).
		Map("user", func(i int64) string { return fmt.Sprint("user-", i%500) }).
		KeyBy(func(u string) string { return u }).
		Process("count", &countPerKey{}).
		SinkTo("discard", discard[int64]{})
	done, err := backfill.ExecuteAsync(context.Background(), "backfill")
	if err != nil {
		t.Fatal(err)
	}
	if err := done.Wait(); err != nil {
		t.Fatal(err)
	}

	savepoints = "file://" + t.TempDir()
	env := weir.NewEnvironment(weir.Options{
		Parallelism: 2,
		Checkpointing: weir.CheckpointOptions{
			Interval: 200 * time.Millisecond, Storage: "file://" + t.TempDir(), SavepointDir: savepoints,
		},
	})
	user := func(i int64) string { return fmt.Sprint("user-", i*7919%500) }
	clicks := env.FromSource("clicks", datagen.Generator(-1, user).WithOptions(datagen.Options{RecordsPerSecond: 4000})).Parallelism(1)
	views := env.FromSource("views", datagen.Generator(-1, user).WithOptions(datagen.Options{RecordsPerSecond: 2000})).Parallelism(1)
	clicks.Union(views).
		Rebalance().
		Filter("valid", func(u string) bool { return u != "" }).
		KeyBy(func(u string) string { return u }).
		Process("count", &countPerKey{}).
		SinkTo("discard", discard[int64]{})

	ctx, cancel := context.WithCancel(context.Background())
	job, err := env.ExecuteAsync(ctx, "clicks")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		job.Wait() // cancelled: its error says so
	})
	srv, err := weir.NewRESTServer(weir.RESTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []*weir.JobClient{done, job} {
		if err := srv.AddJob(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("REST server: %v", err)
		}
	})
	return "http://" + srv.Addr().String(), savepoints
}

// countPerKey counts the records of each key.
type countPerKey struct{ count state.Value[int64] }

func (c *countPerKey) Open(ctx *weir.KeyedContext[string]) (err error) {
	c.count, err = weir.Value[int64](ctx, "count")
	return err
}

func (c *countPerKey) ProcessElement(_ *weir.KeyedContext[string], _ string, out weir.Collector[int64]) error {
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	out.Collect(n + 1)
	return nil
}

// discard is a sink that drops every record.
type discard[T any] struct{}

func (discard[T]) NewWriter(connector.WriterContext) (connector.Writer[T], error) {
	return discard[T]{}, nil
}
func (discard[T]) Write(T) error    { return nil }
func (discard[T]) Flush(bool) error { return nil }
func (discard[T]) Close() error     { return nil }
