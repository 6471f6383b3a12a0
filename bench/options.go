package bench

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/logfs/logfs/record"
)

// Phases, in report order. Those of the storage API compare logfs with raw;
// the mount phases compare a tool on the mount with the same tool on plain
// files; memory measures a mount of many segments.
const (
	PhaseAppend     = "append"
	PhaseAppendSync = "append+fsync"
	PhaseLookup     = "lookup"
	PhaseLookupTime = "lookup-time"
	PhaseRead       = "read"
	PhaseMixed      = "mixed"
	PhaseCat        = "cat"
	PhaseTail       = "tail"
	PhaseHead       = "head"
	PhaseCatAppend  = "cat>>append"
	PhaseReaders    = "readers"
	PhasePread      = "pread"
	PhaseOpen       = "open"
	PhaseConcurrent = "concurrent"
	PhaseWrite      = "write"
	PhaseMemory     = "memory"
)

var (
	apiPhases   = []string{PhaseAppend, PhaseAppendSync, PhaseLookup, PhaseLookupTime, PhaseRead, PhaseMixed}
	mountPhases = []string{PhaseCat, PhaseTail, PhaseHead, PhaseCatAppend, PhaseReaders, PhasePread, PhaseOpen, PhaseConcurrent, PhaseWrite, PhaseMemory}
	allPhases   = append(slices.Clone(apiPhases), mountPhases...)
)

// APIPhases returns the phases of the storage API, in report order.
func APIPhases() []string { return slices.Clone(apiPhases) }

// MountPhases returns the phases that run a mount, in report order.
func MountPhases() []string { return slices.Clone(mountPhases) }

// AllPhases returns every phase, in report order.
func AllPhases() []string { return slices.Clone(allPhases) }

// Subjects: what a result row measured.
const (
	SubjectLogfs = "logfs" // the storage API, in this process
	SubjectRaw   = "raw"   // write(2)/read(2) of the same values, no index
	SubjectMount = "mount" // a tool reading or writing through a logfs mount
	SubjectPlain = "plain" // the same tool on plain files
	SubjectFloor = "floor" // the same writes to a go-fuse server that does nothing (package floorfs)
)

// MinSize is the smallest record value: 16 hex digits of the offset and 8
// bytes that depend on it (see the package documentation).
const MinSize = 24

// Options is what a run does. DefaultOptions gives the defaults of logfs
// bench; Run refuses, with ErrInvalidOptions, options outside the limits
// given here. The JSON names are those of the report's "options".
type Options struct {
	// Sizes are the record value sizes, each in [MinSize,
	// SegmentBytes-128]. Default 100, 1024, 16384.
	Sizes []int `json:"record_sizes"`
	// Batches are the records per append call, each at least 1 and small
	// enough for a batch to fit in a segment. The read phases use the data
	// set appended with the last. Default 1, 64.
	Batches []int `json:"batches"`
	// Records is the number of records of every data set; 0 (the default)
	// means DataBytes/size, clamped to [1000, MaxRecords].
	Records int `json:"records"`
	// DataBytes is the value bytes of a data set when Records is 0.
	// Default 128 MiB.
	DataBytes int64 `json:"data_bytes"`
	// MaxRecords caps the automatic record count. Default 500,000.
	MaxRecords int `json:"max_records"`
	// SegmentBytes is segment.bytes of the logfs data sets, at most 2 GiB - 1.
	// Default 64 MiB.
	SegmentBytes int64 `json:"segment_bytes"`
	// Lookups is the number of random lookups of a lookup phase, at most.
	// Default 20,000.
	Lookups int `json:"lookups"`
	// PhaseTime caps the time of each lookup phase. Default 2 s.
	PhaseTime time.Duration `json:"phase_time_ns"`
	// FsyncTime caps the time of each append+fsync phase. Default 1 s.
	FsyncTime time.Duration `json:"fsync_time_ns"`
	// Readers is the number of followers of the appender in the mixed
	// phase. Default 3.
	Readers int `json:"readers"`
	// MixedRecords is the number of records the mixed phase appends (at
	// most the records of the data set). Default 100,000.
	MixedRecords int `json:"mixed_records"`
	// Count is the runs of every cell; the report keeps the median run.
	// Default 1.
	Count int `json:"count"`
	// ToolRuns is the runs of tail and head per measurement: their latency
	// samples. Default 50.
	ToolRuns int `json:"tool_runs"`
	// Segments is the segments of the memory phase's data directory, at
	// least 10 (rounded down to a multiple of its 10 partitions).
	// Default 10,000.
	Segments int `json:"memory_segments"`
	// Phases are the phases to run (see AllPhases); their order does not
	// matter. Default APIPhases.
	Phases []string `json:"phases"`
	// Seed seeds the values and the random offsets; every seed is valid.
	// Default 1.
	Seed uint64 `json:"seed"`
	// Dir is the parent of the run's temporary directory; "" (the default)
	// is the system's temporary directory.
	Dir string `json:"-"`
	// Exe is the logfs binary whose mount subcommand serves the mounts;
	// required by the mount phases and memory.
	Exe string `json:"-"`
	// FloorExe is the logfs binary whose bench-floor subcommand serves
	// the write phase's floor (it may be newer than Exe, when Exe is an
	// older build measured for comparison); "" means Exe.
	FloorExe string `json:"-"`
}

