package peers

import "time"

// Phase names, in report order.
const (
	PhaseAppend      = "append"       // no fsync; latency per batch
	PhaseAppendFsync = "append+fsync" // Sync after every batch; latency per batch
	PhaseReopen      = "reopen"       // Close, then open the same directory
	PhaseLookup      = "lookup"       // random offset -> value of that record
	PhaseLookupTime  = "lookup-time"  // random timestamp -> first offset >= it
	PhaseRead        = "read"         // sequential read of every record
	PhaseMixed       = "mixed"        // one appender, Readers followers at the tail
)

// Phases lists every phase in report order.
var Phases = []string{PhaseAppend, PhaseAppendFsync, PhaseReopen, PhaseLookup, PhaseLookupTime, PhaseRead, PhaseMixed}

// Result is one measured (log, phase, record size, batch size) cell.
type Result struct {
	Log   string `json:"log"`
	Phase string `json:"phase"`
	Size  int    `json:"record_size"`
	// Batch is the records per Append call; 0 for phases that do not append.
	Batch int `json:"batch"`

	// NA is set (and nothing else is) when the log cannot do the phase.
	NA string `json:"na,omitempty"`

	// Wrong counts answers that differ from what was written (a value, or
	// the offset of a time lookup); WrongExample describes the first. They
	// are timed like the others and reported, never hidden.
	Wrong        int64  `json:"wrong,omitempty"`
	WrongExample string `json:"wrong_example,omitempty"`

	Ops     int64         `json:"ops"`     // timed operations: records, lookups, or 1 (reopen)
	Records int64         `json:"records"` // records moved
	Bytes   int64         `json:"bytes"`   // value bytes moved (framing not counted)
	Elapsed time.Duration `json:"elapsed_ns"`
	NsPerOp float64       `json:"ns_per_op"`
	MBps    float64       `json:"mb_per_s"` // value bytes, 1 MB = 1e6 bytes
	RecPerS float64       `json:"records_per_s"`
	LatUnit string        `json:"latency_unit,omitempty"` // "batch" or "op"
	LatP50  time.Duration `json:"latency_p50_ns,omitempty"`
	LatP99  time.Duration `json:"latency_p99_ns,omitempty"`
	Samples int           `json:"latency_samples,omitempty"`
	VsRaw   float64       `json:"vs_raw,omitempty"` // NsPerOp / raw's NsPerOp in the same cell
	// Runs is how many times the cell ran (Options.Repeat); this is the
	// median run, MinNsPerOp and MaxNsPerOp the extremes.
	Runs       int     `json:"runs"`
	MinNsPerOp float64 `json:"min_ns_per_op,omitempty"`
	MaxNsPerOp float64 `json:"max_ns_per_op,omitempty"`
	DiskSize   int64   `json:"disk_bytes,omitempty"` // append: bytes in the directory after Close

	// Mixed workload only.
	Readers     int           `json:"readers,omitempty"`
	ReaderMBps  float64       `json:"reader_mb_per_s,omitempty"` // all readers together
	ReaderRecPS float64       `json:"reader_records_per_s,omitempty"`
	LagP50      time.Duration `json:"lag_p50_ns,omitempty"`
	LagP99      time.Duration `json:"lag_p99_ns,omitempty"`
	LagMax      time.Duration `json:"lag_max_ns,omitempty"`
}

func (r *Result) finish() {
	if r.Elapsed <= 0 {
		return
	}
	s := r.Elapsed.Seconds()
	if r.Ops > 0 {
		r.NsPerOp = float64(r.Elapsed.Nanoseconds()) / float64(r.Ops)
	}
	r.MBps = float64(r.Bytes) / 1e6 / s
	r.RecPerS = float64(r.Records) / s
}
