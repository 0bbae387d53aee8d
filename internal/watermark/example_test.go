package watermark_test

import (
	"fmt"

	"github.com/weirstream/weir/internal/watermark"
)

// A source subtask reading two splits, one far ahead of the other: the
// subtask's watermark follows the one behind until it is idle, after
// 1000 ms without records.
func ExampleSplits() {
	ws, err := watermark.NewSplits(watermark.BoundedOutOfOrderness(100).WithIdleness(1000))
	if err != nil {
		panic(err)
	}
	send := func(out watermark.Output) {
		if !out.Empty() {
			fmt.Println(out)
		}
	}
	for _, id := range []string{"a", "b"} {
		out, err := ws.AddSplit(id)
		if err != nil {
			panic(err)
		}
		send(out)
	}
	send(ws.OnEvent("a", 5000))
	send(ws.OnEvent("b", 1000))
	send(ws.Periodic(0)) // the task's 200 ms timer
	for now := int64(200); now <= 1200; now += 200 {
		send(ws.OnEvent("a", 5000+now))
		send(ws.Periodic(now))
	}
	send(ws.EndOfInput())
	// Output:
	// watermark 899
	// watermark 5899
	// watermark 6099
	// watermark max
}

// A task reading three channels: the least active channel holds it back.
func ExampleMerger() {
	m, err := watermark.NewMerger(3)
	if err != nil {
		panic(err)
	}
	send := func(out watermark.Output) {
		if !out.Empty() {
			fmt.Println(out)
		}
	}
	send(m.OnWatermark(0, 3000))
	send(m.OnWatermark(1, 1000))
	send(m.OnWatermark(2, 2000))
	send(m.OnStatus(1, watermark.Idle))
	send(m.OnEndOfPartition(2))
	send(m.OnStatus(0, watermark.Idle))
	send(m.OnWatermark(0, watermark.MaxWatermark))
	send(m.OnEndOfPartition(1))
	// Output:
	// watermark 1000
	// watermark 2000
	// watermark 3000
	// idle
	// active
	// watermark max
}
