package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Report is what a run measured. WriteTable prints it for people,
// WriteJSON for machines; the JSON names are part of the output format.
type Report struct {
	Machine  Machine   `json:"machine"`
	Options  Options   `json:"options"`
	Records  []int64   `json:"records_per_size"` // records of every data set, by Options.Sizes
	Started  time.Time `json:"started"`
	ElapsedS float64   `json:"elapsed_s"`
	LoadEnd  string    `json:"loadavg_end"`
	// Results has one row per cell (phase, record size, batch, subject):
	// the median of its Options.Count runs, sorted by size, phase, batch
	// and subject.
	Results []Result `json:"results"`
	Memory  *Memory  `json:"memory,omitempty"` // the memory phase, if run
	// MountRSS is the mount process's resident memory before and after
	// the readers phase, by record size: it must not grow with what the
	// mount served (the kernel's page cache may).
	MountRSS []MountRSS `json:"mount_rss,omitempty"`
	Targets  []Target   `json:"targets"`
	Wrong    int64      `json:"wrong_answers"` // over all results and memory
}

// Err returns an error wrapping ErrWrongAnswer when the run found a wrong
// answer, nil otherwise. Its text points at the WRONG notes of the table.
func (rep *Report) Err() error {
	if rep.Wrong == 0 {
		return nil
	}
	s := "s"
	if rep.Wrong == 1 {
		s = ""
	}
	return fmt.Errorf("%d wrong answer%s: %w (see WRONG above)", rep.Wrong, s, ErrWrongAnswer)
}

