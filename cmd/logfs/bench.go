package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// logfs bench runs the standard workloads on logfs and, in the same run, on
// baselines that do the least the same job can cost: raw write(2)/read(2)
// of the same values on the same disk, and the same shell tool on plain
// files. Every value read is checked; a wrong answer fails the command.
// The peers (liftbridge, tidwall/wal, rosedb/wal) are measured by the
// harness in bench/peers, a module of its own so their dependencies stay
// out of logfs's.

func init() { addCommand(newBenchCommand) }

// Phases, in report order. Those of the storage API compare logfs with raw;
// the mount phases compare a tool on the mount with the same tool on plain
// files; memory measures a mount of many segments.
const (
	phAppend     = "append"
	phAppendSync = "append+fsync"
	phLookup     = "lookup"
	phLookupTime = "lookup-time"
	phRead       = "read"
	phMixed      = "mixed"
	phCat        = "cat"
	phTail       = "tail"
	phHead       = "head"
	phCatAppend  = "cat>>append"
	phMemory     = "memory"
)

var (
	apiPhases   = []string{phAppend, phAppendSync, phLookup, phLookupTime, phRead, phMixed}
	mountPhases = []string{phCat, phTail, phHead, phCatAppend, phMemory}
	allPhases   = append(slices.Clone(apiPhases), mountPhases...)
)

// Subjects: what a result row measured.
const (
	subjLogfs = "logfs" // the storage API, in this process
	subjRaw   = "raw"   // write(2)/read(2) of the same values, no index
	subjMount = "mount" // a tool reading or writing through a logfs mount
	subjPlain = "plain" // the same tool on plain files
)

// benchOptions is what a run does; the flags set it.
type benchOptions struct {
	Sizes        []int         `json:"record_sizes"`
	Batches      []int         `json:"batches"`
	Records      int           `json:"records"` // 0: DataBytes/size clamped to [1000, MaxRecords]
	DataBytes    int64         `json:"data_bytes"`
	MaxRecords   int           `json:"max_records"`
	SegmentBytes int64         `json:"segment_bytes"`
	Lookups      int           `json:"lookups"`
	PhaseTime    time.Duration `json:"phase_time_ns"`
	FsyncTime    time.Duration `json:"fsync_time_ns"`
	Readers      int           `json:"readers"`
	MixedRecords int           `json:"mixed_records"`
	Count        int           `json:"count"`
	ToolRuns     int           `json:"tool_runs"`
	Segments     int           `json:"memory_segments"`
	Phases       []string      `json:"phases"`
	Seed         uint64        `json:"seed"`
	Dir          string        `json:"-"`
	Exe          string        `json:"-"`
}

func (o *benchOptions) recordsFor(size int) int64 {
	if o.Records > 0 {
		return int64(o.Records)
	}
	return int64(max(1000, min(int(o.DataBytes/int64(size)), o.MaxRecords)))
}

func (o *benchOptions) wants(phase string) bool { return slices.Contains(o.Phases, phase) }

func (o *benchOptions) wantsMount() bool {
	for _, p := range mountPhases {
		if p != phMemory && o.wants(p) {
			return true
		}
	}
	return false
}

