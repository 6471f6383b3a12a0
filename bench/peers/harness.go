package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/logfs/logfs/bench"
)

// Options configures a Run. DefaultOptions documents the defaults.
type Options struct {
	Logs    []string `json:"logs"`         // adapters to run; empty = all registered
	Phases  []string `json:"phases"`       // phases to report; empty = all
	Sizes   []int    `json:"record_sizes"` // value bytes per record
	Batches []int    `json:"batches"`      // records per Append call

	// Records per data set; 0 = DataBytes/size clamped to
	// [1000, MaxAutoRecords].
	Records        int   `json:"records"`
	DataBytes      int64 `json:"data_bytes"`
	MaxAutoRecords int   `json:"max_auto_records"`

	SegmentBytes int64 `json:"segment_bytes"`

	// Dir is where the run's fresh temporary directory is made ("" = the
	// system temp dir); only that directory is written and it is removed
	// when Run returns, error or not.
	Dir string `json:"dir"`

	Lookups   int           `json:"lookups"`       // random lookups per lookup phase (at most)
	PhaseTime time.Duration `json:"phase_time_ns"` // ... and at most this long
	FsyncTime time.Duration `json:"fsync_time_ns"` // append+fsync phase stops after this long (or Records)

	Readers      int `json:"readers"`       // mixed: followers at the tail
	MixedRecords int `json:"mixed_records"` // mixed: records appended (at most Records)

	Seed uint64 `json:"seed"`

	// Repeat runs every cell this many times (all logs of a record size in
	// turn, then again) and reports, per cell, the run with the median
	// time/op, with the fastest and slowest in Result.MinNsPerOp/MaxNsPerOp.
	Repeat int `json:"repeat"`

	// Progress, when set, gets one line per measured cell as the run goes.
	Progress io.Writer `json:"-"`
}

// DefaultOptions is what cmd/peerbench runs without flags: about 2-3 GiB
// written in total, a few minutes on 2 cores. They are logfs bench's
// defaults (bench.DefaultOptions): the same record sizes, batches, data
// sets, segment size, lookups and mixed workload, so that the figures of the
// two harnesses can be read side by side.
func DefaultOptions() Options {
	d := bench.DefaultOptions()
	return Options{
		Sizes:          d.Sizes,
		Batches:        d.Batches,
		DataBytes:      d.DataBytes,
		MaxAutoRecords: d.MaxRecords,
		SegmentBytes:   d.SegmentBytes,
		Lookups:        d.Lookups,
		PhaseTime:      d.PhaseTime,
		FsyncTime:      d.FsyncTime,
		Readers:        d.Readers,
		MixedRecords:   d.MixedRecords,
		Seed:           d.Seed,
		Repeat:         d.Count,
	}
}

// RecordsFor is the record count of the data sets of one record size.
func (o *Options) RecordsFor(size int) int {
	if o.Records > 0 {
		return o.Records
	}
	n := int(o.DataBytes / int64(size))
	return max(1000, min(n, o.MaxAutoRecords))
}

func (o *Options) wants(phase string) bool {
	return len(o.Phases) == 0 || slices.Contains(o.Phases, phase)
}

func (o *Options) validate() error {
	for _, n := range o.Logs {
		if !slices.Contains(Adapters(), n) {
			return fmt.Errorf("%w: %q (have %v)", ErrUnknownAdapter, n, Adapters())
		}
	}
	for _, p := range o.Phases {
		if !slices.Contains(Phases, p) {
			return fmt.Errorf("peers: unknown phase %q (have %v)", p, Phases)
		}
	}
	switch {
	case len(o.Sizes) == 0 || len(o.Batches) == 0:
		return errors.New("peers: no record sizes or batch sizes")
	case o.SegmentBytes <= 0:
		return errors.New("peers: segment size must be > 0")
	case o.Records < 0 || (o.Records == 0 && (o.DataBytes <= 0 || o.MaxAutoRecords <= 0)):
		return errors.New("peers: need Records, or DataBytes and MaxAutoRecords")
	case o.Lookups <= 0 || o.PhaseTime <= 0 || o.FsyncTime <= 0:
		return errors.New("peers: lookups, phase time and fsync time must be > 0")
	case o.Readers <= 0 || o.MixedRecords <= 0:
		return errors.New("peers: readers and mixed records must be > 0")
	case o.Repeat <= 0:
		return errors.New("peers: repeat must be > 0")
	}
	for _, s := range o.Sizes {
		if s < MinRecordSize || int64(s)+64 > o.SegmentBytes {
			return fmt.Errorf("peers: record size %d outside [%d, segment size)", s, MinRecordSize)
		}
	}
	for _, b := range o.Batches {
		if b < 1 {
			return fmt.Errorf("peers: batch size %d < 1", b)
		}
	}
	return nil
}

