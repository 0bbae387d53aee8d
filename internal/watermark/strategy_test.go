package watermark

import (
	"errors"
	"testing"
)

func TestStrategyValidate(t *testing.T) {
	tests := []struct {
		name     string
		strategy Strategy
		wantErr  bool
		idleness int64
	}{
		{"bounded", BoundedOutOfOrderness(5000), false, 0},
		{"bounded, no delay", BoundedOutOfOrderness(0), false, 0},
		{"bounded, largest delay", BoundedOutOfOrderness(MaxWatermark), false, 0},
		{"monotonous with idleness", Monotonous().WithIdleness(60_000), false, 60_000},
		{"no watermarks", NoWatermarks(), false, 0},
		{"custom", ForGenerator(func() Generator { return noWatermarks{} }), false, 0},
		{"zero", Strategy{}, true, 0},
		{"negative delay", BoundedOutOfOrderness(-1), true, 0},
		{"negative delay, then idleness", BoundedOutOfOrderness(-1).WithIdleness(100), true, 100},
		{"zero idleness", Monotonous().WithIdleness(0), true, 0},
		{"negative idleness", Monotonous().WithIdleness(-5), true, -5},
		{"nil factory", ForGenerator(nil), true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.strategy.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidStrategy) {
				t.Errorf("Validate() = %v, does not wrap ErrInvalidStrategy", err)
			}
			if got := tt.strategy.IdleTimeout(); got != tt.idleness {
				t.Errorf("IdleTimeout() = %d, want %d", got, tt.idleness)
			}
			if _, err := NewSplits(tt.strategy); (err != nil) != tt.wantErr {
				t.Errorf("NewSplits() = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}

// TestAddSplitReportsNilGenerator checks that a custom factory returning nil
// is an error of the split, not a panic later on the record path.
func TestAddSplitReportsNilGenerator(t *testing.T) {
	s, err := NewSplits(ForGenerator(func() Generator { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddSplit("a"); !errors.Is(err, ErrInvalidStrategy) {
		t.Fatalf("AddSplit with a nil generator = %v, want ErrInvalidStrategy", err)
	}
	if s.Len() != 0 {
		t.Fatalf("the failed split was added: %v", s.IDs())
	}
}

func TestBoundedOutOfOrdernessGenerator(t *testing.T) {
	tests := []struct {
		name   string
		delay  int64
		events []int64
		want   int64
		emit   bool
	}{
		{"no records", 100, nil, 0, false},
		{"no timestamps", 100, []int64{MinWatermark, MinWatermark}, 0, false},
		{"out of order", 100, []int64{1000, 900, 1200, 1100}, 1099, true},
		{"monotonous", 0, []int64{1, 2, 3}, 2, true},
		{"negative timestamps", 10, []int64{-500}, -511, true},
		{"no wrap at the bottom", 1000, []int64{MinWatermark + 5}, MinWatermark, true},
		{"largest delay", MaxWatermark, []int64{0}, MinWatermark, true},
		{"largest timestamp is not the end", 0, []int64{MaxWatermark}, MaxWatermark - 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := BoundedOutOfOrderness(tt.delay).NewGenerator()
			if err != nil {
				t.Fatal(err)
			}
			for _, ts := range tt.events {
				if _, emit := g.OnEvent(ts); emit {
					t.Fatalf("OnEvent(%d) emitted: bounded out-of-orderness is periodic", ts)
				}
			}
			wm, emit := g.OnPeriodic()
			if emit != tt.emit || (emit && wm != tt.want) {
				t.Fatalf("OnPeriodic() = %s, %v; want %s, %v", FormatWatermark(wm), emit, FormatWatermark(tt.want), tt.emit)
			}
		})
	}
}
