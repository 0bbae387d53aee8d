package web_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// countingServer is a REST server whose handler counts the requests for
// GET /jobs/overview (the jobs page polls it once per refresh).
type countingServer struct {
	*rest.Server
	polls atomic.Int64
}

func (c *countingServer) handler() http.Handler {
	h := c.Server.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jobs/overview" {
			c.polls.Add(1)
		}
		h.ServeHTTP(w, r)
	})
}

// TestBrowserRefreshInterval: the refresh-interval selector changes how
// often the page polls the server, and the choice survives a reload (it is
// kept in localStorage). The server's interval (GET /config) is the
// default until a choice is made.
func TestBrowserRefreshInterval(t *testing.T) {
	b := newBrowser(t, 90*time.Second)
	jm := resttest.NewJobManager()
	jm.Add(resttest.NewJob("wordcount", "WordCount"))
	srv, err := rest.New(jm, rest.Options{RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cs := &countingServer{Server: srv}
	url := serveHandler(t, cs.handler())

	// pollsWithin waits up to d for at least n more polls and returns how
	// many came.
	pollsWithin := func(d time.Duration, n int64) int64 {
		start := cs.polls.Load()
		deadline := time.Now().Add(d)
		for cs.polls.Load()-start < n && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		return cs.polls.Load() - start
	}

	b.do(t, "open the dashboard", chromedp.Navigate(url+"/"))
	b.waitFor(t, "the job is listed", `document.querySelector('tr[data-job-id="wordcount"]') !== null`)
	if got := evaluate[string](t, b, `document.getElementById("refresh-interval").value`); got != "" {
		t.Errorf("selector shows %q before any choice, want the server's default entry", got)
	}
	if got := evaluate[string](t, b, `document.querySelector("#refresh-interval option[data-server]")?.textContent ?? ""`); got != "200 ms (server)" {
		t.Errorf("server entry %q, want \"200 ms (server)\"", got)
	}
	if n := pollsWithin(10*time.Second, 5); n < 5 {
		t.Fatalf("%d polls in 10s at the server's 200 ms, want 5 or more", n)
	}

	// Off: one refresh at the change, then none.
	b.do(t, "turn refreshing off", chromedp.SetValue(chromedp.ID("refresh-interval"), "0"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("refresh-interval").dispatchEvent(new Event("change"))`))
	b.waitFor(t, "the choice is stored", `localStorage.getItem("weir.refresh") === "0" && !app.refreshing && app.refreshMs === 0`)
	if n := pollsWithin(1500*time.Millisecond, 1); n != 0 {
		t.Errorf("%d polls in 1.5s with refreshing off, want none", n)
	}

	// 1 s: polls come back, about one a second.
	b.do(t, "choose 1 s", chromedp.SetValue(chromedp.ID("refresh-interval"), "1000"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("refresh-interval").dispatchEvent(new Event("change"))`))
	if n := pollsWithin(10*time.Second, 3); n < 3 {
		t.Fatalf("%d polls in 10s at 1 s, want 3 or more", n)
	}

	// The choice survives a reload; 10 s then polls once at the load and
	// not again within a second and a half.
	b.do(t, "choose 10 s", chromedp.SetValue(chromedp.ID("refresh-interval"), "10000"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("refresh-interval").dispatchEvent(new Event("change"))`))
	b.waitFor(t, "the choice is stored", `localStorage.getItem("weir.refresh") === "10000"`)
	b.do(t, "reload", chromedp.Reload())
	b.waitFor(t, "the job is listed again", `document.querySelector('tr[data-job-id="wordcount"]') !== null && !app.refreshing`)
	if got := evaluate[string](t, b, `document.getElementById("refresh-interval").value`); got != "10000" {
		t.Errorf("after a reload the selector shows %q, want 10000", got)
	}
	if n := pollsWithin(1500*time.Millisecond, 1); n != 0 {
		t.Errorf("%d polls in 1.5s at 10 s, want none", n)
	}
	b.checkNoPageErrors(t)
}

// serveHandler serves h on a random loopback port until the test ends.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
