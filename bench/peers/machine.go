package peers

import "github.com/logfs/logfs/bench"

// Machine is what the report says about where it ran: bench.Machine's
// fields, with the JSON names of this report (empty ones omitted).
type Machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	GoVersion  string `json:"go_version"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Kernel     string `json:"kernel,omitempty"`
	CPU        string `json:"cpu,omitempty"`
	MemTotal   string `json:"mem_total,omitempty"`
	DataFS     string `json:"data_fs,omitempty"` // filesystem of the data directory
	// LoadAvg is /proc/loadavg when the run started: other work on the
	// machine shows up as noise in the figures.
	LoadAvg string `json:"loadavg,omitempty"`
}

// probeMachine is bench.ProbeMachine: the same fields, read the same way,
// as logfs bench shows them; a field it cannot read is omitted.
func probeMachine(dir string) Machine {
	m := Machine(bench.ProbeMachine(dir))
	if m.LoadAvg == "-" { // bench's placeholder for an unreadable /proc/loadavg
		m.LoadAvg = ""
	}
	return m
}
