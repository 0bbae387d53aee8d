// Command devicetwin simulates 10 devices sending 1000 readings each and
// prints the final twin of every device.
package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connectors/collect"
	"github.com/weirstream/weir/connectors/datagen"
	"github.com/weirstream/weir/examples/devicetwin"
)

func main() {
	env := weir.NewEnvironment(weir.Options{Parallelism: 2})
	readings := env.FromSource("sensors", datagen.Generator(10_000, func(i int64) devicetwin.Reading {
		return devicetwin.Reading{
			Device: fmt.Sprintf("device-%02d", i%10),
			Time:   1_700_000_000_000 + i*100,
			Value:  20 + 5*math.Sin(float64(i)/50),
		}
	}))
	twins := collect.New[devicetwin.Twin]()
	devicetwin.Build(readings).SinkTo("twins", twins)
	if err := env.Execute(context.Background(), "devicetwin"); err != nil {
		fmt.Fprintln(os.Stderr, "devicetwin:", err)
		os.Exit(1)
	}
	final := map[string]devicetwin.Twin{}
	for _, t := range twins.Results() {
		if t.Count > final[t.Device].Count {
			final[t.Device] = t
		}
	}
	names := make([]string, 0, len(final))
	for d := range final {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		t := final[d]
		fmt.Printf("%s readings=%d latest=%.2f min=%.2f max=%.2f mean=%.2f\n", d, t.Count, t.Latest.Value, t.Min, t.Max, t.Mean())
	}
}
