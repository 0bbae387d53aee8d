package cluster

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// BuildFingerprint identifies this build of weir: the main module, its
// version and VCS revision, the Go version and every dependency's version.
// A JobManager refuses TaskManagers of another build, since each process
// builds the job graphs from its own code.
func BuildFingerprint() string {
	h := sha256.New()
	if bi, ok := debug.ReadBuildInfo(); ok {
		h.Write([]byte(bi.GoVersion + "\n" + bi.Path + "\n" + bi.Main.Path + "@" + bi.Main.Version + " " + bi.Main.Sum + "\n"))
		for _, s := range bi.Settings {
			if strings.HasPrefix(s.Key, "vcs.") && s.Key != "vcs.time" {
				h.Write([]byte(s.Key + "=" + s.Value + "\n"))
			}
		}
		for _, d := range bi.Deps {
			h.Write([]byte(d.Path + "@" + d.Version + " " + d.Sum + "\n"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// memory returns the machine's total and available memory in bytes
// (/proc/meminfo; 0, 0 where there is none).
func memory() (total, available int64) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemTotal:":
			total = kb << 10
		case "MemAvailable:":
			available = kb << 10
		}
	}
	return total, available
}