// DefaultOptions returns the defaults of logfs bench: the storage API
// phases on the three standard record sizes, batches of 1 and 64. The
// bench/peers harness takes its defaults from here, so that both measure
// the same data sets.
func DefaultOptions() Options {
	return Options{
		Sizes:        []int{100, 1024, 16 << 10},
		Batches:      []int{1, 64},
		DataBytes:    128 << 20,
		MaxRecords:   500_000,
		SegmentBytes: 64 << 20,
		Lookups:      20_000,
		PhaseTime:    2 * time.Second,
		FsyncTime:    time.Second,
		Readers:      3,
		MixedRecords: 100_000,
		Count:        1,
		ToolRuns:     50,
		Segments:     10_000,
		Phases:       APIPhases(),
		Seed:         1,
	}
}

func (o *Options) recordsFor(size int) int64 {
	if o.Records > 0 {
		return int64(o.Records)
	}
	return int64(max(1000, min(int(o.DataBytes/int64(size)), o.MaxRecords)))
}

func (o *Options) wants(phase string) bool { return slices.Contains(o.Phases, phase) }

// wantsMount reports whether a phase runs on the mount of the data sets
// (memory mounts a data directory of its own).
func (o *Options) wantsMount() bool {
	for _, p := range mountPhases {
		if p != PhaseMemory && o.wants(p) {
			return true
		}
	}
	return false
}

// Validate checks the limits documented on the fields; Run calls it. An
// error wraps ErrInvalidOptions and names the field.
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case len(o.Sizes) == 0 || len(o.Batches) == 0 || len(o.Phases) == 0:
		return bad("Sizes, Batches and Phases must not be empty")
	case o.SegmentBytes <= 0 || o.SegmentBytes > math.MaxInt32:
		return bad("SegmentBytes %d is outside [1, 2 GiB - 1]", o.SegmentBytes)
	case o.Records < 0 || o.MaxRecords <= 0 || o.Records == 0 && o.DataBytes <= 0:
		return bad("Records must not be negative; MaxRecords and DataBytes must be positive")
	case o.Lookups <= 0 || o.PhaseTime <= 0 || o.FsyncTime <= 0 || o.Readers <= 0 ||
		o.MixedRecords <= 0 || o.Count <= 0 || o.ToolRuns <= 0:
		return bad("Lookups, PhaseTime, FsyncTime, Readers, MixedRecords, Count and ToolRuns must be positive")
	case o.Segments < 10 && o.wants(PhaseMemory):
		return bad("Segments %d is below 10", o.Segments)
	}
	for _, p := range o.Phases {
		if !slices.Contains(allPhases, p) {
			return bad("unknown phase %q", p)
		}
		if slices.Contains(mountPhases, p) && o.Exe == "" {
			return bad("phase %s needs Exe, the logfs binary that mounts", p)
		}
	}
	for _, s := range o.Sizes {
		if s < MinSize || int64(s)+128 > o.SegmentBytes {
			return bad("record size %d is outside [%d, SegmentBytes-128]", s, MinSize)
		}
	}
	for _, b := range o.Batches {
		if b < 1 {
			return bad("batch %d < 1", b)
		}
		for _, s := range o.Sizes {
			// A batch must fit in a segment: values, record and batch overhead.
			if need := int64(b)*int64(s+32) + record.HeaderSize; need > o.SegmentBytes {
				return bad("a batch of %d %d-byte records (%d bytes) does not fit in SegmentBytes %d", b, s, need, o.SegmentBytes)
			}
		}
	}
	return nil
}
