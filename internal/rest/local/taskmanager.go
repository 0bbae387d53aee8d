package local

import (
	"bufio"
	"io"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/rest"
)

// TaskManagerID is the id of the embedded TaskManager, and Host the host
// its subtasks run on (GET /jobs/{id}/vertices/{vid}).
const (
	TaskManagerID = "local"
	Host          = "localhost"
)

// TaskManager describes the embedded TaskManager of a process running
// jobs: as many slots as the jobs need (a job needs its largest vertex
// parallelism, as with Flink's slot sharing), those of running jobs in
// use; the machine's cores and memory.
func TaskManager(jobs []*Job) rest.TaskManagerInfo {
	slots, used := 0, 0
	for _, j := range jobs {
		need := j.slots()
		slots += need
		if st, _ := j.Status(); !st.Terminal() {
			used += need
		}
	}
	total, free := MemoryInfo()
	return rest.TaskManagerInfo{
		ID: TaskManagerID, Address: "local", LastHeartbeat: time.Now(),
		Slots: max(slots, 1), FreeSlots: max(slots, 1) - used,
		CPUCores: goruntime.NumCPU(), PhysicalMemory: total, FreeMemory: free,
	}
}

// MemoryInfo is the machine's physical and available memory in bytes, from
// /proc/meminfo on Linux; elsewhere the Go runtime's view of this process.
func MemoryInfo() (total, free int64) {
	if f, err := os.Open("/proc/meminfo"); err == nil {
		defer f.Close()
		if total, free = parseMeminfo(f); total > 0 {
			return total, free
		}
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return int64(ms.Sys), int64(ms.Sys - ms.HeapInuse)
}

// parseMeminfo reads MemTotal and MemAvailable (in kB) from the text of
// /proc/meminfo; lines it cannot read are skipped, and total is 0 when
// MemTotal is missing.
func parseMeminfo(r io.Reader) (total, free int64) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "MemTotal":
			total = kb << 10
		case "MemAvailable":
			free = kb << 10
		}
	}
	return total, free
}