// Report is everything one Run measured.
type Report struct {
	Machine Machine   `json:"machine"`
	Options Options   `json:"options"`
	Records []int     `json:"records_per_size"` // RecordsFor(Sizes[i])
	Started time.Time `json:"started"`
	Elapsed float64   `json:"elapsed_s"`
	Results []Result  `json:"results"`
}

// Run measures every selected log on every workload and returns the report.
// Data sets live in a fresh temporary directory that is removed before Run
// returns, also on error and when ctx is cancelled (Run then returns
// ctx.Err()). Every value and time-lookup answer is checked: wrong answers
// are counted in Result.Wrong (see Report.WrongAnswers); a log that loses or
// reorders records, or fails an operation, stops the run.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if len(o.Logs) == 0 {
		o.Logs = Adapters()
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp(o.Dir, "peerbench-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := os.RemoveAll(root); rerr != nil && err == nil {
			err = rerr
		}
	}()
	rep = &Report{Machine: probeMachine(root), Options: o, Started: time.Now()}
	r := &runner{o: o, root: root, cfg: Config{SegmentBytes: o.SegmentBytes}, rep: rep}
	for _, size := range o.Sizes {
		rep.Records = append(rep.Records, o.RecordsFor(size))
		for range o.Repeat {
			if err := r.size(ctx, size); err != nil {
				return rep, err
			}
		}
	}
	rep.Elapsed = time.Since(rep.Started).Seconds()
	rep.Results = medianRuns(rep.Results)
	computeRatios(rep.Results)
	return rep, nil
}

// medianRuns folds the repeated runs of every cell into one result
// (bench.MedianRuns): the run with the median time/op (the lower one for an
// even count), with Runs, the fastest and slowest time/op, and the wrong
// answers of all runs.
func medianRuns(rs []Result) []Result {
	type cell struct {
		log, phase  string
		size, batch int
	}
	return bench.MedianRuns(rs, func(r Result) cell { return cell{r.Log, r.Phase, r.Size, r.Batch} },
		func(r Result) float64 { return r.NsPerOp },
		func(m Result, runs []Result) Result {
			m.Runs = len(runs)
			m.MinNsPerOp, m.MaxNsPerOp = runs[0].NsPerOp, runs[len(runs)-1].NsPerOp
			m.Wrong, m.WrongExample = bench.SumWrong(runs, func(r Result) (int64, string) { return r.Wrong, r.WrongExample })
			return m
		})
}

// WrongAnswers returns the results that contain wrong answers.
func (rep *Report) WrongAnswers() []Result {
	var out []Result
	for _, r := range rep.Results {
		if r.Wrong > 0 {
			out = append(out, r)
		}
	}
	return out
}

type runner struct {
	o    Options
	root string
	cfg  Config
	rep  *Report
}

func (r *runner) add(res Result) {
	res.finish()
	r.rep.Results = append(r.rep.Results, res)
	if r.o.Progress != nil {
		fmt.Fprintln(r.o.Progress, progressLine(res))
	}
}

func (r *runner) dir(name string, size, batch int, what string) string {
	return filepath.Join(r.root, fmt.Sprintf("%s-%d-%d-%s", name, size, batch, what))
}

