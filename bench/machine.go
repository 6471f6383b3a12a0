package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine is what the run ran on, as the report's header shows it.
type Machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	GoVersion  string `json:"go_version"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Kernel     string `json:"kernel"`
	CPU        string `json:"cpu"`
	MemTotal   string `json:"mem_total"`
	DataFS     string `json:"data_fs"`
	LoadAvg    string `json:"loadavg"` // at the start
}

// ProbeMachine describes this machine and the file system of dir. A field
// it cannot read is left empty, except LoadAvg, which is then "-". The
// bench/peers harness describes its machine with it too.
func ProbeMachine(dir string) Machine {
	m := Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(),
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), LoadAvg: loadAvg()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.CPU = procKey("/proc/cpuinfo", "model name")
	m.MemTotal = procKey("/proc/meminfo", "MemTotal")
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		m.DataFS = fsNames[int64(st.Type)]
		if m.DataFS == "" {
			m.DataFS = fmt.Sprintf("0x%x", st.Type)
		}
	}
	return m
}

// fsNames names the file systems a data directory is likely on, by the
// f_type of statfs(2); others are shown in hex.
var fsNames = map[int64]string{
	0xEF53:     "ext4",
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x01021994: "tmpfs",
	0x794C7630: "overlayfs",
	0x2FC12FC1: "zfs",
	0x65735546: "fuse",
}

// loadAvg is the 1, 5 and 15 minute load average, or "-".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "-"
}

// procKey returns the value of the first "key: value" line of a /proc file.
func procKey(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
