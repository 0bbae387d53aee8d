package timerqueue

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/codec"
)

// TestTimerQueue runs scripts of queue operations: "+k/ns@ts" adds, "-k/ns@ts"
// removes, "pop T" pops every timer due at T. The result lists what each
// step returned.
func TestTimerQueue(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{"empty", "pop 100", "pop100[]"},
		{"timestamp order", "+a/x@30 +b/x@10 +c/x@20 pop 100", "+ + + pop100[b@10 c@20 a@30]"},
		{"only due", "+a/x@30 +b/x@10 pop 20 pop 30", "+ + pop20[b@10] pop30[a@30]"},
		{"one per key, ns and timestamp", "+a/x@10 +a/x@10 +a/y@10 +b/x@10 pop 10", "+ dup + + pop10[a@10 a@10 b@10]"},
		{"registration order breaks ties", "+c/x@5 +a/x@5 +b/x@5 pop 5", "+ + + pop5[c@5 a@5 b@5]"},
		{"remove", "+a/x@10 +b/x@20 +c/x@30 -b/x@20 -b/x@20 -a/y@10 pop 100", "+ + + - absent absent pop100[a@10 c@30]"},
		{"remove head", "+a/x@10 +b/x@20 -a/x@10 pop 15 pop 20", "+ + - pop15[] pop20[b@20]"},
		{"re-add after pop", "+a/x@10 pop 10 +a/x@10 pop 10", "+ pop10[a@10] + pop10[a@10]"},
		{"negative and extreme timestamps", "+a/x@9223372036854775807 +b/x@-5 pop 0 pop 9223372036854775807", "+ + pop0[b@-5] pop9223372036854775807[a@9223372036854775807]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := New[string, string]()
			var got []string
			fields := strings.Fields(tt.script)
			for i := 0; i < len(fields); i++ {
				f := fields[i]
				if f == "pop" {
					i++
					var upTo int64
					fmt.Sscan(fields[i], &upTo)
					var fired []string
					for {
						id, ok := q.PopDue(upTo)
						if !ok {
							break
						}
						fired = append(fired, fmt.Sprintf("%s@%d", id.Key, id.TS))
					}
					got = append(got, fmt.Sprintf("pop%d[%s]", upTo, strings.Join(fired, " ")))
					continue
				}
				var id ID[string, string]
				body := f[1:]
				at := strings.LastIndexByte(body, '@')
				kn := strings.SplitN(body[:at], "/", 2)
				id.Key, id.NS = kn[0], kn[1]
				fmt.Sscan(body[at+1:], &id.TS)
				switch {
				case f[0] == '+' && q.Add(id):
					got = append(got, "+")
				case f[0] == '+':
					got = append(got, "dup")
				case q.Remove(id):
					got = append(got, "-")
				default:
					got = append(got, "absent")
				}
			}
			if s := strings.Join(got, " "); s != tt.want {
				t.Fatalf("got  %s\nwant %s", s, tt.want)
			}
			if len(q.h.index) != q.Len() {
				t.Fatalf("index has %d entries, queue %d", len(q.h.index), q.Len())
			}
		})
	}
}

// TestTimerQueueManyRemovals keeps the index consistent through random-ish
// interleavings of adds and removes: the popped order is sorted and holds
// exactly the timers not removed.
func TestTimerQueueManyRemovals(t *testing.T) {
	q := New[int, Void]()
	want := map[int64]bool{}
	for i := range 2000 {
		ts := int64((i * 7919) % 1000)
		id := ID[int, Void]{Key: i % 13, TS: ts}
		if i%3 == 0 {
			q.Remove(id)
			delete(want, ts*100+int64(i%13))
			continue
		}
		q.Add(id)
		want[ts*100+int64(i%13)] = true
	}
	var got []int64
	for {
		id, ok := q.PopDue(1 << 40)
		if !ok {
			break
		}
		got = append(got, id.TS*100+int64(id.Key))
	}
	if !slices.IsSortedFunc(got, func(a, b int64) int { return int(a/100 - b/100) }) {
		t.Fatalf("popped out of timestamp order")
	}
	if len(got) != len(want) {
		t.Fatalf("popped %d timers, want %d", len(got), len(want))
	}
	for _, g := range got {
		if !want[g] {
			t.Fatalf("popped %d, which was removed or never added", g)
		}
	}
}

// TestTimerNamespaceCodec: the stored namespace of a timer round-trips and
// rejects truncated input.
func TestTimerNamespaceCodec(t *testing.T) {
	c := NamespaceCodec[string]{NS: codec.String()}
	for _, v := range []Namespace[string]{{TS: 0, NS: ""}, {TS: -1, NS: "w"}, {TS: 1 << 62, NS: "window[0,10)"}} {
		b := c.Append(nil, v)
		got, n, err := c.Decode(b)
		if err != nil || n != len(b) || got != v {
			t.Fatalf("round trip of %+v: %+v, %d of %d bytes, %v", v, got, n, len(b), err)
		}
		if _, _, err := c.Decode(b[:len(b)-1]); err == nil && len(b) > 8 {
			t.Fatalf("truncated %+v decoded without error", v)
		}
	}
	if _, _, err := c.Decode([]byte{1, 2}); err == nil {
		t.Fatal("a 2-byte timer namespace decoded without error")
	}
}
