package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestParse: what a file sets, flat or nested, with Flink's spellings.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       string // "key=value" per setting, space-separated
	}{
		{"empty", "", ""},
		{"comments only", "# nothing\n", ""},
		{"flat", "execution.checkpointing.interval: 10s\nparallelism.default: 4\n",
			"execution.checkpointing.interval=10s parallelism.default=4"},
		{"nested", "execution:\n  checkpointing:\n    interval: 1 min\n    mode: AT_LEAST_ONCE\n",
			"execution.checkpointing.interval=1m0s execution.checkpointing.mode=at-least-once"},
		{"mixed", "execution.checkpointing:\n  timeout: 500 ms\nstate.backend:\n  type: rocksdb\n  incremental: TRUE\n",
			"execution.checkpointing.timeout=500ms state.backend.type=pebble state.backend.incremental=true"},
		{"bare number is ms", "execution.checkpointing.min-pause: 250\n", "execution.checkpointing.min-pause=250ms"},
		{"zero interval is off", "execution.checkpointing.interval: 0\n", "execution.checkpointing.interval=0s"},
		{"unlimited failures", "execution.checkpointing.tolerable-failed-checkpoints: -1\n",
			"execution.checkpointing.tolerable-failed-checkpoints=-1"},
		{"hashmap is heap", "state.backend.type: hashmap\n", "state.backend.type=heap"},
		{"paths", "state.checkpoints.dir: file:///var/ckpt\nexecution.checkpointing.savepoint-dir: /tmp/sp\n",
			"state.checkpoints.dir=file:///var/ckpt execution.checkpointing.savepoint-dir=/tmp/sp"},
		{"rest", "rest:\n  address: 127.0.0.2\n  port: 0\n", "rest.address=127.0.0.2 rest.port=0"},
		{"reactive", "scheduler-mode: REACTIVE\njobmanager.adaptive-scheduler:\n  resource-wait-timeout: -1\n  resource-stabilization-timeout: 0\n  min-parallelism-increase: 2\n",
			"scheduler-mode=reactive jobmanager.adaptive-scheduler.resource-wait-timeout=0s jobmanager.adaptive-scheduler.resource-stabilization-timeout=0s jobmanager.adaptive-scheduler.min-parallelism-increase=2"},
		{"wait timeout", "jobmanager.adaptive-scheduler.resource-wait-timeout: 5 min\n", "jobmanager.adaptive-scheduler.resource-wait-timeout=5m0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("weir.yaml", []byte(c.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, s := range f.Settings {
				got = append(got, s.Key.Name+"="+s.Value)
			}
			if g := strings.Join(got, " "); g != c.want {
				t.Errorf("got  %s\nwant %s", g, c.want)
			}
		})
	}
}

