package network

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// TestMemoryProducerProcess is the producer process of TestMemoryBounded;
// it runs only when that test starts it.
func TestMemoryProducerProcess(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("WEIR_NETWORK_MEMTEST_RECORDS"))
	if err != nil {
		t.Skip("the producer process of TestMemoryBounded")
	}
	node := newNode(t, Options{}, true)
	out, err := NewOutput(node, "mem", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("addr", node.Addr())
	rec := strings.Repeat("m", 100)
	batch := make([]string, 256)
	for i := range batch {
		batch[i] = rec
	}
	for i := 0; i < n; i += len(batch) {
		if err := out.Write(batch[:min(len(batch), n-i)], nil); err != nil {
			t.Fatal(err)
		}
	}
	out.Emit(Event{Kind: EndOfPartition})
	fmt.Println("rss", rss(t, "self"))
	bufio.NewReader(os.Stdin).ReadString('\n') // until the consumer has read its figures
}

func rss(t *testing.T, pid string) int {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestMemoryBounded (opt-in: WEIR_NETWORK_MEMTEST=1, about 15 s): a
// producer process as fast as it can go, this process consuming about 100
// times slower. With 10 times the input, the resident memory of neither
// process grows: credits and sender buffers bound what is in flight.
func TestMemoryBounded(t *testing.T) {
	if os.Getenv("WEIR_NETWORK_MEMTEST") != "1" {
		t.Skip("set WEIR_NETWORK_MEMTEST=1 to run the two-process memory test")
	}
	run := func(n int) (prodKB, consKB int) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryProducerProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "WEIR_NETWORK_MEMTEST_RECORDS="+strconv.Itoa(n))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer stdin.Close()
		lines := bufio.NewScanner(stdout)
		lines.Scan()
		addr, ok := strings.CutPrefix(lines.Text(), "addr ")
		if !ok {
			t.Fatalf("producer said %q", lines.Text())
		}
		cons := newNode(t, Options{}, false)
		g := cons.NewGate()
		in, err := Subscribe(g, addr, "mem", codec.String())
		if err != nil {
			t.Fatal(err)
		}
		got, peak := 0, 0
		for {
			what, recs, _, ev, err := in.Poll()
			if err != nil {
				t.Fatal(err)
			}
			if what == Records {
				got += len(recs)
				time.Sleep(time.Duration(len(recs)) * 30 * time.Microsecond) // ~33k records/s
				if got%(n/10+1) < len(recs) {
					peak = max(peak, rss(t, strconv.Itoa(cmd.Process.Pid)))
				}
				continue
			}
			if what == Control && ev.Kind == EndOfPartition {
				break
			}
			<-g.Doorbell()
		}
		if got != n {
			t.Fatalf("received %d records, want %d", got, n)
		}
		lines.Scan()
		return max(peak, rss(t, strconv.Itoa(cmd.Process.Pid))), rss(t, "self")
	}
	p1, c1 := run(30_000)
	p2, c2 := run(300_000)
	t.Logf("producer RSS %d KiB at 30k records, %d KiB at 300k; consumer %d KiB, %d KiB", p1, p2, c1, c2)
	const slack = 8 << 10 // KiB: the GC's pacing, not the input
	if p2 > p1+slack || c2 > c1+slack {
		t.Fatalf("RSS grew with the input: producer %d -> %d KiB, consumer %d -> %d KiB", p1, p2, c1, c2)
	}
}