func newBenchCommand() *cobra.Command {
	var (
		o                                           benchOptions
		sizes, batches, dataBytes, segBytes, phases string
		mount, asJSON, quiet                        bool
	)
	cmd := &cobra.Command{
		Use:   "bench [--size 100,1k,16k] [--batch 1,64] [--records N] [--mount] [--phases LIST] [--count N] [--json]",
		Short: "Measure logfs against raw I/O and plain files on the standard workloads",
		Long: `Run the standard workloads on logfs and, in the same run, on baselines, and
print a table (or JSON with --json): time per operation, MB/s of values,
records/s, latency p50/p99 and each row's speed relative to its baseline
(x base: the baseline's time per record or per operation divided by logfs's;
above 1 logfs is faster). Every value read back is checked against what was
written: a wrong answer is shown as WRONG and fails the command.

Through the storage API, for every record size (values only, no keys):
  append        records in Append calls of --batch records, no fsync
  append+fsync  the same, Sync after every call, for --fsync-time
  lookup        random offsets -> the record at that offset (Reader.Seek + Next)
  lookup-time   random timestamps -> first offset at or after (OffsetForTime)
  read          every record from offset 0
  mixed         one appender, --readers followers waiting in Reader.Wait
The baseline (raw) writes the same values, each behind an 8-byte length,
with one write(2) per batch to one file, reads them back with 1 MiB
read(2)s and looks one up with one pread(2) at a position kept in memory:
the physical floor, not an index. Read phases run warm (page cache).

With --mount, the data set of every size is also mounted (this binary's
'mount' subcommand, in a temporary directory) and measured with real tools,
against the same tool on plain files:
  cat           cat offset/0 (FUSE page cache dropped first) vs cat of the .log files
  tail          tail -n 10 offset/0 vs tail -n 10 of a plain file of the same text
  head          head -n 1 offset/N, random N, vs head -n 1 of that plain file
  cat>>append   cat FILE >> TOPIC/0/append vs cat FILE >> a plain file
  memory        a mount of --segments segments: peak RSS, memory mappings
                before and after ls -R and a few reads (mount needs root
                or fusermount3, and /dev/fuse)

Everything is written to a fresh directory under --dir (default: the system
temporary directory), unmounted and removed at the end, on error and on
Ctrl-C. Timings depend on what else runs on the machine: the header gives
the load average; compare ratios measured in the same run.`,
		Example: `  logfs bench                                   # storage API, 3 sizes x batch 1 and 64
  logfs bench --mount --count 3                 # everything, each cell 3 times, median shown
  logfs bench --size 1k --batch 64 --phases lookup,read --json
  logfs bench --mount --phases memory --segments 10000`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Sizes, err = parseBenchSizes(sizes); err != nil {
				return usageErrorf("--size: %v", err)
			}
			if o.Batches, err = parseBenchSizes(batches); err != nil {
				return usageErrorf("--batch: %v", err)
			}
			if o.DataBytes, err = parseBenchBytes(dataBytes); err != nil {
				return usageErrorf("--data-bytes: %v", err)
			}
			if o.SegmentBytes, err = parseBenchBytes(segBytes); err != nil {
				return usageErrorf("--segment-bytes: %v", err)
			}
			if o.Phases, err = parseBenchPhases(phases, mount); err != nil {
				return err
			}
			if err := o.validate(); err != nil {
				return err
			}
			if o.Exe == "" {
				if o.Exe, err = os.Executable(); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var progress io.Writer
			if !quiet {
				progress = cmd.ErrOrStderr()
			}
			rep, err := runBench(ctx, o, progress)
			if ctx.Err() != nil {
				// A tool killed by the interrupt fails with its own error.
				if errors.Is(err, context.Canceled) || !strings.Contains(fmt.Sprint(err), "still mounted") {
					return errors.New("interrupted; data removed")
				}
				return fmt.Errorf("interrupted: %w", err)
			}
			if rep != nil {
				var werr error
				if asJSON {
					werr = writeBenchJSON(cmd.OutOrStdout(), rep)
				} else {
					werr = writeBenchTable(cmd.OutOrStdout(), rep)
				}
				err = errors.Join(err, werr)
			}
			if err == nil && rep.Wrong > 0 {
				err = fmt.Errorf("%d wrong answer%s: logfs returned data other than what was written (see WRONG above)", rep.Wrong, plural(int(rep.Wrong)))
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&sizes, "size", "100,1k,16k", "record value sizes, comma-separated (k = KiB; at least 24)")
	f.StringVar(&batches, "batch", "1,64", "records per append call, comma-separated; read phases use the data set of the last")
	f.IntVar(&o.Records, "records", 0, "records per data set (0: --data-bytes / size, clamped to [1000, --max-records])")
	f.StringVar(&dataBytes, "data-bytes", "128MiB", "value bytes per data set when --records is 0")
	f.IntVar(&o.MaxRecords, "max-records", 500_000, "cap on the automatic record count")
	f.StringVar(&segBytes, "segment-bytes", "64MiB", "segment.bytes of the logfs data sets (the peers harness uses the same)")
	f.IntVar(&o.Lookups, "lookups", 20_000, "random lookups per lookup phase (at most)")
	f.DurationVar(&o.PhaseTime, "phase-time", 2*time.Second, "time cap of each lookup phase")
	f.DurationVar(&o.FsyncTime, "fsync-time", time.Second, "time cap of each append+fsync phase")
	f.IntVar(&o.Readers, "readers", 3, "mixed: followers of the appender")
	f.IntVar(&o.MixedRecords, "mixed-records", 100_000, "mixed: records appended (at most --records)")
	f.IntVar(&o.Count, "count", 1, "runs of every cell; the median run is shown")
	f.IntVar(&o.ToolRuns, "tool-runs", 50, "tail and head: runs per measurement (latency samples)")
	f.IntVar(&o.Segments, "segments", 10_000, "memory: segments of the mounted data directory")
	f.StringVar(&phases, "phases", "", "comma-separated phases (default: "+strings.Join(apiPhases, ",")+", and with --mount "+strings.Join(mountPhases, ",")+")")
	f.BoolVar(&mount, "mount", false, "also measure through a FUSE mount (cat, tail, head, cat >> append, memory)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of values and random offsets")
	f.StringVar(&o.Dir, "dir", "", "parent of the run's temporary directory (default: system temp dir)")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of tables")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	f.StringVar(&o.Exe, "logfs-binary", "", "logfs binary that serves the mount (default: this one)")
	_ = f.MarkHidden("logfs-binary")
	return cmd
}

func parseBenchSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		if v, ok := strings.CutSuffix(strings.ToLower(f), "k"); ok {
			f, mult = v, 1024
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

func parseBenchBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q (e.g. 64MiB)", s)
	}
	return n * mult, nil
}

func parseBenchPhases(s string, mount bool) ([]string, error) {
	if s == "" {
		if mount {
			return slices.Clone(allPhases), nil
		}
		return slices.Clone(apiPhases), nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(allPhases, p) {
			return nil, usageErrorf("--phases: unknown phase %q (have %s)", p, strings.Join(allPhases, ","))
		}
		if slices.Contains(mountPhases, p) && !mount {
			return nil, usageErrorf("--phases: %s needs --mount", p)
		}
		out = append(out, p)
	}
	return out, nil
}

func (o *benchOptions) validate() error {
	for _, s := range o.Sizes {
		if s < benchMinSize || int64(s)+128 > o.SegmentBytes {
			return usageErrorf("--size: %d is outside [%d, --segment-bytes)", s, benchMinSize)
		}
	}
	switch {
	case o.Records < 0 || o.MaxRecords <= 0:
		return usageErrorf("--records and --max-records must be positive")
	case o.Lookups <= 0 || o.PhaseTime <= 0 || o.FsyncTime <= 0:
		return usageErrorf("--lookups, --phase-time and --fsync-time must be positive")
	case o.Readers <= 0 || o.MixedRecords <= 0 || o.Count <= 0 || o.ToolRuns <= 0:
		return usageErrorf("--readers, --mixed-records, --count and --tool-runs must be positive")
	case o.Segments < 10 && o.wants(phMemory):
		return usageErrorf("--segments must be at least 10")
	case o.SegmentBytes > math.MaxInt32:
		return usageErrorf("--segment-bytes is at most 2 GiB - 1")
	}
	for _, b := range o.Batches {
		if b < 1 {
			return usageErrorf("--batch: %d < 1", b)
		}
		for _, s := range o.Sizes {
			// A batch must fit in a segment: values, record and batch overhead.
			if need := int64(b)*int64(s+32) + record.HeaderSize; need > o.SegmentBytes {
				return usageErrorf("--batch %d of %d-byte records (%d bytes) does not fit in --segment-bytes %d", b, s, need, o.SegmentBytes)
			}
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// Report.

// benchResult is one measured cell: a phase, a record size, a batch size
// and a subject.
type benchResult struct {
	Phase   string `json:"phase"`
	Size    int    `json:"record_size"`
	Batch   int    `json:"batch,omitempty"`
	Subject string `json:"subject"`
	What    string `json:"what"` // the command or call measured

	Ops     int64         `json:"ops"`     // timed operations: records, calls, lookups, tool runs
	Records int64         `json:"records"` // records moved (0 for latency phases)
	Bytes   int64         `json:"bytes"`   // bytes moved: values, or a tool's output or input
	Elapsed time.Duration `json:"elapsed_ns"`
	NsPerOp float64       `json:"ns_per_op"`
	MBps    float64       `json:"mb_per_s,omitempty"` // 1 MB = 1e6 bytes
	RecPerS float64       `json:"records_per_s,omitempty"`
	P50     time.Duration `json:"latency_p50_ns,omitempty"`
	P99     time.Duration `json:"latency_p99_ns,omitempty"`
	LatUnit string        `json:"latency_unit,omitempty"` // what one latency sample is

	// Baseline is the subject this row is compared with; VsBase is the
	// baseline's time per record (per operation when no records move)
	// divided by this row's: above 1 this row is faster.
	Baseline string  `json:"baseline,omitempty"`
	VsBase   float64 `json:"vs_baseline,omitempty"`

	Verified     int64  `json:"verified"` // values (or bytes of tool output) checked against what was written
	Wrong        int64  `json:"wrong"`
	WrongExample string `json:"wrong_example,omitempty"`

	Runs     int     `json:"runs"`
	MinNsOp  float64 `json:"min_ns_per_op,omitempty"`
	MaxNsOp  float64 `json:"max_ns_per_op,omitempty"`
	Note     string  `json:"note,omitempty"`
	DiskSize int64   `json:"disk_bytes,omitempty"`

	// mixed only
	Readers    int           `json:"readers,omitempty"`
	ReaderMBps float64       `json:"reader_mb_per_s,omitempty"` // all readers together
	LagP50     time.Duration `json:"lag_p50_ns,omitempty"`
	LagP99     time.Duration `json:"lag_p99_ns,omitempty"`
}

func (r *benchResult) finish() {
	if r.Elapsed <= 0 {
		return
	}
	if r.Ops > 0 {
		r.NsPerOp = float64(r.Elapsed) / float64(r.Ops)
	}
	s := r.Elapsed.Seconds()
	r.MBps = float64(r.Bytes) / 1e6 / s
	r.RecPerS = float64(r.Records) / s
}

// unitNs is the time per record, or per operation when no records move.
func (r *benchResult) unitNs() float64 {
	if r.Records > 0 {
		return float64(r.Elapsed) / float64(r.Records)
	}
	return r.NsPerOp
}

func (r *benchResult) wrong(err error) {
	if r.Wrong == 0 {
		r.WrongExample = err.Error()
	}
	r.Wrong++
}

// benchMemory is what the memory phase found.
type benchMemory struct {
	Segments   int       `json:"segments"`
	Partitions int       `json:"partitions"`
	BuildS     float64   `json:"build_s"`
	Steps      []memStep `json:"steps"`
	// SegmentsRead counts the segments the reads touched; Mapped those
	// whose index files the mount has mapped at the end; MappedUnread those
	// mapped without having been read (must be 0).
	SegmentsRead int      `json:"segments_read"`
	Mapped       int      `json:"segments_mapped"`
	MappedUnread int      `json:"segments_mapped_unread"`
	PeakRSS      int64    `json:"peak_rss_bytes"` // VmHWM of the mount process
	Unread       []string `json:"mapped_unread_examples,omitempty"`
	Verified     int64    `json:"verified"`
	Wrong        int64    `json:"wrong"`
	WrongExample string   `json:"wrong_example,omitempty"`
}

// memStep is the mount process after one step of the memory phase.
type memStep struct {
	Step       string `json:"step"`
	RSS        int64  `json:"rss_bytes"`       // VmRSS
	HWM        int64  `json:"peak_rss_bytes"`  // VmHWM
	Maps       int    `json:"maps"`            // lines of /proc/PID/maps
	IndexMaps  int    `json:"index_maps"`      // of them, .index and .timeindex files
	SegsMapped int    `json:"segments_mapped"` // segments with a mapped index
}

// benchTarget is one of the performance targets of the project, with the
// figure this run measured for it.
type benchTarget struct {
	Target   string  `json:"target"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Met      bool    `json:"met"`
}

type benchReport struct {
	Machine  benchMachine  `json:"machine"`
	Options  benchOptions  `json:"options"`
	Records  []int64       `json:"records_per_size"`
	Started  time.Time     `json:"started"`
	ElapsedS float64       `json:"elapsed_s"`
	LoadEnd  string        `json:"loadavg_end"`
	Results  []benchResult `json:"results"`
	Memory   *benchMemory  `json:"memory,omitempty"`
	Targets  []benchTarget `json:"targets"`
	Wrong    int64         `json:"wrong_answers"`
}

type benchMachine struct {
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

func probeBenchMachine(dir string) benchMachine {
	m := benchMachine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(),
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), LoadAvg: loadAvg()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.CPU = procKey("/proc/cpuinfo", "model name")
	m.MemTotal = procKey("/proc/meminfo", "MemTotal")
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		m.DataFS = map[int64]string{0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs", 0x794C7630: "overlayfs"}[int64(st.Type)]
		if m.DataFS == "" {
			m.DataFS = fmt.Sprintf("0x%x", st.Type)
		}
	}
	return m
}

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

// ---------------------------------------------------------------------------
// Values.

// benchMinSize is the smallest value: 16 hex digits of the offset and 8
// bytes that depend on it.
const benchMinSize = 24

// benchPayload generates the value of every offset, so that anything read
// back is checked without keeping what was written:
//
//	value(off) = hex16(off) ++ pool[start(off) : start(off)+size-16]
//
// The pool holds letters and digits only: values are text lines without
// '\n', so the mount's rendering (value, '\n') is one line per record and
// line tools (tail, head, the append file) see records.
type benchPayload struct {
	size int
	pool []byte
}

const benchPoolBytes = 1 << 20

func newBenchPayload(size int, seed uint64) *benchPayload {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	r := rand.New(rand.NewPCG(seed, uint64(size)))
	pool := make([]byte, benchPoolBytes+size)
	for i := range pool {
		pool[i] = alphabet[r.IntN(len(alphabet))]
	}
	return &benchPayload{size: size, pool: pool}
}

func (p *benchPayload) start(off int64) int {
	return int(uint64(off) * 2654435761 % benchPoolBytes)
}

func putHex16(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		dst[i] = digits[v&15]
		v >>= 4
	}
}

func (p *benchPayload) fill(dst []byte, off int64) {
	putHex16(dst, uint64(off))
	s := p.start(off)
	copy(dst[16:p.size], p.pool[s:s+p.size-16])
}

// appendLine appends the Values rendering of offset off: value and '\n'.
func (p *benchPayload) appendLine(dst []byte, off int64) []byte {
	n := len(dst)
	dst = slices.Grow(dst, p.size+1)[:n+p.size+1]
	p.fill(dst[n:], off)
	dst[n+p.size] = '\n'
	return dst
}

func (p *benchPayload) check(v []byte, off int64) error {
	if len(v) != p.size {
		return fmt.Errorf("offset %d: %d bytes, want %d", off, len(v), p.size)
	}
	if got, err := strconv.ParseUint(string(v[:16]), 16, 64); err != nil || int64(got) != off {
		return fmt.Errorf("offset %d: holds the value of offset %q", off, v[:16])
	}
	if s := p.start(off); !bytes.Equal(v[16:], p.pool[s:s+p.size-16]) {
		return fmt.Errorf("offset %d: value bytes differ", off)
	}
	return nil
}

// quick checks length, leading offset and the last 8 bytes: cheap enough
// to run inside a timed sequential read.
func (p *benchPayload) quick(v []byte, off int64) bool {
	if len(v) != p.size {
		return false
	}
	var h [16]byte
	putHex16(h[:], uint64(off))
	s := p.start(off) + p.size - 24
	return string(v[:16]) == string(h[:]) && string(v[p.size-8:]) == string(p.pool[s:s+8])
}

func benchTS(off int64) int64 { return 1_700_000_000_000 + 2*off }

// batchValues holds one batch of values, reused across batches.
type batchValues struct {
	vals [][]byte
	recs []storage.Record
}

func newBatchValues(size, n int) *batchValues {
	b := &batchValues{vals: make([][]byte, n), recs: make([]storage.Record, n)}
	mem := make([]byte, size*n)
	for i := range b.vals {
		b.vals[i] = mem[i*size : (i+1)*size : (i+1)*size]
	}
	return b
}

func (b *batchValues) prepare(p *benchPayload, first int64, n int) ([][]byte, []storage.Record) {
	for i := 0; i < n; i++ {
		p.fill(b.vals[i], first+int64(i))
		b.recs[i] = storage.Record{Timestamp: benchTS(first + int64(i)), Value: b.vals[i]}
	}
	return b.vals[:n], b.recs[:n]
}

// expectWriter checks a byte stream against the Values rendering of the
// records [next, end) of a payload, as it arrives (a tool's output).
type expectWriter struct {
	p         *benchPayload
	next, end int64
	pending   []byte
	buf       []byte
	n         int64
	err       error
}

func newExpectWriter(p *benchPayload, from, to int64) *expectWriter {
	return &expectWriter{p: p, next: from, end: to}
}

func (w *expectWriter) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 && w.err == nil {
		if len(w.pending) == 0 {
			if w.next >= w.end {
				w.err = fmt.Errorf("%d bytes more than the %d expected", len(b), w.n)
				break
			}
			w.buf = w.buf[:0]
			for w.next < w.end && len(w.buf) < 64<<10 {
				w.buf = w.p.appendLine(w.buf, w.next)
				w.next++
			}
			w.pending = w.buf
		}
		k := min(len(b), len(w.pending))
		if !bytes.Equal(b[:k], w.pending[:k]) {
			i := 0
			for b[i] == w.pending[i] {
				i++
			}
			w.err = fmt.Errorf("byte %d differs from the rendering of what was written", w.n+int64(i))
		}
		b, w.pending, w.n = b[k:], w.pending[k:], w.n+int64(k)
	}
	return total, nil
}

// done returns the first difference, or a missing end.
func (w *expectWriter) done() error {
	if w.err == nil && (len(w.pending) > 0 || w.next < w.end) {
		w.err = fmt.Errorf("output ends after %d bytes, before the last record", w.n)
	}
	return w.err
}

// ---------------------------------------------------------------------------
// The two subjects of the storage phases.

// benchLog is what the storage phases drive: logfs's storage API, or raw
// I/O of the same values.
type benchLog interface {
	append(vals [][]byte, recs []storage.Record) error
	sync() error
	lookup(off int64) ([]byte, error)
	lookupTime(ts int64) (int64, error) // errNoTimeLookup for raw
	readAll(fn func(v []byte)) (int64, error)
	close() error
}

var errNoTimeLookup = errors.New("no time lookup")

const benchTopic = "bench"

type logfsBench struct {
	l *storage.Log
	p *storage.Partition
	r *storage.Reader
}

func openLogfsBench(dir string, segmentBytes int64) (*logfsBench, error) {
	l, err := storage.Open(dir, storage.Options{Logger: slog.New(slog.DiscardHandler), RetentionCheckInterval: -1})
	if err != nil {
		return nil, err
	}
	p, err := l.Partition(benchTopic, 0)
	if errors.Is(err, storage.ErrNoTopic) {
		var t *storage.Topic
		// flush.ms=-1: nothing fsyncs but Sync, as for raw.
		t, err = l.CreateTopic(benchTopic, 1, storage.Overrides{"segment.bytes": segmentBytes, "flush.ms": -1, "retention.ms": -1})
		if err == nil {
			p, err = t.Partition(0)
		}
	}
	if err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return &logfsBench{l: l, p: p}, nil
}

func (b *logfsBench) append(_ [][]byte, recs []storage.Record) error {
	want := b.p.EndOffset()
	first, err := b.p.Append(recs)
	if err == nil && first != want {
		err = fmt.Errorf("wrong data: appended at offset %d, want %d", first, want)
	}
	return err
}

func (b *logfsBench) sync() error { return b.p.Sync() }

func (b *logfsBench) lookup(off int64) ([]byte, error) {
	var err error
	if b.r == nil {
		b.r, err = b.p.NewReader(record.Offset(off))
	} else {
		err = b.r.Seek(record.Offset(off))
	}
	if err != nil {
		return nil, err
	}
	rec, err := b.r.Next()
	if err != nil {
		return nil, err
	}
	if int64(rec.Offset) != off {
		return nil, fmt.Errorf("wrong data: lookup of %d read offset %d", off, rec.Offset)
	}
	return rec.Value, nil
}

func (b *logfsBench) lookupTime(ts int64) (int64, error) {
	off, err := b.p.OffsetForTime(ts)
	return int64(off), err
}

func (b *logfsBench) readAll(fn func(v []byte)) (n int64, err error) {
	r, err := b.p.NewReader(0)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if int64(rec.Offset) != n {
			return n, fmt.Errorf("wrong data: record %d has offset %d", n, rec.Offset)
		}
		fn(rec.Value)
		n++
	}
}

func (b *logfsBench) close() error {
	if b.r != nil {
		b.r.Close()
	}
	return b.l.Close()
}

// rawBench is the physical floor: [len u64 LE][value]… in one file, one
// write(2) per batch, 1 MiB read(2)s, one pread(2) per lookup at a position
// kept in memory.
type rawBench struct {
	f    *os.File
	pos  []int64
	end  int64
	wbuf []byte
	rbuf []byte
}

func openRawBench(dir string) (*rawBench, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &rawBench{f: f}, nil
}

func (b *rawBench) append(vals [][]byte, _ []storage.Record) error {
	w := b.wbuf[:0]
	pos := b.end
	for _, v := range vals {
		b.pos = append(b.pos, pos)
		w = binary.LittleEndian.AppendUint64(w, uint64(len(v)))
		w = append(w, v...)
		pos += 8 + int64(len(v))
	}
	b.wbuf = w
	if _, err := b.f.Write(w); err != nil {
		return err
	}
	b.end = pos
	return nil
}

func (b *rawBench) sync() error { return b.f.Sync() }

func (b *rawBench) lookup(off int64) ([]byte, error) {
	start, end := b.pos[off], b.end
	if off+1 < int64(len(b.pos)) {
		end = b.pos[off+1]
	}
	n := int(end - start)
	if cap(b.rbuf) < n {
		b.rbuf = make([]byte, n)
	}
	buf := b.rbuf[:n]
	if _, err := b.f.ReadAt(buf, start); err != nil {
		return nil, err
	}
	return buf[8:], nil
}

func (b *rawBench) lookupTime(int64) (int64, error) { return 0, errNoTimeLookup }

func (b *rawBench) readAll(fn func(v []byte)) (int64, error) {
	if _, err := b.f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var have int
	var n int64
	for {
		k, err := b.f.Read(buf[have:])
		have += k
		p := 0
		for have-p >= 8 {
			sz := int(binary.LittleEndian.Uint64(buf[p:]))
			if have-p-8 < sz {
				if 8+sz > len(buf) { // a record larger than the buffer
					nb := make([]byte, 8+sz+len(buf))
					have = copy(nb, buf[p:have])
					buf, p = nb, 0
				}
				break
			}
			fn(buf[p+8 : p+8+sz])
			n++
			p += 8 + sz
		}
		have = copy(buf, buf[p:have])
		if err == io.EOF || (err == nil && k == 0) {
			if have != 0 {
				return n, fmt.Errorf("raw: %d trailing bytes", have)
			}
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (b *rawBench) close() error { return b.f.Close() }

// ---------------------------------------------------------------------------
// The run.

type benchRun struct {
	o        benchOptions
	root     string
	rep      *benchReport
	progress io.Writer
	mountMu  sync.Mutex
	mounts   []*benchMount // running, for cleanup
}

// benchTamper, when set (by tests), is called with each data set's
// directory before it is read, to corrupt it and prove the checks fire.
var benchTamper func(dir string) error

func runBench(ctx context.Context, o benchOptions, progress io.Writer) (rep *benchReport, err error) {
	root, err := os.MkdirTemp(o.Dir, "logfs-bench-")
	if err != nil {
		return nil, err
	}
	if root, err = filepath.Abs(root); err != nil { // /proc/PID/maps names files by absolute path
		return nil, err
	}
	r := &benchRun{o: o, root: root, progress: progress}
	defer func() { err = errors.Join(err, r.cleanup()) }()
	rep = &benchReport{Machine: probeBenchMachine(root), Options: o, Started: time.Now()}
	r.rep = rep
	r.logf("logfs bench: data in %s; load average %s", root, rep.Machine.LoadAvg)
	defer r.finish()
	for _, size := range o.Sizes {
		rep.Records = append(rep.Records, o.recordsFor(size))
		for range o.Count {
			if err := r.size(ctx, size); err != nil {
				return rep, err
			}
		}
	}
	if o.wants(phMemory) {
		if err := r.memory(ctx); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// finish folds the runs of every cell, computes the ratios and checks the
// targets, also for a run that stopped early.
func (r *benchRun) finish() {
	rep := r.rep
	rep.ElapsedS = time.Since(rep.Started).Seconds()
	rep.LoadEnd = loadAvg()
	rep.Results = benchMedians(rep.Results)
	benchRatios(rep.Results)
	rep.Targets = benchTargets(rep)
	for _, res := range rep.Results {
		rep.Wrong += res.Wrong
	}
	if rep.Memory != nil {
		rep.Wrong += rep.Memory.Wrong
	}
}

// cleanup stops every mount and removes the run's directory, but never
// while something is still mounted inside it.
func (r *benchRun) cleanup() error {
	r.mountMu.Lock()
	ms := slices.Clone(r.mounts)
	r.mountMu.Unlock()
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.stop())
	}
	if mps := mountsUnder(r.root); len(mps) > 0 {
		return errors.Join(append(errs, fmt.Errorf("still mounted, %s left in place: %s", r.root, strings.Join(mps, ", ")))...)
	}
	errs = append(errs, os.RemoveAll(r.root))
	return errors.Join(errs...)
}

func (r *benchRun) logf(format string, args ...any) {
	if r.progress != nil {
		fmt.Fprintf(r.progress, format+"\n", args...)
	}
}

func (r *benchRun) add(res benchResult) {
	res.finish()
	res.Runs = 1
	r.rep.Results = append(r.rep.Results, res)
	if r.progress == nil {
		return
	}
	line := fmt.Sprintf("%-12s size=%-5d batch=%-3d %-5s %10s/op %9s MB/s  p50 %s p99 %s", res.Phase, res.Size, res.Batch, res.Subject,
		nsDur(res.NsPerOp), mbCell(res), durCell(res.P50), durCell(res.P99))
	if res.Wrong > 0 {
		line += fmt.Sprintf("  WRONG %d: %s", res.Wrong, res.WrongExample)
	}
	r.logf("%s", line)
}

// size runs every phase of one record size once.
func (r *benchRun) size(ctx context.Context, size int) error {
	o := &r.o
	n := o.recordsFor(size)
	p := newBenchPayload(size, o.Seed)
	reads := o.wants(phLookup) || o.wants(phLookupTime) || o.wants(phRead) || o.wantsMount()
	var keepLogfs, keepRaw string
	defer func() {
		removeSynced(keepLogfs)
		removeSynced(keepRaw)
	}()
	for bi, batch := range o.Batches {
		last := bi == len(o.Batches)-1
		if !o.wants(phAppend) && !(reads && last) {
			continue
		}
		for _, subj := range []string{subjRaw, subjLogfs} {
			dir := filepath.Join(r.root, fmt.Sprintf("%s-%d-%d", subj, size, batch))
			res, err := r.appendPhase(ctx, subj, dir, p, n, batch, false)
			if err != nil {
				return fmt.Errorf("%s append size=%d batch=%d: %w", subj, size, batch, err)
			}
			if o.wants(phAppend) {
				r.add(res)
			}
			switch {
			case !(reads && last):
				if err := removeSynced(dir); err != nil {
					return err
				}
			case subj == subjLogfs:
				keepLogfs = dir
			default:
				keepRaw = dir
			}
		}
	}
	if o.wants(phAppendSync) {
		for _, batch := range o.Batches {
			for _, subj := range []string{subjRaw, subjLogfs} {
				dir := filepath.Join(r.root, fmt.Sprintf("%s-%d-%d-fsync", subj, size, batch))
				res, err := r.appendPhase(ctx, subj, dir, p, n, batch, true)
				if err != nil {
					return fmt.Errorf("%s append+fsync size=%d batch=%d: %w", subj, size, batch, err)
				}
				r.add(res)
				if err := removeSynced(dir); err != nil {
					return err
				}
			}
		}
	}
	if keepLogfs != "" && benchTamper != nil {
		if err := benchTamper(keepLogfs); err != nil {
			return err
		}
	}
	for _, subj := range []string{subjRaw, subjLogfs} {
		dir := keepLogfs
		if subj == subjRaw {
			dir = keepRaw
		}
		if dir == "" {
			continue
		}
		if err := r.readPhases(ctx, subj, dir, p, n); err != nil {
			return fmt.Errorf("%s size=%d: %w", subj, size, err)
		}
	}
	if o.wants(phMixed) {
		for _, batch := range o.Batches {
			dir := filepath.Join(r.root, fmt.Sprintf("mixed-%d-%d", size, batch))
			res, err := r.mixedPhase(ctx, dir, p, min(int64(o.MixedRecords), n), batch)
			if rerr := removeSynced(dir); err == nil {
				err = rerr
			}
			if err != nil {
				return fmt.Errorf("mixed size=%d batch=%d: %w", size, batch, err)
			}
			r.add(res)
		}
	}
	if o.wantsMount() && keepLogfs != "" {
		if err := r.mountPhases(ctx, keepLogfs, p, n); err != nil {
			return fmt.Errorf("mount size=%d: %w", size, err)
		}
	}
	return nil
}

func (r *benchRun) open(subj, dir string) (benchLog, error) {
	if subj == subjRaw {
		b, err := openRawBench(dir)
		if err != nil {
			return nil, err
		}
		// Reopening rebuilds the positions with one scan, outside timing.
		if st, err := b.f.Stat(); err == nil && st.Size() > 0 {
			if _, err := b.f.Seek(0, io.SeekStart); err != nil {
				return nil, errors.Join(err, b.close())
			}
			var pos int64
			if _, err := b.readAll(func(v []byte) { b.pos = append(b.pos, pos); pos += 8 + int64(len(v)) }); err != nil {
				return nil, errors.Join(err, b.close())
			}
			b.end = pos
		}
		return b, nil
	}
	return openLogfsBench(dir, r.o.SegmentBytes)
}

// appendPhase appends n records (or, with fsync, as many as FsyncTime
// allows) in calls of batch records to a fresh data set in dir.
func (r *benchRun) appendPhase(ctx context.Context, subj, dir string, p *benchPayload, n int64, batch int, fsync bool) (res benchResult, err error) {
	phase, what := phAppend, "Partition.Append"
	if subj == subjRaw {
		what = "write(2)"
	}
	if fsync {
		phase = phAppendSync
		what += map[string]string{subjRaw: " + fsync", subjLogfs: " + Partition.Sync"}[subj]
	}
	res = benchResult{Phase: phase, Size: p.size, Batch: batch, Subject: subj, What: what, LatUnit: "call"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return res, err
	}
	l, err := r.open(subj, dir)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := l.close(); err == nil {
			err = cerr
		}
		if err == nil {
			res.DiskSize, err = dirSize(dir)
		}
	}()
	bv := newBatchValues(p.size, batch)
	lat := make([]int64, 0, n/int64(batch)+1)
	runtime.GC()
	start := time.Now()
	var off int64
	for off < n {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		k := int(min(int64(batch), n-off))
		vals, recs := bv.prepare(p, off, k)
		t := time.Now()
		if err := l.append(vals, recs); err != nil {
			return res, err
		}
		if fsync {
			if err := l.sync(); err != nil {
				return res, err
			}
		}
		d := time.Since(t)
		res.Elapsed += d
		lat = append(lat, int64(d))
		off += int64(k)
		if fsync && time.Since(start) >= r.o.FsyncTime {
			break
		}
	}
	res.Ops, res.Records, res.Bytes = off, off, off*int64(p.size)
	res.P50, res.P99 = benchPercentiles(lat)
	if lb, ok := l.(*logfsBench); ok {
		if end := int64(lb.p.EndOffset()); end != off {
			return res, fmt.Errorf("wrong data: log ends at offset %d after %d records", end, off)
		}
		res.Verified = off
	}
	return res, nil
}

// readPhases runs lookup, lookup-time and read on the data set in dir.
func (r *benchRun) readPhases(ctx context.Context, subj, dir string, p *benchPayload, n int64) (err error) {
	o := &r.o
	if !o.wants(phLookup) && !o.wants(phLookupTime) && !o.wants(phRead) {
		return nil
	}
	l, err := r.open(subj, dir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := l.close(); err == nil {
			err = cerr
		}
	}()
	rng := rand.New(rand.NewPCG(o.Seed, uint64(p.size)))
	offs := make([]int64, o.Lookups)
	for i := range offs {
		offs[i] = rng.Int64N(n)
	}
	if o.wants(phLookup) {
		what := "Reader.Seek + Next"
		if subj == subjRaw {
			what = "pread(2) at a known position"
		}
		res := benchResult{Phase: phLookup, Size: p.size, Subject: subj, What: what, LatUnit: "lookup"}
		if err := settle(dir); err != nil {
			return err
		}
		lat := make([]int64, 0, len(offs))
		runtime.GC()
		start := time.Now()
		for _, off := range offs {
			if err := ctx.Err(); err != nil {
				return err
			}
			t := time.Now()
			v, err := l.lookup(off)
			d := time.Since(t)
			if err != nil {
				return fmt.Errorf("lookup %d: %w", off, err)
			}
			if err := p.check(v, off); err != nil {
				res.wrong(err)
			}
			res.Elapsed += d
			lat = append(lat, int64(d))
			if time.Since(start) >= o.PhaseTime {
				break
			}
		}
		res.Ops, res.Records = int64(len(lat)), int64(len(lat))
		res.Bytes, res.Verified = res.Records*int64(p.size), res.Records
		res.P50, res.P99 = benchPercentiles(lat)
		r.add(res)
	}
	if o.wants(phLookupTime) {
		if _, err := l.lookupTime(benchTS(0)); !errors.Is(err, errNoTimeLookup) {
			if err != nil {
				return fmt.Errorf("lookup-time: %w", err)
			}
			if err := settle(dir); err != nil {
				return err
			}
			res := benchResult{Phase: phLookupTime, Size: p.size, Subject: subj, What: "Partition.OffsetForTime", LatUnit: "lookup",
				Note: "baseline: raw lookup by offset (one pread)"}
			lat := make([]int64, 0, len(offs))
			runtime.GC()
			start := time.Now()
			for _, off := range offs {
				if err := ctx.Err(); err != nil {
					return err
				}
				target := benchTS(off) - rng.Int64N(2) // on a record, or between two
				t := time.Now()
				got, err := l.lookupTime(target)
				d := time.Since(t)
				if err != nil {
					return fmt.Errorf("lookup-time %d: %w", target, err)
				}
				if got != off {
					res.wrong(fmt.Errorf("time %d (of offset %d) found offset %d", target, off, got))
				}
				res.Elapsed += d
				lat = append(lat, int64(d))
				if time.Since(start) >= o.PhaseTime {
					break
				}
			}
			res.Ops, res.Verified = int64(len(lat)), int64(len(lat))
			res.P50, res.P99 = benchPercentiles(lat)
			r.add(res)
		}
	}
	if o.wants(phRead) {
		what := "Reader.Next from offset 0"
		if subj == subjRaw {
			what = "1 MiB read(2)s"
		}
		if err := settle(dir); err != nil {
			return err
		}
		res := benchResult{Phase: phRead, Size: p.size, Subject: subj, What: what}
		var next int64
		runtime.GC()
		t := time.Now()
		got, err := l.readAll(func(v []byte) {
			if !p.quick(v, next) {
				res.wrong(fmt.Errorf("offset %d: value fails the check (length, leading offset, last 8 bytes)", next))
			}
			next++
		})
		res.Elapsed = time.Since(t)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if got != n || next != n {
			return fmt.Errorf("wrong data: read %d records, want %d", got, n)
		}
		res.Ops, res.Records, res.Bytes, res.Verified = n, n, n*int64(p.size), n
		r.add(res)
	}
	return nil
}

// mixedPhase: one appender writes m records as fast as it can while
// Readers followers read from offset 0, each waiting in Reader.Wait at the
// end of the log. Lag is from the start of the Append call that wrote a
// record to a follower having it.
func (r *benchRun) mixedPhase(ctx context.Context, dir string, p *benchPayload, m int64, batch int) (res benchResult, err error) {
	readers := r.o.Readers
	res = benchResult{Phase: phMixed, Size: p.size, Batch: batch, Subject: subjLogfs, LatUnit: "call", Readers: readers,
		What: fmt.Sprintf("Partition.Append, %d followers in Reader.Wait", readers), Note: "baseline: raw append without readers"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	l, err := openLogfsBench(dir, r.o.SegmentBytes)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := l.close(); err == nil {
			err = cerr
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nb := (m + int64(batch) - 1) / int64(batch)
	appendAt := make([]atomic.Int64, nb) // ns since t0, +1 (0 = not yet)
	type out struct {
		lag          []int64
		done         time.Duration
		err          error
		wrong        int64
		wrongExample string
	}
	outs := make([]out, readers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range outs {
		o := &outs[i]
		wg.Go(func() {
			o.lag = make([]int64, 0, m)
			o.err = func() error {
				rd, err := l.p.NewReader(0)
				if err != nil {
					return err
				}
				defer rd.Close()
				for next := int64(0); next < m; {
					rec, err := rd.Next()
					if err == io.EOF {
						if err := rd.Wait(ctx); err != nil {
							return err
						}
						continue
					}
					if err != nil {
						return err
					}
					now := int64(time.Since(t0))
					if int64(rec.Offset) != next {
						return fmt.Errorf("wrong data: follower got offset %d, want %d", rec.Offset, next)
					}
					if !p.quick(rec.Value, next) {
						if o.wrong++; o.wrong == 1 {
							o.wrongExample = fmt.Sprintf("follower: offset %d fails the value check", next)
						}
					}
					if at := appendAt[next/int64(batch)].Load(); at > 0 {
						o.lag = append(o.lag, now-(at-1))
					}
					next++
				}
				return nil
			}()
			o.done = time.Since(t0)
		})
	}
	bv := newBatchValues(p.size, batch)
	lat := make([]int64, 0, nb)
	var off int64
	var appendErr error
	for bi := int64(0); off < m && appendErr == nil; bi++ {
		k := int(min(int64(batch), m-off))
		_, recs := bv.prepare(p, off, k)
		t := time.Now()
		appendAt[bi].Store(int64(t.Sub(t0)) + 1)
		if appendErr = l.append(nil, recs); appendErr == nil {
			lat = append(lat, int64(time.Since(t)))
			off += int64(k)
		}
	}
	res.Elapsed = time.Since(t0)
	if appendErr != nil {
		cancel()
	}
	wg.Wait()
	if appendErr != nil {
		return res, appendErr
	}
	var lags []int64
	var last time.Duration
	for _, o := range outs {
		if o.err != nil {
			return res, o.err
		}
		lags = append(lags, o.lag...)
		last = max(last, o.done)
		if o.wrong > 0 && res.Wrong == 0 {
			res.WrongExample = o.wrongExample
		}
		res.Wrong += o.wrong
	}
	res.Ops, res.Records, res.Bytes, res.Verified = m, m, m*int64(p.size), m*int64(readers)
	res.P50, res.P99 = benchPercentiles(lat)
	res.ReaderMBps = float64(int64(readers)*m*int64(p.size)) / 1e6 / last.Seconds()
	res.LagP50, res.LagP99 = benchPercentiles(lags)
	return res, nil
}

// ---------------------------------------------------------------------------
// Through the mount.

// benchMount is a `logfs mount` child process serving a data directory.
type benchMount struct {
	cmd    *exec.Cmd
	mp     string
	done   chan struct{}
	mu     sync.Mutex
	stderr strings.Builder
	err    error
	once   sync.Once
	stopEr error
}

// startMount runs EXE mount --data DIR -o OPTS MP and waits until it is
// ready. The child gets SIGTERM if this process dies.
func (r *benchRun) startMount(ctx context.Context, dataDir, mp string, opts string) (*benchMount, error) {
	if err := os.MkdirAll(mp, 0o755); err != nil {
		return nil, err
	}
	m := &benchMount{mp: mp, done: make(chan struct{})}
	m.cmd = exec.Command(r.o.Exe, "mount", "--data", dataDir, "-o", opts, mp)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	pipe, err := m.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	r.mountMu.Lock()
	r.mounts = append(r.mounts, m)
	r.mountMu.Unlock()
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		var once sync.Once
		for sc.Scan() {
			m.mu.Lock()
			m.stderr.WriteString(sc.Text() + "\n")
			m.mu.Unlock()
			if strings.Contains(sc.Text(), "ready:") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	select {
	case <-ready:
		return m, nil
	case <-m.done:
		return nil, fmt.Errorf("logfs mount exited before it was ready (%v): %s", m.err, strings.TrimSpace(m.errors()))
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("logfs mount not ready after 60 s: %s", m.errors())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *benchMount) errors() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stderr.String()
}

// stop unmounts (SIGTERM: the mount unmounts and closes the log cleanly),
// forcing a lazy unmount and a kill if that does not work in time.
func (m *benchMount) stop() error {
	m.once.Do(func() {
		select {
		case <-m.done:
		default:
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-m.done:
			case <-time.After(20 * time.Second):
				_ = unix.Unmount(m.mp, unix.MNT_DETACH)
				_ = m.cmd.Process.Kill()
				<-m.done
				m.stopEr = fmt.Errorf("logfs mount did not stop on SIGTERM: %s", m.errors())
			}
		}
		if len(mountsUnder(m.mp)) > 0 {
			if err := unix.Unmount(m.mp, unix.MNT_DETACH); err != nil {
				m.stopEr = errors.Join(m.stopEr, fmt.Errorf("unmount %s: %w", m.mp, err))
			}
		}
	})
	return m.stopEr
}

// mountsUnder lists the mount points at or under dir.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// runTool runs a command with stdout going to out and returns how long it
// took from start to exit.
func runTool(ctx context.Context, out io.Writer, name string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t := time.Now()
	err := cmd.Run()
	d := time.Since(t)
	if err != nil {
		return d, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return d, nil
}

// dropCache evicts a file's pages from the page cache, so that the next
// read of a mount's record file is answered by logfs, not by the kernel's
// copy of an earlier read (record files are opened with FOPEN_KEEP_CACHE).
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// mountPhases mounts the data set in dataDir and runs cat, tail, head and
// cat >> append on it and on plain files of the same content.
func (r *benchRun) mountPhases(ctx context.Context, dataDir string, p *benchPayload, n int64) (err error) {
	o := &r.o
	size := p.size
	work := filepath.Join(r.root, fmt.Sprintf("mount-%d", size))
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, removeSynced(work)) }()

	// The plain file: the same text the mount shows in offset/0.
	plain := filepath.Join(work, "plain.txt")
	if err := writeRendering(plain, p, 0, n); err != nil {
		return err
	}
	logs, err := filepath.Glob(filepath.Join(dataDir, benchTopic+"-0", "*"+layout.LogSuffix))
	if err != nil || len(logs) == 0 {
		return fmt.Errorf("no .log files in %s: %v", dataDir, err)
	}
	slices.Sort(logs)
	var logBytes int64
	for _, f := range logs {
		st, err := os.Stat(f)
		if err != nil {
			return err
		}
		logBytes += st.Size()
	}
	if err := settle(dataDir); err != nil {
		return err
	}
	if err := settle(work); err != nil {
		return err
	}
	mp := filepath.Join(work, "mnt")
	opts := fmt.Sprintf("segment.bytes=%d,flush.ms=-1,retention.ms=-1", o.SegmentBytes)
	m, err := r.startMount(ctx, dataDir, mp, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.stop()) }()
	rec0 := filepath.Join(mp, benchTopic, "0", "offset", "0")
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer devNull.Close()
	renderBytes := n * int64(size+1)

	if o.wants(phCat) {
		// One checked run of each, then timed runs into /dev/null.
		check := newExpectWriter(p, 0, n)
		if _, err := runTool(ctx, check, "cat", rec0); err != nil {
			return err
		}
		mres := benchResult{Phase: phCat, Size: size, Subject: subjMount, What: "cat offset/0 > /dev/null", Records: n, Bytes: renderBytes}
		if err := check.done(); err != nil {
			mres.wrong(fmt.Errorf("cat offset/0: %w", err))
		}
		mres.Verified = n
		var cnt countWriter
		if _, err := runTool(ctx, &cnt, "cat", logs...); err != nil {
			return err
		}
		pres := benchResult{Phase: phCat, Size: size, Subject: subjPlain, What: "cat *.log > /dev/null", Records: n, Bytes: logBytes,
			Note: "the partition's .log files"}
		if int64(cnt) != logBytes {
			pres.wrong(fmt.Errorf("cat of the .log files gave %d bytes, want %d", cnt, logBytes))
		}
		runs := max(o.Count, 3)
		mlat, plat := make([]int64, 0, runs), make([]int64, 0, runs)
		for range runs {
			if err := dropCache(rec0); err != nil {
				return err
			}
			d, err := runTool(ctx, devNull, "cat", rec0)
			if err != nil {
				return err
			}
			mlat = append(mlat, int64(d))
			if d, err = runTool(ctx, devNull, "cat", logs...); err != nil {
				return err
			}
			plat = append(plat, int64(d))
		}
		for _, x := range []struct {
			res *benchResult
			lat []int64
		}{{&mres, mlat}, {&pres, plat}} {
			slices.Sort(x.lat)
			x.res.Elapsed = time.Duration(x.lat[(len(x.lat)-1)/2]) // median run
			x.res.Ops = 1
			x.res.LatUnit = "run"
			x.res.P50, x.res.P99 = benchPercentiles(x.lat)
			x.res.Note = strings.TrimPrefix(x.res.Note+fmt.Sprintf("; median of %d runs", runs), "; ")
			r.add(*x.res)
		}
	}

	if o.wants(phTail) {
		k := min(n, 10)
		mres := benchResult{Phase: phTail, Size: size, Subject: subjMount, What: "tail -n 10 offset/0", LatUnit: "run", Note: "FUSE page cache dropped before each run"}
		pres := benchResult{Phase: phTail, Size: size, Subject: subjPlain, What: "tail -n 10 plain.txt", LatUnit: "run"}
		mlat, plat := make([]int64, 0, o.ToolRuns), make([]int64, 0, o.ToolRuns)
		for range o.ToolRuns {
			if err := dropCache(rec0); err != nil {
				return err
			}
			for _, x := range []struct {
				res  *benchResult
				lat  *[]int64
				file string
			}{{&mres, &mlat, rec0}, {&pres, &plat, plain}} {
				check := newExpectWriter(p, n-k, n)
				d, err := runTool(ctx, check, "tail", "-n", "10", x.file)
				if err != nil {
					return err
				}
				if err := check.done(); err != nil {
					x.res.wrong(fmt.Errorf("tail -n 10 %s: %w", x.file, err))
				}
				x.res.Verified++
				x.res.Elapsed += d
				*x.lat = append(*x.lat, int64(d))
			}
		}
		for _, x := range []struct {
			res *benchResult
			lat []int64
		}{{&mres, mlat}, {&pres, plat}} {
			x.res.Ops = int64(len(x.lat))
			x.res.P50, x.res.P99 = benchPercentiles(x.lat)
			r.add(*x.res)
		}
	}

	if o.wants(phHead) {
		rng := rand.New(rand.NewPCG(o.Seed, uint64(size)+1))
		mres := benchResult{Phase: phHead, Size: size, Subject: subjMount, What: "head -n 1 offset/N, random N", LatUnit: "run"}
		pres := benchResult{Phase: phHead, Size: size, Subject: subjPlain, What: "head -n 1 plain.txt", LatUnit: "run", Note: "first line: no lookup"}
		mlat, plat := make([]int64, 0, o.ToolRuns), make([]int64, 0, o.ToolRuns)
		for range o.ToolRuns {
			off := rng.Int64N(n)
			for _, x := range []struct {
				res  *benchResult
				lat  *[]int64
				file string
				off  int64
			}{{&mres, &mlat, filepath.Join(mp, benchTopic, "0", "offset", strconv.FormatInt(off, 10)), off}, {&pres, &plat, plain, 0}} {
				check := newExpectWriter(p, x.off, x.off+1)
				d, err := runTool(ctx, check, "head", "-n", "1", x.file)
				if err != nil {
					return err
				}
				if err := check.done(); err != nil {
					x.res.wrong(fmt.Errorf("head -n 1 %s: %w", x.file, err))
				}
				x.res.Verified++
				x.res.Elapsed += d
				*x.lat = append(*x.lat, int64(d))
			}
		}
		for _, x := range []struct {
			res *benchResult
			lat []int64
		}{{&mres, mlat}, {&pres, plat}} {
			x.res.Ops = int64(len(x.lat))
			x.res.P50, x.res.P99 = benchPercentiles(x.lat)
			r.add(*x.res)
		}
	}

	if o.wants(phCatAppend) {
		if err := r.catAppend(ctx, work, mp, p, n); err != nil {
			return err
		}
	}
	return nil
}

// catAppend measures `cat FILE >> TOPIC/0/append` into a new topic of the
// mount against `cat FILE >> plain` and checks what the mount appended.
func (r *benchRun) catAppend(ctx context.Context, work, mp string, p *benchPayload, n int64) error {
	size := p.size
	input := filepath.Join(work, "input.txt")
	if err := writeRendering(input, p, 0, n); err != nil {
		return err
	}
	inBytes := n * int64(size+1)
	topic := fmt.Sprintf("append-%d", size)
	if err := os.Mkdir(filepath.Join(mp, topic), 0o755); err != nil {
		return fmt.Errorf("create topic through the mount: %w", err)
	}
	appendFile := filepath.Join(mp, topic, "0", "append")
	plainOut := filepath.Join(work, "appended.txt")
	if err := settle(work); err != nil {
		return err
	}
	runs := max(r.o.Count, 3)
	mres := benchResult{Phase: phCatAppend, Size: size, Subject: subjMount, What: "cat input >> TOPIC/0/append", LatUnit: "run"}
	pres := benchResult{Phase: phCatAppend, Size: size, Subject: subjPlain, What: "cat input >> plain file", LatUnit: "run"}
	mlat, plat := make([]int64, 0, runs), make([]int64, 0, runs)
	for range runs {
		for _, x := range []struct {
			lat  *[]int64
			file string
		}{{&mlat, appendFile}, {&plat, plainOut}} {
			f, err := os.OpenFile(x.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			t := time.Now()
			if _, err := runTool(ctx, f, "cat", input); err != nil {
				f.Close()
				return err
			}
			err = f.Close() // the shell closes after cat exits; a partial line would be appended here
			d := time.Since(t)
			if err != nil {
				return err
			}
			*x.lat = append(*x.lat, int64(d))
		}
	}
	// What the mount appended: `runs` copies of the input, record by record.
	want := int64(runs) * n
	check := newRepeatWriter(p, n, runs)
	rf, err := os.Open(filepath.Join(mp, topic, "0", "offset", "0"))
	if err != nil {
		return err
	}
	_, err = io.Copy(check, rf)
	rf.Close()
	if err != nil {
		return err
	}
	if err := check.done(); err != nil {
		mres.wrong(fmt.Errorf("offset/0 of the appended topic: %w", err))
	}
	mres.Verified = want
	if st, err := os.Stat(plainOut); err != nil {
		return err
	} else if st.Size() != int64(runs)*inBytes {
		pres.wrong(fmt.Errorf("plain file holds %d bytes, want %d", st.Size(), int64(runs)*inBytes))
	}
	for _, x := range []struct {
		res *benchResult
		lat []int64
	}{{&mres, mlat}, {&pres, plat}} {
		slices.Sort(x.lat)
		x.res.Elapsed = time.Duration(x.lat[(len(x.lat)-1)/2])
		x.res.Ops, x.res.Records, x.res.Bytes = 1, n, inBytes
		x.res.P50, x.res.P99 = benchPercentiles(x.lat)
		x.res.Note = fmt.Sprintf("%s input; median of %d runs", sizeCell(inBytes), runs)
		r.add(*x.res)
	}
	return nil
}

// repeatWriter checks `copies` repetitions of the rendering of [0, n).
type repeatWriter struct {
	p      *benchPayload
	n      int64
	left   int
	cur    *expectWriter
	copies int
}

func newRepeatWriter(p *benchPayload, n int64, copies int) *repeatWriter {
	return &repeatWriter{p: p, n: n, left: copies - 1, cur: newExpectWriter(p, 0, n), copies: copies}
}

func (w *repeatWriter) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 && w.cur.err == nil {
		k := len(b)
		if rest := (w.cur.end-w.cur.next)*int64(w.p.size+1) + int64(len(w.cur.pending)); int64(k) > rest {
			k = int(rest)
		}
		if k == 0 {
			if w.left == 0 {
				_, _ = w.cur.Write(b) // reports the excess
				break
			}
			w.left--
			w.cur = newExpectWriter(w.p, 0, w.n)
			continue
		}
		_, _ = w.cur.Write(b[:k])
		b = b[k:]
	}
	return total, nil
}

func (w *repeatWriter) done() error {
	if err := w.cur.done(); err != nil {
		return err
	}
	if w.left > 0 {
		return fmt.Errorf("%d of %d copies missing", w.left, w.copies)
	}
	return nil
}

type countWriter int64

func (c *countWriter) Write(b []byte) (int, error) { *c += countWriter(len(b)); return len(b), nil }

// writeRendering writes the Values rendering of [from, to) to a new file.
func writeRendering(path string, p *benchPayload, from, to int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var line []byte
	for off := from; off < to; off++ {
		line = p.appendLine(line[:0], off)
		if _, err := w.Write(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ---------------------------------------------------------------------------
// Memory of a mount of many segments.

const (
	memTopic      = "mem"
	memPartitions = 10
	memRecordSize = 100
	memBatch      = 8 // one batch a segment: segment.bytes below two batches
)

func (r *benchRun) memory(ctx context.Context) (err error) {
	o := &r.o
	work := filepath.Join(r.root, "memory")
	dataDir := filepath.Join(work, "data")
	defer func() { err = errors.Join(err, removeSynced(work)) }()
	mem := &benchMemory{Segments: o.Segments, Partitions: memPartitions}
	r.rep.Memory = mem
	p := newBenchPayload(memRecordSize, o.Seed)
	perPart := o.Segments / memPartitions
	mem.Segments = perPart * memPartitions

	// Build: one batch per segment.
	t := time.Now()
	l, err := storage.Open(dataDir, storage.Options{Logger: slog.New(slog.DiscardHandler), RetentionCheckInterval: -1})
	if err != nil {
		return err
	}
	bv := newBatchValues(memRecordSize, memBatch)
	batchBytes := int64(record.HeaderSize + memBatch*(memRecordSize+16))
	top, err := l.CreateTopic(memTopic, memPartitions, storage.Overrides{"segment.bytes": batchBytes + batchBytes/2, "flush.ms": -1, "retention.ms": -1})
	if err != nil {
		return errors.Join(err, l.Close())
	}
	for _, part := range top.Partitions() {
		for s := range perPart {
			if err := ctx.Err(); err != nil {
				return errors.Join(err, l.Close())
			}
			_, recs := bv.prepare(p, int64(s*memBatch), memBatch)
			if _, err := part.Append(recs); err != nil {
				return errors.Join(err, l.Close())
			}
		}
		if got := len(part.SegmentBases()); got != perPart {
			return errors.Join(fmt.Errorf("partition %d has %d segments, want %d (one batch each)", part.ID(), got, perPart), l.Close())
		}
	}
	if err := l.Close(); err != nil {
		return err
	}
	mem.BuildS = time.Since(t).Seconds()
	r.logf("memory: built %d segments in %d partitions in %.1fs", mem.Segments, memPartitions, mem.BuildS)

	mp := filepath.Join(work, "mnt")
	m, err := r.startMount(ctx, dataDir, mp, "retention.ms=-1")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.stop()) }()
	pid := m.cmd.Process.Pid
	step := func(name string) error {
		st, err := procMemory(pid, dataDir)
		if err != nil {
			return err
		}
		st.Step = name
		mem.Steps = append(mem.Steps, st)
		r.logf("memory: %-28s rss %s, peak %s, %d maps, %d of index files (%d segments)", name, sizeCell(st.RSS), sizeCell(st.HWM), st.Maps, st.IndexMaps, st.SegsMapped)
		return nil
	}
	if err := step("mounted"); err != nil {
		return err
	}
	var lsOut countWriter
	if _, err := runTool(ctx, &lsOut, "ls", "-R", mp); err != nil {
		return err
	}
	for i := range memPartitions {
		ents, err := os.ReadDir(filepath.Join(mp, memTopic, strconv.Itoa(i), "offset"))
		if err != nil {
			return err
		}
		mem.Verified++
		if len(ents) != perPart+2 {
			mem.Wrong++
			mem.WrongExample = fmt.Sprintf("offset/ of partition %d lists %d names, want %d segments + earliest, latest", i, len(ents), perPart)
		}
	}
	if err := step("after ls -R"); err != nil {
		return err
	}

	// Reads: head -n 1 at three segment bases and tail -n 10 in partitions
	// 0-2; all of partition 3 with cat.
	read := map[string]bool{} // "partition/base" of every segment read
	segOf := func(part int, off int64) string {
		return fmt.Sprintf("%d/%d", part, off/memBatch*memBatch)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 99))
	n := int64(perPart * memBatch)
	check := func(what string, w *expectWriter, err error) error {
		if err != nil {
			return err
		}
		mem.Verified++
		if werr := w.done(); werr != nil && mem.Wrong == 0 {
			mem.WrongExample = what + ": " + werr.Error()
		}
		if w.err != nil {
			mem.Wrong++
		}
		return nil
	}
	for part := range 3 {
		dir := filepath.Join(mp, memTopic, strconv.Itoa(part), "offset")
		for range 3 {
			base := rng.Int64N(int64(perPart)) * memBatch
			w := newExpectWriter(p, base, base+1)
			_, err := runTool(ctx, w, "head", "-n", "1", filepath.Join(dir, strconv.FormatInt(base, 10)))
			if err := check("head", w, err); err != nil {
				return err
			}
			read[segOf(part, base)] = true
		}
		w := newExpectWriter(p, n-10, n)
		_, err := runTool(ctx, w, "tail", "-n", "10", filepath.Join(dir, "0"))
		if err := check("tail", w, err); err != nil {
			return err
		}
		for off := n - 10; off < n; off++ {
			read[segOf(part, off)] = true
		}
	}
	w := newExpectWriter(p, 0, n)
	_, err = runTool(ctx, w, "cat", filepath.Join(mp, memTopic, "3", "offset", "0"))
	if err := check("cat", w, err); err != nil {
		return err
	}
	for off := int64(0); off < n; off += memBatch {
		read[segOf(3, off)] = true
	}
	if err := step("after reads"); err != nil {
		return err
	}
	mem.SegmentsRead = len(read)
	mapped, err := mappedSegments(pid, dataDir)
	if err != nil {
		return err
	}
	mem.Mapped = len(mapped)
	for _, s := range mapped {
		if !read[s] {
			mem.MappedUnread++
			if len(mem.Unread) < 5 {
				mem.Unread = append(mem.Unread, s)
			}
		}
	}
	mem.PeakRSS = mem.Steps[len(mem.Steps)-1].HWM
	return nil
}

// procMemory reads VmRSS and VmHWM of a process and counts its memory
// mappings, and those of the index files under dataDir.
func procMemory(pid int, dataDir string) (memStep, error) {
	var st memStep
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			st.RSS = kb << 10
		case "VmHWM":
			st.HWM = kb << 10
		}
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return st, err
	}
	segs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(maps)), "\n") {
		st.Maps++
		if s, ok := mappedIndexSegment(line, dataDir); ok {
			st.IndexMaps++
			segs[s] = true
		}
	}
	st.SegsMapped = len(segs)
	return st, nil
}

// mappedSegments lists "partition/base" of every segment of the memory
// data set with a mapped index file.
func mappedSegments(pid int, dataDir string) ([]string, error) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	segs := map[string]bool{}
	for _, line := range strings.Split(string(maps), "\n") {
		if s, ok := mappedIndexSegment(line, dataDir); ok {
			segs[s] = true
		}
	}
	out := make([]string, 0, len(segs))
	for s := range segs {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

// mappedIndexSegment parses a /proc/PID/maps line of an index file of
// dataDir/mem-P/ into "P/base".
func mappedIndexSegment(line, dataDir string) (string, bool) {
	i := strings.Index(line, dataDir+"/")
	if i < 0 {
		return "", false
	}
	path := strings.TrimSuffix(line[i:], " (deleted)")
	name := filepath.Base(path)
	var base string
	var ok bool
	if base, ok = strings.CutSuffix(name, layout.IndexSuffix); !ok {
		if base, ok = strings.CutSuffix(name, layout.TimeIndexSuffix); !ok {
			return "", false
		}
	}
	b, err := strconv.ParseInt(base, 10, 64)
	part, pok := strings.CutPrefix(filepath.Base(filepath.Dir(path)), memTopic+"-")
	if err != nil || !pok {
		return "", false
	}
	return part + "/" + strconv.FormatInt(b, 10), true
}

// ---------------------------------------------------------------------------
// Helpers.

// settle makes every file of dir durable and reads it once, so that the
// next phase starts without pending writeback and with a warm page cache,
// the same for every subject.
func settle(dir string) error {
	buf := make([]byte, 1<<20)
	mounts := mountsUnder(dir)
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && slices.Contains(mounts, path) {
			return filepath.SkipDir // never through a mount
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return err
		}
		for {
			if _, err := f.Read(buf); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
		}
	})
}

// removeSynced removes a data set and commits the removal, so that freeing
// its blocks is not paid inside the next measurement.
func removeSynced(dir string) error {
	if dir == "" {
		return nil
	}
	if mps := mountsUnder(dir); len(mps) > 0 {
		return fmt.Errorf("not removing %s: %s still mounted", dir, strings.Join(mps, ", "))
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	return total, err
}

// benchPercentiles returns the nearest-rank p50 and p99, sorting samples.
func benchPercentiles(samples []int64) (p50, p99 time.Duration) {
	if len(samples) == 0 {
		return 0, 0
	}
	slices.Sort(samples)
	at := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(samples)))) - 1
		return time.Duration(samples[max(0, min(i, len(samples)-1))])
	}
	return at(0.50), at(0.99)
}

// benchMedians folds the --count runs of every cell into the run with the
// median time per operation, keeping the extremes and every wrong answer.
func benchMedians(rs []benchResult) []benchResult {
	type key struct {
		phase, subj string
		size, batch int
	}
	groups := map[key][]benchResult{}
	var order []key
	for _, r := range rs {
		k := key{r.Phase, r.Subject, r.Size, r.Batch}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]benchResult, 0, len(order))
	for _, k := range order {
		g := groups[k]
		slices.SortStableFunc(g, func(a, b benchResult) int { return cmp.Compare(a.NsPerOp, b.NsPerOp) })
		m := g[(len(g)-1)/2]
		m.Runs, m.MinNsOp, m.MaxNsOp = len(g), g[0].NsPerOp, g[len(g)-1].NsPerOp
		m.Wrong, m.WrongExample = 0, ""
		for _, r := range g {
			if r.Wrong > 0 && m.WrongExample == "" {
				m.WrongExample = r.WrongExample
			}
			m.Wrong += r.Wrong
		}
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b benchResult) int {
		return cmp.Or(cmp.Compare(a.Size, b.Size), cmp.Compare(slices.Index(allPhases, a.Phase), slices.Index(allPhases, b.Phase)),
			cmp.Compare(a.Batch, b.Batch), cmp.Compare(subjRank(a.Subject), subjRank(b.Subject)))
	})
	return out
}

func subjRank(s string) int {
	return slices.Index([]string{subjLogfs, subjMount, subjRaw, subjPlain}, s)
}

// benchRatios sets Baseline and VsBase on logfs and mount rows.
func benchRatios(rs []benchResult) {
	find := func(phase, subj string, size, batch int) *benchResult {
		for i := range rs {
			if r := &rs[i]; r.Phase == phase && r.Subject == subj && r.Size == size && r.Batch == batch && r.Elapsed > 0 {
				return r
			}
		}
		return nil
	}
	for i := range rs {
		r := &rs[i]
		var base *benchResult
		switch {
		case r.Subject == subjMount:
			base = find(r.Phase, subjPlain, r.Size, r.Batch)
		case r.Subject != subjLogfs:
		case r.Phase == phLookupTime:
			base = find(phLookup, subjRaw, r.Size, 0)
		case r.Phase == phMixed:
			base = find(phAppend, subjRaw, r.Size, r.Batch)
		default:
			base = find(r.Phase, subjRaw, r.Size, r.Batch)
		}
		if base != nil && r.Elapsed > 0 {
			r.Baseline = base.Subject
			r.VsBase = base.unitNs() / r.unitNs()
		}
	}
}

// benchTargets checks the project's targets that this command measures.
// Those against liftbridge are checked by the bench/peers harness.
func benchTargets(rep *benchReport) []benchTarget {
	var ts []benchTarget
	add := func(target, measured string, v float64, met bool) {
		ts = append(ts, benchTarget{Target: target, Measured: measured, Value: v, Met: met})
	}
	for _, r := range rep.Results {
		where := fmt.Sprintf("%d B", r.Size)
		switch {
		case r.Subject == subjLogfs && r.Phase == phAppend && r.Batch > 1 && r.VsBase > 0:
			add("batched append >= 0.7x raw", fmt.Sprintf("%s, batch %d: %.2fx raw (%.0f vs %.0f MB/s)", where, r.Batch, r.VsBase, r.MBps, r.MBps/r.VsBase), r.VsBase, r.VsBase >= 0.7)
		case r.Subject == subjLogfs && r.Phase == phRead && r.VsBase > 0:
			add("sequential read >= 0.7x raw", fmt.Sprintf("%s: %.2fx raw (%.0f vs %.0f MB/s)", where, r.VsBase, r.MBps, r.MBps/r.VsBase), r.VsBase, r.VsBase >= 0.7)
		case r.Subject == subjMount && r.Phase == phCat:
			add("cat offset/0 >= 1 GB/s", fmt.Sprintf("%s: %.0f MB/s", where, r.MBps), r.MBps, r.MBps >= 1000)
			if r.VsBase > 0 {
				add("cat offset/0 >= 0.4x cat of the .log files", fmt.Sprintf("%s: %.2fx (same records)", where, r.VsBase), r.VsBase, r.VsBase >= 0.4)
			}
		case r.Subject == subjMount && r.Phase == phTail:
			add("tail -n 10 offset/0 < 20 ms", fmt.Sprintf("%s: p50 %s, p99 %s", where, durCell(r.P50), durCell(r.P99)), r.P50.Seconds()*1e3, r.P50 < 20*time.Millisecond)
		case r.Subject == subjMount && r.Phase == phCatAppend:
			add("cat >> append >= 300 MB/s", fmt.Sprintf("%s: %.0f MB/s", where, r.MBps), r.MBps, r.MBps >= 300)
		}
	}
	if m := rep.Memory; m != nil && len(m.Steps) > 0 {
		add(fmt.Sprintf("mount of %d segments < 150 MB RSS", m.Segments), fmt.Sprintf("peak RSS %s", sizeCell(m.PeakRSS)), float64(m.PeakRSS)/1e6, m.PeakRSS < 150e6)
		add("index mappings only for segments read", fmt.Sprintf("%d segments mapped, %d read, %d mapped unread", m.Mapped, m.SegmentsRead, m.MappedUnread), float64(m.MappedUnread), m.MappedUnread == 0)
	}
	return ts
}

// ---------------------------------------------------------------------------
// Output.

func writeBenchJSON(w io.Writer, rep *benchReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeBenchTable(w io.Writer, rep *benchReport) error {
	m, o := rep.Machine, rep.Options
	fmt.Fprintf(w, "logfs bench: %s/%s, %s, %d CPUs (GOMAXPROCS %d), kernel %s, %s, %s RAM, data on %s\n",
		m.GOOS, m.GOARCH, m.GoVersion, m.NumCPU, m.GOMAXPROCS, m.Kernel, m.CPU, m.MemTotal, m.DataFS)
	fmt.Fprintf(w, "load average %s at start, %s at end; took %.0fs; segment.bytes %s, flush.ms=-1; %d run(s) per cell, median shown\n",
		m.LoadAvg, rep.LoadEnd, rep.ElapsedS, sizeCell(o.SegmentBytes), o.Count)
	fmt.Fprintln(w, "time/op: per record (append, read, mixed), lookup, or tool run; MB/s: value bytes (tools: bytes in or out);")
	fmt.Fprintln(w, "x base: baseline's time per record (per op when no records move) / this row's: > 1 is faster than the baseline;")
	fmt.Fprintln(w, "raw = write(2)/read(2)/pread(2) of the same values, no index; plain = the same tool on a plain file.")
	for i, size := range o.Sizes {
		var rows []benchResult
		for _, r := range rep.Results {
			if r.Size == size {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n== record size %d B: %d records (%s of values) ==\n", size, rep.Records[i], sizeCell(rep.Records[i]*int64(size)))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "phase\tbatch\tsubject\tops\ttime/op\tMB/s\trec/s\tp50\tp99\tx base\tchecked\tmeasured\tnote\t")
		prev := ""
		for _, r := range rows {
			group := fmt.Sprintf("%s/%d", r.Phase, r.Batch)
			if prev != "" && group != prev {
				fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t\t\t\t")
			}
			prev = group
			batch := "-"
			if r.Batch > 0 {
				batch = strconv.Itoa(r.Batch)
			}
			vs := "-"
			if r.VsBase > 0 {
				vs = fmt.Sprintf("%.2f %s", r.VsBase, r.Baseline)
			}
			note := r.Note
			if r.Phase == phMixed {
				note = fmt.Sprintf("readers %.0f MB/s, lag p50 %s p99 %s; %s", r.ReaderMBps, durCell(r.LagP50), durCell(r.LagP99), note)
			}
			if r.DiskSize > 0 && r.Bytes > 0 {
				note = strings.TrimPrefix(note+fmt.Sprintf("; disk %.2fx values", float64(r.DiskSize)/float64(r.Bytes)), "; ")
			}
			if r.Wrong > 0 {
				note = fmt.Sprintf("WRONG %d: %s", r.Wrong, r.WrongExample)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.Phase, batch, r.Subject, r.Ops, nsDur(r.NsPerOp),
				mbCell(r), countCell(r.RecPerS), durCell(r.P50), durCell(r.P99), vs, r.Verified, r.What, note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if mem := rep.Memory; mem != nil {
		fmt.Fprintf(w, "\n== memory: a mount of %d segments (%d partitions, one batch of %d x %d B each; built in %.1fs) ==\n",
			mem.Segments, mem.Partitions, memBatch, memRecordSize, mem.BuildS)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "step\tVmRSS\tVmHWM\tmaps\tindex maps\tsegments mapped\t")
		for _, s := range mem.Steps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t\n", s.Step, sizeCell(s.RSS), sizeCell(s.HWM), s.Maps, s.IndexMaps, s.SegsMapped)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "reads: head -n 1 at 3 segment bases and tail -n 10 in partitions 0-2, cat offset/0 of partition 3: %d segments read, %d mapped, %d mapped but not read%s; %d outputs checked\n",
			mem.SegmentsRead, mem.Mapped, mem.MappedUnread, strings.Join(append([]string{""}, mem.Unread...), " "), mem.Verified)
		if mem.Wrong > 0 {
			fmt.Fprintf(w, "WRONG %d: %s\n", mem.Wrong, mem.WrongExample)
		}
	}
	if len(rep.Targets) > 0 {
		fmt.Fprintf(w, "\n== targets (those against liftbridge: bench/peers) ==\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range rep.Targets {
			met := "MISSED"
			if t.Met {
				met = "met"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", met, t.Target, t.Measured)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if rep.Wrong > 0 {
		fmt.Fprintf(w, "\n== WRONG ANSWERS: %d ==\n", rep.Wrong)
	}
	return nil
}

func nsDur(ns float64) string {
	if ns <= 0 {
		return "-"
	}
	return durCell(time.Duration(ns + 0.5))
}

func durCell(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.2fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func mbCell(r benchResult) string {
	if r.Bytes == 0 || r.MBps == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", r.MBps)
}

func countCell(x float64) string {
	switch {
	case x <= 0:
		return "-"
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

func sizeCell(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
