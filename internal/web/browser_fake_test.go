package web_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// TestBrowserFakeJob drives the dashboard over the in-memory JobManager
// behind a token: the page asks for the token, then shows the job, takes a
// savepoint into the directory typed in, and cancels the job after the
// confirmation.
func TestBrowserFakeJob(t *testing.T) {
	b := newBrowser(t, 90*time.Second)
	jm := resttest.NewJobManager()
	job := jm.Add(resttest.NewJob("wordcount", "WordCount"))
	if _, err := job.TriggerCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := rest.New(jm, rest.Options{Token: "s3cret", RefreshInterval: 200 * time.Millisecond, SavepointAllowedRoots: []string{"/tmp/mine"}})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, srv)

	// Without the token the page says what to do; with it, the jobs show.
	b.do(t, "open the dashboard", chromedp.Navigate(url+"/"))
	b.waitFor(t, "the page asks for a token", `document.getElementById("banner").textContent.includes("needs a bearer token")`)
	b.do(t, "enter the token", chromedp.SendKeys(chromedp.ID("token"), "s3cret"), chromedp.Click(chromedp.CSS(`#token-form button`)))
	b.waitFor(t, "the job is listed", `document.querySelector('tr[data-job-id="wordcount"]')?.textContent.includes("RUNNING")`)
	b.waitFor(t, "the banner is gone", `document.getElementById("banner").hidden`)
	if got := evaluate[string](t, b, `sessionStorage.getItem("weir.token")`); got != "s3cret" {
		t.Errorf("token in sessionStorage: %q", got)
	}
	t.Run("pure functions", func(t *testing.T) { testPureFunctions(t, b) })

	// The job graph: two vertices and their edge.
	b.do(t, "open the job", chromedp.Click(chromedp.CSS(`tr[data-job-id="wordcount"] a`)))
	b.waitFor(t, "the graph shows", `document.querySelectorAll("#job-graph g.vertex").length === 2 && document.querySelectorAll("#job-graph g.edge").length === 1`)
	b.waitFor(t, "the source is backpressured (low)", `document.querySelector('#job-graph g.vertex[data-vertex-id="1"]').classList.contains("bp-low")`)

	// Refreshes asked for in a burst run one at a time (the poll loop
	// does not multiply).
	evaluate[bool](t, b, `(() => {
		const page = app.page, refresh = page.refresh;
		Object.assign(window, { inFlight: 0, maxInFlight: 0, refreshed: 0 });
		page.refresh = async (gen, ...rest) => {
			maxInFlight = Math.max(maxInFlight, ++inFlight);
			try { return await refresh.call(page, gen, ...rest); } finally { inFlight--; refreshed++; }
		};
		for (let i = 0; i < 10; i++) refreshNow();
		return true;
	})()`)
	b.waitFor(t, "three refreshes ran", `refreshed >= 3`)
	if n := evaluate[int](t, b, `maxInFlight`); n != 1 {
		t.Errorf("%d refreshes ran at once", n)
	}

	// A savepoint into the directory typed in.
	b.do(t, "take a savepoint", chromedp.SendKeys(chromedp.ID("savepoint-dir"), "file:///tmp/mine"), chromedp.Click(chromedp.ID("trigger-savepoint")))
	b.waitFor(t, "the savepoint completes", `document.getElementById("op-status").dataset.state === "completed"`)
	if got := evaluate[string](t, b, `document.getElementById("op-status").textContent`); !contains(got, "Savepoint", "completed", "file:///tmp/mine/savepoint-") {
		t.Errorf("operation status %q", got)
	}

	// The checkpoint's timeline: four subtasks in two vertices.
	b.do(t, "open the checkpoints", chromedp.Navigate(url+"/#/jobs/wordcount/checkpoints"))
	b.waitFor(t, "checkpoint 1 is listed", `document.querySelector('#history-body tr[data-checkpoint-id="1"][data-status="COMPLETED"]') !== null`)

	// A checkpoint that fails says why, and shows in red on the chart.
	job.FailOperations(errors.New("checkpoint storage unavailable"))
	b.do(t, "trigger a checkpoint", chromedp.Click(chromedp.ID("trigger-checkpoint")))
	b.waitFor(t, "the checkpoint fails", `document.getElementById("op-status").dataset.state === "failed"`)
	if got := evaluate[string](t, b, `document.getElementById("op-status").textContent`); !contains(got, "Checkpoint failed", "checkpoint storage unavailable") {
		t.Errorf("operation status %q", got)
	}
	b.waitFor(t, "the failure is in the history and on the chart",
		`document.querySelector('#history-body tr[data-status="FAILED"]') !== null && document.querySelector("#chart-duration circle.point.failed") !== null`)
	job.FailOperations(nil)
	b.do(t, "open checkpoint 1", chromedp.Click(chromedp.CSS(`#history-body tr[data-checkpoint-id="1"] a`)))
	b.waitFor(t, "the timeline shows", `document.querySelectorAll("#checkpoint-timeline g.tl-row").length === 4`)
	if n := evaluate[int](t, b, `document.querySelectorAll("#checkpoint-timeline .ph-async").length`); n != 4 {
		t.Errorf("%d async bars, want 4", n)
	}
	if got := evaluate[string](t, b, `document.getElementById("timeline-note").textContent`); !contains(got, "last subtask acknowledged 7 ms after the trigger", "completed after") {
		t.Errorf("timeline note %q", got)
	}

	// A failure shows on the exceptions tab.
	job.AddException(rest.ExceptionInfo{Time: time.Now(), Name: "*errors.errorString", Message: "sink failed: disk full\nat line 2", Task: "count -> Sink: out (1/2)"})
	b.do(t, "open the exceptions", chromedp.Navigate(url+"/#/jobs/wordcount/exceptions"))
	b.waitFor(t, "the failure is listed", `document.querySelector("#exceptions tbody tr")?.textContent.includes("sink failed: disk full")`)

	// Cancel: nothing happens until confirmed.
	b.do(t, "back to the job", chromedp.Navigate(url+"/#/jobs/wordcount"))
	b.waitFor(t, "the job page shows", `document.querySelectorAll("#job-graph g.vertex").length === 2`)
	b.do(t, "ask to cancel", chromedp.Click(chromedp.ID("cancel-job")))
	b.waitFor(t, "the confirmation opens", `document.getElementById("confirm").open`)
	b.do(t, "keep it running", chromedp.Click(chromedp.ID("confirm-keep")))
	b.waitFor(t, "the confirmation closes", `!document.getElementById("confirm").open`)
	if n := job.Cancels(); n != 0 {
		t.Fatalf("cancelled %d times without confirmation", n)
	}
	b.do(t, "cancel", chromedp.Click(chromedp.ID("cancel-job")))
	b.waitFor(t, "the confirmation opens", `document.getElementById("confirm").open`)
	b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-cancel")))
	b.waitFor(t, "the job shows CANCELED", `document.getElementById("job-status").textContent === "CANCELED"`)
	if n := job.Cancels(); n != 1 {
		t.Errorf("cancelled %d times", n)
	}
	b.waitFor(t, "the buttons are disabled", `document.getElementById("trigger-checkpoint").disabled && document.getElementById("cancel-job").disabled`)
	b.checkNoPageErrors(t)
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// testPureFunctions runs the page's pure functions (layout, ticks, phases,
// formatting) in the browser, table-driven.
func testPureFunctions(t *testing.T, b *browser) {
	tests := []struct{ name, expr, want string }{
		{"chain", `layoutGraph([{id:"a"},{id:"b",inputs:[{id:"a"}]},{id:"c",inputs:[{id:"b"}]}])`, `[["a"],["b"],["c"]]`},
		{"fan-in", `layoutGraph([{id:"a"},{id:"b"},{id:"c",inputs:[{id:"a"},{id:"b"}]}])`, `[["a","b"],["c"]]`},
		{"diamond", `layoutGraph([{id:"a"},{id:"b",inputs:[{id:"a"}]},{id:"c",inputs:[{id:"a"}]},{id:"d",inputs:[{id:"b"},{id:"c"}]}])`, `[["a"],["b","c"],["d"]]`},
		{"longest path decides", `layoutGraph([{id:"a"},{id:"b",inputs:[{id:"a"}]},{id:"c",inputs:[{id:"a"},{id:"b"}]}])`, `[["a"],["b"],["c"]]`},
		{"inputs listed later", `layoutGraph([{id:"c",inputs:[{id:"b"}]},{id:"b",inputs:[{id:"a"}]},{id:"a"}])`, `[["a"],["b"],["c"]]`},
		{"unknown input", `layoutGraph([{id:"a",inputs:[{id:"x"}]}])`, `[["a"]]`},
		{"cycle", `layoutGraph([{id:"a",inputs:[{id:"b"}]},{id:"b",inputs:[{id:"a"}]}])`, `[["b"],["a"]]`},
		{"empty", `layoutGraph([])`, `[]`},
		{"ticks", `niceTicks(95, 4)`, `[0,25,50,75,100]`},
		{"ticks of nothing", `niceTicks(0, 4)`, `[0,1]`},
		{"fractional ticks", `niceTicks(1, 6)`, `[0,0.2,0.4,0.6,0.8,1]`},
		{"byte ticks", `byteTicks(10000, 4)`, `[0,4096,8192,12288]`},
		{"phases", `phases({start_delay:1,alignment:{duration:2},checkpoint:{sync:3,async:4},end_to_end_duration:15}).map((p)=>[p.kind,p.start,p.len])`,
			`[["delay",0,1],["align",1,2],["sync",3,3],["async",6,4],["wait",10,5]]`},
		{"phases past the acknowledgement", `phases({start_delay:0,alignment:{duration:0},checkpoint:{sync:1,async:1},end_to_end_duration:1}).map((p)=>p.len)`, `[0,0,1,1,0]`},
		{"durations", `[0,999,1500,61000,7260000,90000000,-1].map(fmtDuration)`, `["0 ms","999 ms","1.50 s","1m 01s","2h 01m","1d 01h","—"]`},
		{"sizes", `[0,1023,1536,10*1048576,-1].map(fmtBytes)`, `["0 B","1023 B","1.50 KiB","10.0 MiB","—"]`},
		{"bytes cells", `[bytesCell(2048, true), bytesCell(0, false)].map((c)=>[c.textContent, c.title])`,
			`[["2.00 KiB",""],["–","not counted: records are exchanged in memory, unserialized"]]`},
		{"fill keeps equal nodes", `(() => { const d = el("div"); fill(d, el("p", {text: "a", class: "x"}), "t"); const p = d.firstChild;
			fill(d, el("p", {text: "b"}), "t"); return [p === d.firstChild, d.innerHTML]; })()`, `[true,"<p>b</p>t"]`},
		{"fill replaces other elements", `(() => { const d = el("div"); fill(d, el("p", {}, "a"), el("i")); const p = d.firstChild;
			fill(d, el("span", {}, "c")); return [p === d.firstChild, d.innerHTML]; })()`, `[false,"<span>c</span>"]`},
		{"fill keeps an open details", `(() => { const d = el("div"); fill(d, el("details", {}, "x")); d.firstChild.open = true;
			fill(d, el("details", {}, "y")); return [d.firstChild.open, d.innerHTML]; })()`, `[true,"<details open=\"\">y</details>"]`},
		{"rates", `[0,2.5,950,12345,4560000,undefined].map(fmtRate)`, `["0","2.5","950","12.3k","4.56M","—"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluate[string](t, b, "JSON.stringify("+tt.expr+")"); got != tt.want {
				t.Errorf("%s = %s, want %s", tt.expr, got, tt.want)
			}
		})
	}
}
