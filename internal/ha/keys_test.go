package ha

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestKeysLayout(t *testing.T) {
	k, err := NewKeys("prod-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ got, want string }{
		{k.Root(), "/weir/prod-1/"},
		{k.Election(), "/weir/prod-1/leader/"},
		{k.Member("jm-a"), "/weir/prod-1/jobmanagers/jm-a"},
		{k.Job("j1"), "/weir/prod-1/jobs/j1"},
		{k.Counter("j1"), "/weir/prod-1/checkpoints/j1/counter"},
		{k.Latest("j1"), "/weir/prod-1/checkpoints/j1/latest"},
		{k.JobCheckpoints("j1"), "/weir/prod-1/checkpoints/j1/"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	// One cluster's prefixes never hold another's keys.
	other, _ := NewKeys("prod")
	if strings.HasPrefix(k.Job("x"), other.Root()) || strings.HasPrefix(other.Job("x"), k.Root()) {
		t.Fatal("cluster prefixes overlap")
	}
}

func TestNewKeysRejects(t *testing.T) {
	for _, id := range []string{"", "a/b", "-x", "has space", strings.Repeat("a", 64), "é"} {
		if _, err := NewKeys(id); err == nil || !strings.Contains(err.Error(), "cluster id") {
			t.Errorf("NewKeys(%q) = %v, want an error naming the cluster id", id, err)
		}
	}
	for _, id := range []string{"a", "prod-1", "A.b_c", strings.Repeat("a", 63)} {
		if _, err := NewKeys(id); err != nil {
			t.Errorf("NewKeys(%q) = %v", id, err)
		}
	}
}

func TestCheckpointKey(t *testing.T) {
	k, _ := NewKeys("c")
	for _, c := range []struct {
		key, job, kind string
		ok             bool
	}{
		{"/weir/c/checkpoints/j1/counter", "j1", "counter", true},
		{"/weir/c/checkpoints/j1/latest", "j1", "latest", true},
		{"/weir/c/checkpoints/j:1/latest", "j:1", "latest", true},
		{"/weir/c/checkpoints/j1/other", "", "", false},
		{"/weir/c/checkpoints/latest", "", "", false},
		{"/weir/c/jobs/j1", "", "", false},
		{"/weir/d/checkpoints/j1/latest", "", "", false},
	} {
		job, kind, ok := k.CheckpointKey(c.key)
		if job != c.job || kind != c.kind || ok != c.ok {
			t.Errorf("CheckpointKey(%q) = %q, %q, %v; want %q, %q, %v", c.key, job, kind, ok, c.job, c.kind, c.ok)
		}
	}
}

func TestPlan(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	a := JobRecord{ID: "a", Name: "wordcount", Args: []string{"--parallelism", "2"}, Submitted: t0.Add(time.Second)}
	b := JobRecord{ID: "b", Name: "wordcount", Submitted: t0}
	c := JobRecord{ID: "c", Name: "nexmark", Submitted: t0}
	for _, tc := range []struct {
		name    string
		state   State
		want    []Recovery
		orphans []string
	}{
		{name: "nothing", state: State{}},
		{
			name:  "a job without checkpoints starts as submitted",
			state: State{Jobs: []JobRecord{a}},
			want:  []Recovery{{Job: a, NextID: 1}},
		},
		{
			name: "each job restores its pointer; oldest submission first, then id",
			state: State{
				Jobs:     []JobRecord{a, c, b},
				Pointers: map[string]Pointer{"a": {JobID: "a", Checkpoint: 7, URL: "file:///cp/a/chk-7"}, "c": {JobID: "c", Checkpoint: 2, URL: "file:///cp/c/chk-2"}},
				Counters: map[string]int64{"a": 199, "c": 100},
			},
			want: []Recovery{
				{Job: b, NextID: 1},
				{Job: c, Restore: "file:///cp/c/chk-2", Checkpoint: 2, NextID: 101},
				{Job: a, Restore: "file:///cp/a/chk-7", Checkpoint: 7, NextID: 200},
			},
		},
		{
			name: "a pointer above the counter still moves the next id past it",
			state: State{
				Jobs:     []JobRecord{a},
				Pointers: map[string]Pointer{"a": {JobID: "a", Checkpoint: 250, URL: "s3://b/a/chk-250"}},
				Counters: map[string]int64{"a": 199},
			},
			want: []Recovery{{Job: a, Restore: "s3://b/a/chk-250", Checkpoint: 250, NextID: 251}},
		},
		{
			name: "keys of a job no longer submitted are orphans",
			state: State{
				Jobs:     []JobRecord{a},
				Pointers: map[string]Pointer{"gone": {JobID: "gone", Checkpoint: 3}},
				Counters: map[string]int64{"gone": 99, "gone2": 5, "a": 9},
			},
			want:    []Recovery{{Job: a, NextID: 10}},
			orphans: []string{"gone", "gone2"},
		},
		{
			name:  "a job listed twice is recovered once",
			state: State{Jobs: []JobRecord{a, a}},
			want:  []Recovery{{Job: a, NextID: 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, orphans := Plan(tc.state)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plan = %+v\nwant %+v", got, tc.want)
			}
			if !reflect.DeepEqual(orphans, tc.orphans) {
				t.Errorf("orphans = %v, want %v", orphans, tc.orphans)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{Endpoints: []string{"127.0.0.1:2379"}, ClusterID: "c"}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no endpoints", func(o *Options) { o.Endpoints = nil }, "no etcd endpoints"},
		{"bad endpoint", func(o *Options) { o.Endpoints = []string{"localhost"} }, `"localhost" is not host:port`},
		{"bad scheme", func(o *Options) { o.Endpoints = []string{"ftp://a:1"} }, "scheme must be http or https"},
		{"no cluster id", func(o *Options) { o.ClusterID = "" }, "cluster id"},
		{"fractional ttl", func(o *Options) { o.SessionTTL = 1500 * time.Millisecond }, "whole seconds"},
		{"short ttl", func(o *Options) { o.SessionTTL = -time.Second }, "whole seconds"},
		{"bad name", func(o *Options) { o.Name = "a/b" }, "JobManager name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			o.EnsureDefaults()
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	o := ok
	o.Endpoints = []string{"http://127.0.0.1:2379", "127.0.0.1:22379"}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.SessionTTL != DefaultSessionTTL {
		t.Fatalf("default TTL %v", o.SessionTTL)
	}
}