// TestParseErrors: each bad file is one line naming the key, its line and
// what to write instead.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"unknown key", "parallelism.default: 2\nexecution.checkpointing.intervall: 1s\n",
			[]string{"weir.yaml:2:", `unknown key "execution.checkpointing.intervall"`, `did you mean "execution.checkpointing.interval"?`}},
		{"unknown nested key", "execution:\n  checkpointing:\n    max-concurrent: 2\n",
			[]string{"weir.yaml:3:", `"execution.checkpointing.max-concurrent"`, `"execution.checkpointing.max-concurrent-checkpoints"`}},
		{"last part only", "interval: 1s\n", []string{`unknown key "interval"`, `"execution.checkpointing.interval"`}},
		{"flink key weir lacks", "state.backend.rocksdb.memory.managed: true\n", []string{`unknown key "state.backend.rocksdb.memory.managed"`, "did you mean"}},
		{"bad duration", "execution.checkpointing.interval: soon\n",
			[]string{"weir.yaml:1:", `execution.checkpointing.interval is "soon"`, "at least 1ms"}},
		{"negative duration", "execution.checkpointing.timeout: -1s\n", []string{"execution.checkpointing.timeout", "at least 1ms"}},
		{"too short interval", "execution.checkpointing.interval: 10us\n", []string{"execution.checkpointing.interval", "0 (no periodic checkpoints)"}},
		{"zero timeout", "execution.checkpointing.timeout: 0\n", []string{"execution.checkpointing.timeout", "at least 1ms"}},
		{"unknown unit", "execution.checkpointing.timeout: 3 fortnights\n", []string{"execution.checkpointing.timeout"}},
		{"parallelism range", "parallelism.default: 0\n", []string{`parallelism.default is "0"`, "from 1 to 128"}},
		{"parallelism too high", "parallelism.default: 129\n", []string{"from 1 to 128"}},
		{"not an int", "execution.checkpointing.max-concurrent-checkpoints: two\n", []string{"max-concurrent-checkpoints", "at least 1"}},
		{"tolerable below -1", "execution.checkpointing.tolerable-failed-checkpoints: -2\n", []string{"-1 for unlimited"}},
		{"bad mode", "execution.checkpointing.mode: twice\n", []string{`execution.checkpointing.mode is "twice"`, "EXACTLY_ONCE or AT_LEAST_ONCE"}},
		{"bad backend", "state.backend.type: forst\n", []string{"state.backend.type", "heap or pebble"}},
		{"bad bool", "state.backend.incremental: yes please\n", []string{"state.backend.incremental", "true or false"}},
		{"bad port", "rest.port: 70000\n", []string{"rest.port", "65535"}},
		{"empty value", "state.checkpoints.dir:\n", []string{"state.checkpoints.dir has no single value"}},
		{"list value", "parallelism.default: [1, 2]\n", []string{"parallelism.default has no single value"}},
		{"twice", "parallelism.default: 2\nparallelism:\n  default: 3\n", []string{"weir.yaml:3:", "set twice (first on line 1)"}},
		{"not a mapping", "- parallelism.default: 2\n", []string{"must be a mapping"}},
		{"not yaml", "parallelism.default: [\n", []string{"weir.yaml: not valid YAML"}},
		{"scheduler mode", "scheduler-mode: adaptive\n", []string{`scheduler-mode is "adaptive"`, "reactive"}},
		{"zero wait timeout", "jobmanager.adaptive-scheduler.resource-wait-timeout: 0\n", []string{"resource-wait-timeout", "-1 (wait for ever"}},
		{"negative stabilization", "jobmanager.adaptive-scheduler.resource-stabilization-timeout: -1\n", []string{"resource-stabilization-timeout", "0 or a positive duration"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("weir.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatalf("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "weir.yaml")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "--config "+p+": no such file") {
		t.Errorf("Load of a missing file: %v", err)
	}
	if err := os.WriteFile(p, []byte("parallelism.default: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(p)
	if err != nil || len(f.Settings) != 1 || f.Path != p {
		t.Errorf("Load: %+v, %v", f, err)
	}
}

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"1m30s", 90 * time.Second}, {"10 s", 10 * time.Second}, {"10s", 10 * time.Second},
		{"500", 500 * time.Millisecond}, {"500 ms", 500 * time.Millisecond}, {"2 min", 2 * time.Minute},
		{"1 h", time.Hour}, {"3 d", 72 * time.Hour}, {"2 Minutes", 2 * time.Minute}, {"0", 0},
	} {
		got, err := ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "soon", "-1s", "1 fortnight", "99999999999999999 d", "1.5 s"} {
		if d, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) = %v; want an error", bad, d)
		}
	}
}

// flags is a flag set like weir run wordcount's.
func flags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("wordcount", pflag.ContinueOnError)
	fs.Int("parallelism", 2, "")
	fs.Duration("checkpoint-interval", 0, "")
	fs.String("checkpointing-mode", "exactly-once", "")
	fs.Bool("incremental", false, "")
	fs.String("rest-address", "127.0.0.1:8081", "")
	return fs
}

// TestApply: the file sets what the command line did not; flags win.
func TestApply(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		args       []string
		want       map[string]string
	}{
		{"file only", "parallelism.default: 4\nexecution.checkpointing.interval: 2 s\nstate.backend.incremental: true\n", nil,
			map[string]string{"parallelism": "4", "checkpoint-interval": "2s", "incremental": "true", "rest-address": "127.0.0.1:8081"}},
		{"flag wins", "parallelism.default: 4\nexecution.checkpointing.mode: AT_LEAST_ONCE\n", []string{"--parallelism=3"},
			map[string]string{"parallelism": "3", "checkpointing-mode": "at-least-once"}},
		{"port alone", "rest.port: 0\n", nil, map[string]string{"rest-address": "127.0.0.1:0"}},
		{"address alone", "rest.address: ::1\n", nil, map[string]string{"rest-address": "[::1]:8081"}},
		{"both", "rest:\n  port: 9000\n  address: localhost\n", nil, map[string]string{"rest-address": "localhost:9000"}},
		{"rest flag wins", "rest.port: 9000\n", []string{"--rest-address=off"}, map[string]string{"rest-address": "off"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := flags()
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			f, err := Parse("weir.yaml", []byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Apply(fs, "weir run wordcount"); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			for name, want := range c.want {
				if got := fs.Lookup(name).Value.String(); got != want {
					t.Errorf("--%s = %q; want %q", name, got, want)
				}
			}
		})
	}
}

