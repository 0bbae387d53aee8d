package promexport

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var metricName = regexp.MustCompile(`\bweir_[A-Za-z0-9_]+`)

func exportedNames() []string {
	var names []string
	for _, d := range allDescs {
		// Desc has no accessor for its name; its String() holds fqName: "...".
		s := d.String()
		i := strings.Index(s, `fqName: "`) + len(`fqName: "`)
		names = append(names, s[i:i+strings.IndexByte(s[i:], '"')])
	}
	return names
}

// TestGrafanaDashboardQueriesExportedMetrics parses the checked-in
// dashboard and checks that every weir metric it queries is one the
// exporter produces, and that it has the panels it promises.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/grafana/weir-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("deploy/grafana/weir-dashboard.json is not valid JSON: %v", err)
	}
	exported := exportedNames()
	if len(exported) != len(allDescs) || slices.Contains(exported, "") {
		t.Fatalf("cannot read the exported metric names: %v", exported)
	}
	var queries []string
	for _, v := range d.Templating.List {
		queries = append(queries, v.Definition)
	}
	used := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			if metricName.FindString(tg.Expr) == "" {
				t.Errorf("panel %q: query %q uses no weir metric", p.Title, tg.Expr)
			}
			queries = append(queries, tg.Expr)
		}
	}
	for _, q := range queries {
		for _, name := range metricName.FindAllString(q, -1) {
			used[name] = true
			if !slices.Contains(exported, name) {
				t.Errorf("the dashboard queries %s, which weir does not export (query %q)", name, q)
			}
		}
	}
	for _, want := range []string{
		"weir_jobmanager_job_lastCheckpointDuration", "weir_jobmanager_job_lastCheckpointSize",
		"weir_jobmanager_job_numberOfCompletedCheckpoints", "weir_jobmanager_job_numberOfFailedCheckpoints",
		"weir_taskmanager_job_task_operator_numRecordsIn", "weir_taskmanager_job_task_operator_numRecordsOut",
		"weir_taskmanager_job_task_backPressuredTimeMsPerSecond", "weir_taskmanager_job_task_watermarkLag",
	} {
		if !used[want] {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}
}