// size runs every phase for one record size.
func (r *runner) size(ctx context.Context, size int) error {
	o := &r.o
	n := int64(o.RecordsFor(size))
	p := newPayload(size, o.Seed)
	reads := o.wants(PhaseReopen) || o.wants(PhaseLookup) || o.wants(PhaseLookupTime) || o.wants(PhaseRead)

	// Append, one fresh data set per (log, batch). The data set of the last
	// batch size stays for the read phases (the on-disk layout of every
	// peer is the same whatever the batching).
	if o.wants(PhaseAppend) || reads {
		for bi, batch := range o.Batches {
			last := bi == len(o.Batches)-1
			if !o.wants(PhaseAppend) && !last {
				continue
			}
			for _, name := range o.Logs {
				dir := r.dir(name, size, batch, "data")
				res, err := appendPhase(ctx, name, dir, r.cfg, p, n, batch, 0)
				if err != nil {
					return fmt.Errorf("%s append size=%d batch=%d: %w", name, size, batch, err)
				}
				if o.wants(PhaseAppend) {
					r.add(res)
				}
				if !last || !reads {
					if err := bench.RemoveSynced(dir); err != nil {
						return err
					}
				}
			}
		}
	}

	if reads {
		batch := o.Batches[len(o.Batches)-1]
		offs := lookupOffsets(o.Seed, size, n, o.Lookups)
		for _, name := range o.Logs {
			dir := r.dir(name, size, batch, "data")
			if err := r.readPhases(ctx, name, dir, p, n, offs); err != nil {
				return fmt.Errorf("%s size=%d: %w", name, size, err)
			}
			if err := bench.RemoveSynced(dir); err != nil {
				return err
			}
		}
	}

	if o.wants(PhaseAppendFsync) {
		for _, batch := range o.Batches {
			for _, name := range o.Logs {
				dir := r.dir(name, size, batch, "fsync")
				res, err := appendPhase(ctx, name, dir, r.cfg, p, n, batch, o.FsyncTime)
				if err != nil {
					return fmt.Errorf("%s append+fsync size=%d batch=%d: %w", name, size, batch, err)
				}
				r.add(res)
				if err := bench.RemoveSynced(dir); err != nil {
					return err
				}
			}
		}
	}

	if o.wants(PhaseMixed) {
		m := min(n, int64(o.MixedRecords))
		for _, batch := range o.Batches {
			for _, name := range o.Logs {
				dir := r.dir(name, size, batch, "mixed")
				res, err := mixedPhase(ctx, name, dir, r.cfg, p, m, batch, o.Readers)
				if err != nil {
					return fmt.Errorf("%s mixed size=%d batch=%d: %w", name, size, batch, err)
				}
				r.add(res)
				if err := bench.RemoveSynced(dir); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// appendPhase writes n records in batches to a fresh log in dir. With
// fsyncFor > 0 it calls Sync after every batch and stops after fsyncFor
// (or n records). Only the Append (and Sync) calls are timed; values are
// prepared between them.
func appendPhase(ctx context.Context, name, dir string, cfg Config, p *payload, n int64, batch int, fsyncFor time.Duration) (res Result, err error) {
	phase := PhaseAppend
	if fsyncFor > 0 {
		phase = PhaseAppendFsync
	}
	res = Result{Log: name, Phase: phase, Size: p.size, Batch: batch, LatUnit: "batch"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	l, err := Open(name, dir, cfg)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if err == nil {
			res.DiskSize, err = bench.Settle(dir)
		}
	}()
	bb := newBatchBuf(p.size, batch)
	a, err := bench.TimeBatches(ctx, n, batch, fsyncFor, func(off int64, k int) (time.Duration, error) {
		vals, ts := bb.prepare(p, off, k)
		t := time.Now()
		if err := l.Append(vals, ts); err != nil {
			return 0, fmt.Errorf("append at %d: %w", off, err)
		}
		if fsyncFor > 0 {
			if err := l.Sync(); err != nil {
				return 0, fmt.Errorf("sync at %d: %w", off, err)
			}
		}
		return time.Since(t), nil
	})
	if err != nil {
		return res, err
	}
	res.Ops, res.Records, res.Bytes = a.Records, a.Records, a.Records*int64(p.size)
	res.Elapsed = a.Elapsed
	res.Samples = len(a.Lat)
	res.LatP50, res.LatP99 = bench.Percentiles(a.Lat)
	return res, nil
}

// lookupOffsets is the random offset sequence every log gets for one size.
func lookupOffsets(seed uint64, size int, n int64, k int) []int64 {
	rng := rand.New(rand.NewPCG(seed, uint64(size)^0x9e3779b97f4a7c15))
	offs := make([]int64, k)
	for i := range offs {
		offs[i] = rng.Int64N(n)
	}
	return offs
}

// readPhases runs reopen, lookup, lookup-time and read on the data set in dir
// (n records, closed). Every phase starts from bench.Settle(dir).
func (r *runner) readPhases(ctx context.Context, name, dir string, p *payload, n int64, offs []int64) (err error) {
	o := &r.o
	if _, err := bench.Settle(dir); err != nil {
		return err
	}
	runtime.GC()
	t := time.Now()
	l, err := Open(name, dir, r.cfg)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	d := time.Since(t)
	defer func() {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if o.wants(PhaseReopen) {
		r.add(Result{Log: name, Phase: PhaseReopen, Size: p.size, Ops: 1, Elapsed: d})
	}

	if o.wants(PhaseLookup) {
		if _, err := bench.Settle(dir); err != nil {
			return err
		}
		res := Result{Log: name, Phase: PhaseLookup, Size: p.size, LatUnit: "op"}
		m, err := bench.TimeLookups(ctx, "lookup", offs, o.PhaseTime, func(off int64) ([]byte, time.Duration, error) {
			t := time.Now()
			v, err := l.LookupFirst(off)
			return v, time.Since(t), err
		}, func(i int, v []byte) error { return p.check(v, offs[i]) })
		if err != nil {
			return err
		}
		res.Elapsed, res.Wrong, res.WrongExample = m.Elapsed, m.Wrong, m.WrongExample
		res.Ops, res.Records = int64(len(m.Lat)), int64(len(m.Lat))
		res.Bytes = res.Records * int64(p.size)
		res.Samples = len(m.Lat)
		res.LatP50, res.LatP99 = bench.Percentiles(m.Lat)
		r.add(res)
	}

	if o.wants(PhaseLookupTime) {
		res := Result{Log: name, Phase: PhaseLookupTime, Size: p.size, LatUnit: "op"}
		if _, err := l.LookupTime(tsOf(0)); errors.Is(err, ErrUnsupported) {
			res.NA = "no time lookup"
			r.add(res)
		} else {
			if err != nil {
				return fmt.Errorf("lookup-time: %w", err)
			}
			if _, err := bench.Settle(dir); err != nil {
				return err
			}
			// Targets fall anywhere in (ts(off-1), ts(off)]: the answer is off.
			rng := rand.New(rand.NewPCG(o.Seed, uint64(p.size)))
			targets := make([]int64, len(offs))
			for i, off := range offs {
				targets[i] = tsOf(off) - rng.Int64N(TimeStep)
			}
			m, err := bench.TimeLookups(ctx, "lookup-time", targets, o.PhaseTime, func(ts int64) (int64, time.Duration, error) {
				t := time.Now()
				off, err := l.LookupTime(ts)
				return off, time.Since(t), err
			}, func(i int, got int64) error {
				if off := offs[i]; got != off {
					return fmt.Errorf("%w: lookup-time ts(%d)-%d = offset %d", ErrMismatch, off, tsOf(off)-targets[i], got)
				}
				return nil
			})
			if err != nil {
				return err
			}
			res.Elapsed, res.Wrong, res.WrongExample = m.Elapsed, m.Wrong, m.WrongExample
			res.Ops = int64(len(m.Lat))
			res.Samples = len(m.Lat)
			res.LatP50, res.LatP99 = bench.Percentiles(m.Lat)
			r.add(res)
		}
	}

	if o.wants(PhaseRead) {
		if _, err := bench.Settle(dir); err != nil {
			return err
		}
		var next, bad int64
		runtime.GC()
		t := time.Now()
		got, err := l.ReadAll(func(v []byte) {
			if !p.quick(v, next) {
				bad++
			}
			next++
		})
		d := time.Since(t)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if int64(got) != n || next != n {
			return fmt.Errorf("%w: read %d records (callback %d), want %d", ErrMismatch, got, next, n)
		}
		res := Result{Log: name, Phase: PhaseRead, Size: p.size, Ops: n, Records: n, Bytes: n * int64(p.size), Elapsed: d}
		if bad > 0 {
			res.Wrong, res.WrongExample = bad, "values that fail the quick check (length, leading offset, last 8 bytes)"
		}
		r.add(res)
	}
	return nil
}

// mixedPhase: one appender writes m records in batches as fast as it can
// while `readers` goroutines follow the log from offset 0. Lag of a record
// is the time from the start of the Append call that wrote it to a reader
// receiving it; it includes queueing when readers fall behind.
func mixedPhase(ctx context.Context, name, dir string, cfg Config, p *payload, m int64, batch, readers int) (res Result, err error) {
	res = Result{Log: name, Phase: PhaseMixed, Size: p.size, Batch: batch, LatUnit: "batch", Readers: readers}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	l, err := Open(name, dir, cfg)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	f, ok := l.(Follower)
	if !ok {
		res.NA = "readers cannot wait for data"
		res.Readers = 0
		return res, nil
	}

	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	bb := newBatchBuf(p.size, batch)
	var vals [][]byte
	var ts []int64
	x, err := bench.TimeMixed(ctx, m, batch, readers, func(ctx context.Context, fw *bench.Follower) error {
		var next int64
		var bad error
		err := f.Follow(ctx, 0, func(off int64, v []byte) bool {
			if off != next {
				bad = fmt.Errorf("%w: follower got offset %d, want %d", ErrMismatch, off, next)
				return false
			}
			fw.Got(off)
			if !p.quick(v, off) {
				fw.Wrong("followed values that fail the quick check")
			}
			next++
			return next < m
		})
		if err == nil {
			err = bad
		}
		if err == nil && next != m {
			err = fmt.Errorf("%w: follower stopped at %d of %d", ErrMismatch, next, m)
		}
		return err
	}, func(off int64, k int) { vals, ts = bb.prepare(p, off, k) }, func() error { return l.Append(vals, ts) })
	if err != nil {
		return res, err
	}
	res.Wrong, res.WrongExample = x.Wrong, x.WrongExample
	res.Ops, res.Records, res.Bytes = m, m, m*int64(p.size)
	res.Elapsed = x.Elapsed
	res.Samples = len(x.Lat)
	res.LatP50, res.LatP99 = bench.Percentiles(x.Lat)
	res.ReaderRecPS = float64(int64(readers)*m) / x.ReadersDone.Seconds()
	res.ReaderMBps = float64(int64(readers)*m*int64(p.size)) / 1e6 / x.ReadersDone.Seconds()
	res.LagP50, res.LagP99 = bench.Percentiles(x.Lag) // sorts x.Lag
	if len(x.Lag) > 0 {
		res.LagMax = time.Duration(x.Lag[len(x.Lag)-1])
	}
	return res, nil
}

// computeRatios sets VsRaw on every result that has a raw counterpart.
func computeRatios(rs []Result) {
	type key struct {
		phase       string
		size, batch int
	}
	raw := map[key]float64{}
	for _, r := range rs {
		if r.Log == RawName && r.NA == "" && r.NsPerOp > 0 {
			raw[key{r.Phase, r.Size, r.Batch}] = r.NsPerOp
		}
	}
	for i := range rs {
		if b, ok := raw[key{rs[i].Phase, rs[i].Size, rs[i].Batch}]; ok && rs[i].NA == "" && rs[i].NsPerOp > 0 {
			rs[i].VsRaw = rs[i].NsPerOp / b
		}
	}
}