// TestApplyMissingFlag: a key the command has no flag for is refused.
func TestApplyMissingFlag(t *testing.T) {
	f, err := Parse("weir.yaml", []byte("parallelism.default: 2\nexecution.checkpointing.savepoint-dir: /tmp/sp\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = f.Apply(flags(), "weir run wordcount")
	if err == nil || !strings.Contains(err.Error(), "weir.yaml:2: execution.checkpointing.savepoint-dir does not apply to weir run wordcount: it has no --savepoint-dir") {
		t.Errorf("Apply: %v", err)
	}
}

// TestKeysTable keeps the table consistent as it grows.
func TestKeysTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys {
		switch {
		case seen[k.Name]:
			t.Errorf("%s: listed twice", k.Name)
		case k.Name == "" || k.Flag == "" || strings.HasPrefix(k.Flag, "-"):
			t.Errorf("%+v: needs a name and a flag (without dashes)", k)
		case k.Accepts == "":
			t.Errorf("%s: no Accepts text for its errors", k.Name)
		case k.Kind == Enum && len(k.Values) == 0:
			t.Errorf("%s: an Enum without Values", k.Name)
		case k.Max != 0 && k.Max < k.Min:
			t.Errorf("%s: Max %d < Min %d", k.Name, k.Max, k.Min)
		}
		for alias, v := range k.Aliases {
			if alias != strings.ReplaceAll(strings.ToLower(alias), "_", "-") {
				t.Errorf("%s: alias %q is not lower case with '-'", k.Name, alias)
			}
			if !strings.Contains(strings.Join(k.Values, " "), v) {
				t.Errorf("%s: alias %q maps to %q, not one of %v", k.Name, alias, v, k.Values)
			}
		}
		seen[k.Name] = true
	}
}

// TestREADMEExample: the configuration file of the README loads.
func TestREADMEExample(t *testing.T) {
	md, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(md), "```yaml\n")
	if len(blocks) < 2 {
		t.Fatal("README.md has no yaml block")
	}
	for _, b := range blocks[1:] {
		text, _, _ := strings.Cut(b, "```")
		f, err := Parse("README.md", []byte(text))
		if err != nil {
			t.Errorf("the README's configuration: %v", err)
			continue
		}
		if len(f.Settings) < 5 {
			t.Errorf("the README's configuration has %d settings", len(f.Settings))
		}
	}
}

// TestApplyShared: a file shared by the cluster's roles sets each role's
// flags (jobmanager.rpc.address is the JobManager's --rpc-address and the
// TaskManager's --jobmanager) and skips the other role's keys, but not
// keys of no role.
func TestApplyShared(t *testing.T) {
	f, err := Parse("weir.yaml", []byte("jobmanager.rpc.address: jm\njobmanager.rpc.port: 7000\ntaskmanager.numberOfTaskSlots: 3\nheartbeat.timeout: 9 s\n"))
	if err != nil {
		t.Fatal(err)
	}
	jm := pflag.NewFlagSet("jm", pflag.ContinueOnError)
	rpc := jm.String("rpc-address", "127.0.0.1:6123", "")
	timeout := jm.Duration("heartbeat-timeout", 0, "")
	if err := f.ApplyShared(jm, "weir jobmanager"); err != nil {
		t.Fatal(err)
	}
	tm := pflag.NewFlagSet("tm", pflag.ContinueOnError)
	jmAddr := tm.String("jobmanager", "127.0.0.1:6123", "")
	slots := tm.Int("slots", 1, "")
	if err := f.ApplyShared(tm, "weir taskmanager"); err != nil {
		t.Fatal(err)
	}
	if *rpc != "jm:7000" || *timeout != 9*time.Second || *jmAddr != "jm:7000" || *slots != 3 {
		t.Errorf("rpc %q timeout %v jobmanager %q slots %d", *rpc, *timeout, *jmAddr, *slots)
	}
	// Apply (not shared) still refuses a key the command lacks.
	if err := f.Apply(tm, "weir taskmanager"); err == nil || !strings.Contains(err.Error(), "heartbeat.timeout does not apply to weir taskmanager") {
		t.Errorf("Apply: %v", err)
	}
	g, _ := Parse("weir.yaml", []byte("execution.checkpointing.interval: 1 s\n"))
	if err := g.ApplyShared(tm, "weir taskmanager"); err == nil || !strings.Contains(err.Error(), "does not apply") {
		t.Errorf("ApplyShared of a job key: %v", err)
	}
}
