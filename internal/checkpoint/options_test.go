package checkpoint

import (
	"errors"
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string // substring; empty for valid
	}{
		{"zero value after defaults", Options{}, ""},
		{"everything set", Options{Interval: 1, MinPause: 1, MaxConcurrent: 5, Timeout: 1, TolerableFailures: 9, Retained: 3, EveryNRecords: 1}, ""},
		{"negative interval", Options{Interval: -1}, "Interval is -1, want >= 0"},
		{"negative min pause", Options{MinPause: -1}, "MinPause is -1, want >= 0"},
		{"negative max concurrent", Options{MaxConcurrent: -1}, "MaxConcurrent is -1, want >= 1"},
		{"negative timeout", Options{Timeout: -1}, "Timeout is -1, want >= 1"},
		{"negative tolerable failures", Options{TolerableFailures: -1}, "TolerableFailures is -1, want >= 0"},
		{"negative retained", Options{Retained: -1}, "Retained is -1, want >= 1"},
		{"negative every n records", Options{EveryNRecords: -1}, "EveryNRecords is -1, want >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.EnsureDefaults().Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			case tt.wantErr != "" && !errors.Is(err, ErrInvalidOptions):
				t.Fatalf("Validate() = %v, does not wrap ErrInvalidOptions", err)
			}
		})
	}
}

func TestEnsureDefaults(t *testing.T) {
	got := *(&Options{}).EnsureDefaults()
	want := Options{MaxConcurrent: 1, Timeout: DefaultTimeout, Retained: 1}
	if got != want {
		t.Fatalf("EnsureDefaults() = %+v, want %+v", got, want)
	}
}

func TestNewCoordinatorRejectsBadRecovery(t *testing.T) {
	tests := []struct {
		name      string
		recovered []CompletedCheckpoint
	}{
		{"zero id", []CompletedCheckpoint{{ID: 0}}},
		{"duplicate id", []CompletedCheckpoint{{ID: 3}, {ID: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewCoordinator(Options{}, 0, tt.recovered); err == nil {
				t.Fatal("NewCoordinator accepted a bad recovered list")
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	c, err := NewCoordinator(Options{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(0, []TaskID{"a"}, 0); err != nil {
		t.Fatal(err)
	}
	c.TriggerManual(0, Request{Kind: Kind(7)})
	ds := c.Decisions()
	if len(ds) != 1 {
		t.Fatalf("got %v, want one RequestDone", ds)
	}
	if d, ok := ds[0].(RequestDone); !ok || !errors.Is(d.Err, ErrInvalidRequest) {
		t.Fatalf("got %v, want RequestDone wrapping ErrInvalidRequest", ds[0])
	}

	// Queue requests until the queue is full: the next one is refused.
	for range maxQueuedRequests + 1 {
		c.TriggerManual(0, Request{})
	}
	c.Decisions()
	c.TriggerManual(0, Request{})
	ds = c.Decisions()
	if d, ok := ds[0].(RequestDone); len(ds) != 1 || !ok || !errors.Is(d.Err, ErrTooManyRequests) {
		t.Fatalf("got %v, want RequestDone wrapping ErrTooManyRequests", ds)
	}

	// The abort error names the checkpoint and reason for the user.
	e := &AbortError{ID: 4, Kind: KindSavepoint, Reason: AbortExpired}
	if got, want := e.Error(), "savepoint 4 aborted: expired"; got != want {
		t.Fatalf("AbortError = %q, want %q", got, want)
	}
}
