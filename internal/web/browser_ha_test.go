package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/rest/resttest"
)

// haJobManager is the in-memory JobManager of a cluster with high
// availability: GET /overview names the leader and the standbys.
type haJobManager struct {
	*resttest.JobManager
	info rest.HighAvailabilityInfo
}

func (h haJobManager) HighAvailability() rest.HighAvailabilityInfo { return h.info }

// TestBrowserHighAvailability: the overview shows the leading JobManager and
// the standbys when the JobManager runs with high availability, and no such
// panel without it.
func TestBrowserHighAvailability(t *testing.T) {
	b := newBrowser(t, 60*time.Second)
	since := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC).UnixMilli()
	jm := haJobManager{JobManager: resttest.NewJobManager(), info: rest.HighAvailabilityInfo{
		Type: "etcd", ClusterID: "prod", LeaderRevision: 42, FencedWrites: 1,
		Leader:   rest.JobManagerInfo{Name: "jm-a", RPCAddress: "127.0.0.1:6123", RESTURL: "http://127.0.0.1:8081", Since: since},
		Standbys: []rest.JobManagerInfo{{Name: "jm-b", RPCAddress: "127.0.0.1:6124", RESTURL: "http://127.0.0.1:8082", Since: since}},
	}}
	srv, err := rest.New(jm, rest.Options{RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, srv)
	b.do(t, "open the dashboard", chromedp.Navigate(url+"/"))
	b.waitFor(t, "the leader is shown", `document.querySelector('#jobmanagers-body tr[data-role="leader"][data-name="jm-a"]')?.textContent.includes("127.0.0.1:6123")`)
	b.waitFor(t, "the standby is shown", `document.querySelector('#jobmanagers-body tr[data-role="standby"][data-name="jm-b"]')?.textContent.includes("http://127.0.0.1:8082")`)
	if got := evaluate[string](t, b, `document.getElementById("ha-summary").textContent`); !contains(got, "etcd", "cluster prod", "revision 42", "1 fenced writes") {
		t.Errorf("summary %q", got)
	}
	if evaluate[bool](t, b, `document.getElementById("jobmanagers").hidden`) {
		t.Error("the JobManagers panel is hidden")
	}

	// Without high availability the panel stays hidden.
	plain, err := rest.New(resttest.NewJobManager(), rest.Options{RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	url2 := serve(t, plain)
	b.do(t, "open a dashboard without HA", chromedp.Navigate(url2+"/"))
	b.waitFor(t, "the overview is filled", `document.getElementById("cluster")?.children.length > 0`)
	if !evaluate[bool](t, b, `document.getElementById("jobmanagers").hidden`) {
		t.Error("the JobManagers panel shows without high availability")
	}
	b.checkNoPageErrors(t)
}