// Result is one measured cell: a phase, a record size, a batch size and a
// subject.
type Result struct {
	Phase   string `json:"phase"`
	Size    int    `json:"record_size"`
	Batch   int    `json:"batch,omitempty"`
	Subject string `json:"subject"`
	// Case tells the cells of one phase apart (the reader program, the
	// kind of read), and Pass, on mount rows, whether the kernel had the
	// file cached (PassFirst, PassSecond).
	Case string `json:"case,omitempty"`
	Pass string `json:"pass,omitempty"`
	What string `json:"what"` // the command or call measured

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

func (r *Result) finish() {
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
func (r *Result) unitNs() float64 {
	if r.Records > 0 {
		return float64(r.Elapsed) / float64(r.Records)
	}
	return r.NsPerOp
}

func (r *Result) wrong(err error) {
	if r.Wrong == 0 {
		r.WrongExample = err.Error()
	}
	r.Wrong++
}

// MountRSS is the mount's VmRSS around the readers phase of one record
// size, which served Served bytes.
type MountRSS struct {
	Size   int   `json:"record_size"`
	Before int64 `json:"before_bytes"`
	After  int64 `json:"after_bytes"`
	Served int64 `json:"served_bytes"`
}

// Memory is what the memory phase found.
type Memory struct {
	Segments   int          `json:"segments"`
	Partitions int          `json:"partitions"`
	BuildS     float64      `json:"build_s"`
	Steps      []MemoryStep `json:"steps"`
	// SegmentsRead counts the segments the reads touched; Mapped those
	// whose files the mount has mapped at the end; MappedUnread those
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

// MemoryStep is the mount process after one step of the memory phase.
type MemoryStep struct {
	Step       string `json:"step"`
	RSS        int64  `json:"rss_bytes"`         // VmRSS
	HWM        int64  `json:"peak_rss_bytes"`    // VmHWM
	Maps       int    `json:"maps"`              // lines of /proc/PID/maps
	FileMaps   int    `json:"segment_file_maps"` // of them, segment files: .log, .index, .timeindex
	SegsMapped int    `json:"segments_mapped"`   // segments with a mapped file
}

// Target is one of the performance targets of the project, with the
// figure this run measured for it.
type Target struct {
	Target   string  `json:"target"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Met      bool    `json:"met"`
}

// Percentiles returns the nearest-rank p50 and p99 of samples, in ns,
// sorting them in place; both are 0 without samples. The bench/peers
// harness reports its latencies with it too.
func Percentiles(samples []int64) (p50, p99 time.Duration) {
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

// MedianRuns folds the repeated runs of every cell into one result, the
// cells in the order they first appear in rs; key tells a result's cell.
// The runs of a cell are sorted by nsPerOp, fastest first (runs of equal
// time keep their order), and fold gets the run of median time, the lower
// middle one for an even count, with them all: it returns the result the
// report keeps, noting on it what it reports of all runs (their count, the
// first and last of runs as the extremes, SumWrong). The bench/peers
// harness folds its runs with it too.
func MedianRuns[R any, K comparable](rs []R, key func(R) K, nsPerOp func(R) float64, fold func(median R, runs []R) R) []R {
	cells := map[K][]R{}
	var order []K
	for _, r := range rs {
		k := key(r)
		if cells[k] == nil {
			order = append(order, k)
		}
		cells[k] = append(cells[k], r)
	}
	out := make([]R, 0, len(order))
	for _, k := range order {
		runs := cells[k]
		slices.SortStableFunc(runs, func(a, b R) int { return cmp.Compare(nsPerOp(a), nsPerOp(b)) })
		out = append(out, fold(runs[(len(runs)-1)/2], runs))
	}
	return out
}

// SumWrong returns the wrong answers of all runs, and the example of the
// first run that has any; wrong tells a run's count and example.
func SumWrong[R any](runs []R, wrong func(R) (int64, string)) (n int64, example string) {
	for _, r := range runs {
		k, ex := wrong(r)
		if k > 0 && example == "" {
			example = ex
		}
		n += k
	}
	return n, example
}

// medians folds the Count runs of every cell into the run with the median
// time per operation, keeping the extremes and every wrong answer, and
// sorts the cells in report order.
func medians(rs []Result) []Result {
	type cell struct {
		phase, subj, c, pass string
		size, batch          int
	}
	out := MedianRuns(rs, func(r Result) cell { return cell{r.Phase, r.Subject, r.Case, r.Pass, r.Size, r.Batch} },
		func(r Result) float64 { return r.NsPerOp },
		func(m Result, runs []Result) Result {
			m.Runs, m.MinNsOp, m.MaxNsOp = len(runs), runs[0].NsPerOp, runs[len(runs)-1].NsPerOp
			m.Wrong, m.WrongExample = SumWrong(runs, func(r Result) (int64, string) { return r.Wrong, r.WrongExample })
			return m
		})
	slices.SortStableFunc(out, func(a, b Result) int {
		return cmp.Or(cmp.Compare(a.Size, b.Size), cmp.Compare(slices.Index(allPhases, a.Phase), slices.Index(allPhases, b.Phase)),
			cmp.Compare(a.Batch, b.Batch), cmp.Compare(caseRank(rs, a), caseRank(rs, b)),
			cmp.Compare(subjRank(a.Subject), subjRank(b.Subject)), cmp.Compare(a.Pass, b.Pass))
	})
	return out
}

func subjRank(s string) int {
	return slices.Index([]string{SubjectLogfs, SubjectMount, SubjectRaw, SubjectFloor, SubjectPlain}, s)
}

// caseRank orders the cases of a phase as they were first measured.
func caseRank(rs []Result, r Result) int {
	return slices.IndexFunc(rs, func(x Result) bool { return x.Phase == r.Phase && x.Size == r.Size && x.Case == r.Case })
}

// ratios sets Baseline and VsBase on logfs and mount rows.
func ratios(rs []Result) {
	find := func(phase, subj string, size, batch int) *Result {
		for i := range rs {
			if r := &rs[i]; r.Phase == phase && r.Subject == subj && r.Size == size && r.Batch == batch && r.Elapsed > 0 {
				return r
			}
		}
		return nil
	}
	findCase := func(like *Result, subj, c, pass string) *Result {
		for i := range rs {
			if r := &rs[i]; r.Phase == like.Phase && r.Size == like.Size && r.Subject == subj && r.Case == c && r.Pass == pass && r.Elapsed > 0 {
				return r
			}
		}
		return nil
	}
	for i := range rs {
		r := &rs[i]
		var base *Result
		switch {
		case r.Phase == PhaseConcurrent && r.Subject != SubjectPlain && r.Case == "four readers" && r.Pass == PassFirst:
			// The target: four first reads use both CPUs, against one
			// (and the floor's, for how far FUSE scales here).
			base = findCase(r, r.Subject, "one reader", PassFirst)
			if base != nil {
				r.Baseline = "one reader"
				r.VsBase = base.unitNs() / r.unitNs()
			}
			continue
		case r.Phase == PhaseConcurrent && r.Subject == SubjectFloor && r.Pass == PassSecond:
			base = findCase(r, SubjectPlain, r.Case, "")
		case r.Phase == PhaseWrite && r.Subject != SubjectFloor:
			base = findCase(r, SubjectFloor, r.Case, "")
		case r.Phase == PhaseReaders && r.Subject == SubjectFloor:
			base = findCase(r, SubjectPlain, r.Case, "")
		case r.Phase == PhaseCatAppend && r.Subject == SubjectFloor:
			base = find(r.Phase, SubjectPlain, r.Size, r.Batch)
		case r.Case != "" && r.Subject == SubjectMount:
			base = findCase(r, SubjectPlain, r.Case, "")
		case r.Subject == SubjectMount:
			base = find(r.Phase, SubjectPlain, r.Size, r.Batch)
		case r.Subject != SubjectLogfs:
		case r.Phase == PhaseLookupTime:
			base = find(PhaseLookup, SubjectRaw, r.Size, 0)
		case r.Phase == PhaseMixed:
			base = find(PhaseAppend, SubjectRaw, r.Size, r.Batch)
		default:
			base = find(r.Phase, SubjectRaw, r.Size, r.Batch)
		}
		if base != nil && r.Elapsed > 0 {
			r.Baseline = base.Subject
			r.VsBase = base.unitNs() / r.unitNs()
		}
	}
}

// targets checks the project's targets that this package measures. Those
// against liftbridge are checked by the bench/peers harness.
func targets(rep *Report) []Target {
	var ts []Target
	add := func(target, measured string, v float64, met bool) {
		ts = append(ts, Target{Target: target, Measured: measured, Value: v, Met: met})
	}
	// floorOf returns the go-fuse floor's row of r's cell, measured in
	// the same run: how much of a miss is FUSE's own.
	floorOf := func(r Result) (Result, bool) {
		for _, f := range rep.Results {
			if f.Phase == r.Phase && f.Size == r.Size && f.Subject == SubjectFloor && f.Case == r.Case && f.Pass == r.Pass {
				return f, true
			}
		}
		return Result{}, false
	}
	floorRatio := func(r Result) string {
		if f, ok := floorOf(r); ok && f.VsBase > 0 {
			return fmt.Sprintf("; the floor %.2fx", f.VsBase)
		}
		return ""
	}
	for _, r := range rep.Results {
		where := fmt.Sprintf("%d B", r.Size)
		switch {
		case r.Subject == SubjectLogfs && r.Phase == PhaseAppend && r.Batch > 1 && r.VsBase > 0:
			add("batched append >= 0.7x raw", fmt.Sprintf("%s, batch %d: %.2fx raw (%.0f vs %.0f MB/s)", where, r.Batch, r.VsBase, r.MBps, r.MBps/r.VsBase), r.VsBase, r.VsBase >= 0.7)
		case r.Subject == SubjectLogfs && r.Phase == PhaseRead && r.VsBase > 0:
			add("sequential read >= 0.7x raw", fmt.Sprintf("%s: %.2fx raw (%.0f vs %.0f MB/s)", where, r.VsBase, r.MBps, r.MBps/r.VsBase), r.VsBase, r.VsBase >= 0.7)
		case r.Subject == SubjectMount && r.Phase == PhaseCat:
			add("cat offset/0 >= 1 GB/s", fmt.Sprintf("%s: %.0f MB/s", where, r.MBps), r.MBps, r.MBps >= 1000)
			if r.VsBase > 0 {
				add("cat offset/0 >= 0.4x cat of the .log files", fmt.Sprintf("%s: %.2fx (same records)", where, r.VsBase), r.VsBase, r.VsBase >= 0.4)
			}
		case r.Subject == SubjectMount && r.Phase == PhaseTail:
			add("tail -n 10 offset/0 < 20 ms", fmt.Sprintf("%s: p50 %s, p99 %s", where, DurationCell(r.P50), DurationCell(r.P99)), r.P50.Seconds()*1e3, r.P50 < 20*time.Millisecond)
		case r.Subject == SubjectMount && r.Phase == PhaseCatAppend:
			add("cat >> append >= 300 MB/s", fmt.Sprintf("%s: %.0f MB/s", where, r.MBps), r.MBps, r.MBps >= 300)
			if r.VsBase > 0 {
				want := 0.5
				if r.Size < 1024 {
					want = 0.35
				}
				add(fmt.Sprintf("cat >> append >= %.2gx plain", want), fmt.Sprintf("%s: %.2fx (%.0f vs %.0f MB/s%s)", where, r.VsBase, r.MBps, r.MBps/r.VsBase, floorRatio(r)), r.VsBase, r.VsBase >= want)
			}
		case r.Subject == SubjectMount && r.Phase == PhaseHead && r.VsBase > 0:
			add("head -n 1 offset/N within 1.5x of plain", fmt.Sprintf("%s: %.2fx (p50 %s)", where, 1/r.VsBase, DurationCell(r.P50)), 1/r.VsBase, r.VsBase >= 1/1.5)
		case r.Subject == SubjectMount && r.Phase == PhaseReaders && r.VsBase > 0:
			want := 0.85
			if r.Pass == PassFirst {
				want = 0.5
			}
			add(fmt.Sprintf("%s read >= %.2gx plain", r.Pass, want), fmt.Sprintf("%s, %s: %.2fx (%.0f vs %.0f MB/s%s)", where, r.Case, r.VsBase, r.MBps, r.MBps/r.VsBase, floorRatio(r)), r.VsBase, r.VsBase >= want)
		case r.Subject == SubjectMount && r.Phase == PhasePread:
			limit := 50 * time.Microsecond
			if r.Pass == PassSecond {
				limit = 5 * time.Microsecond
			}
			floor := ""
			if f, ok := floorOf(r); ok {
				floor = fmt.Sprintf("; the floor p50 %s", DurationCell(f.P50))
			}
			add(fmt.Sprintf("4 KiB pread at a %s: p50 < %s", r.Case, DurationCell(limit)), fmt.Sprintf("%s: p50 %s, p99 %s%s", where, DurationCell(r.P50), DurationCell(r.P99), floor), r.P50.Seconds()*1e6, r.P50 < limit)
		case r.Subject == SubjectMount && r.Phase == PhaseOpen:
			add("open offset/N + first line: p50 < 1 ms", fmt.Sprintf("%s: p50 %s, p99 %s", where, DurationCell(r.P50), DurationCell(r.P99)), r.P50.Seconds()*1e3, r.P50 < time.Millisecond)
		case r.Subject == SubjectMount && r.Phase == PhaseConcurrent && r.Case == "four readers" && r.VsBase > 0:
			if r.Pass == PassFirst {
				add("four first reads >= 1.5x one reader's, in aggregate", fmt.Sprintf("%s: %.2fx (%.0f MB/s%s)", where, r.VsBase, r.MBps, floorRatio(r)), r.VsBase, r.VsBase >= 1.5)
			} else {
				add("four second reads >= 0.85x four on plain files", fmt.Sprintf("%s: %.2fx (%.0f MB/s%s)", where, r.VsBase, r.MBps, floorRatio(r)), r.VsBase, r.VsBase >= 0.85)
			}
		case r.Subject == SubjectMount && r.Phase == PhaseWrite && r.VsBase > 0:
			add("one-line writes within 2x of the go-fuse floor", fmt.Sprintf("%s: %.2fx the floor's time per write (%s vs %s)", where, 1/r.VsBase, NanosCell(r.unitNs()), NanosCell(r.unitNs()*r.VsBase)), 1/r.VsBase, r.VsBase >= 0.5)
		}
	}
	for _, m := range rep.MountRSS {
		grew := m.After - m.Before
		add("mount RSS does not grow with what it served", fmt.Sprintf("%d B: %+.1f MiB after serving %s", m.Size, float64(grew)/(1<<20), sizeCell(m.Served)), float64(grew)/(1<<20), grew < 64<<20)
	}
	if m := rep.Memory; m != nil && len(m.Steps) > 0 {
		add(fmt.Sprintf("mount of %d segments < 150 MB RSS", m.Segments), fmt.Sprintf("peak RSS %s", sizeCell(m.PeakRSS)), float64(m.PeakRSS)/1e6, m.PeakRSS < 150e6)
		add("mappings only for segments read", fmt.Sprintf("%d segments mapped, %d read, %d mapped unread", m.Mapped, m.SegmentsRead, m.MappedUnread), float64(m.MappedUnread), m.MappedUnread == 0)
	}
	return ts
}
