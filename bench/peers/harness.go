package peers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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
// written in total, a few minutes on 2 cores.
func DefaultOptions() Options {
	return Options{
		Sizes:          []int{100, 1024, 16384},
		Batches:        []int{1, 64},
		DataBytes:      128 << 20,
		MaxAutoRecords: 500_000,
		SegmentBytes:   64 << 20,
		Lookups:        20_000,
		PhaseTime:      2 * time.Second,
		FsyncTime:      time.Second,
		Readers:        3,
		MixedRecords:   100_000,
		Seed:           1,
		Repeat:         1,
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

// medianRuns folds the repeated runs of every cell into one result: the run
// with the median time/op (the lower one for an even count), with Runs, the
// fastest and slowest time/op, and the wrong answers of all runs.
func medianRuns(rs []Result) []Result {
	type key struct {
		log, phase  string
		size, batch int
	}
	groups := map[key][]Result{}
	var order []key
	for _, r := range rs {
		k := key{r.Log, r.Phase, r.Size, r.Batch}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Result, 0, len(order))
	for _, k := range order {
		g := groups[k]
		slices.SortStableFunc(g, func(a, b Result) int { return cmp.Compare(a.NsPerOp, b.NsPerOp) })
		m := g[(len(g)-1)/2]
		m.Runs = len(g)
		m.MinNsPerOp, m.MaxNsPerOp = g[0].NsPerOp, g[len(g)-1].NsPerOp
		m.Wrong, m.WrongExample = 0, ""
		for _, r := range g {
			if r.Wrong > 0 && m.WrongExample == "" {
				m.WrongExample = r.WrongExample
			}
			m.Wrong += r.Wrong
		}
		out = append(out, m)
	}
	return out
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
					if err := removeData(dir); err != nil {
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
			if err := removeData(dir); err != nil {
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
				if err := removeData(dir); err != nil {
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
				if err := removeData(dir); err != nil {
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
			res.DiskSize, err = settle(dir)
		}
	}()
	bb := newBatchBuf(p.size, batch)
	lat := make([]int64, 0, int(n)/batch+1)
	runtime.GC()
	start := time.Now()
	var off int64
	for off < n {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if fsyncFor > 0 && time.Since(start) >= fsyncFor {
			break
		}
		k := int(min(int64(batch), n-off))
		vals, ts := bb.prepare(p, off, k)
		t := time.Now()
		if err := l.Append(vals, ts); err != nil {
			return res, fmt.Errorf("append at %d: %w", off, err)
		}
		if fsyncFor > 0 {
			if err := l.Sync(); err != nil {
				return res, fmt.Errorf("sync at %d: %w", off, err)
			}
		}
		d := time.Since(t)
		res.Elapsed += d
		lat = append(lat, int64(d))
		off += int64(k)
	}
	res.Ops, res.Records, res.Bytes = off, off, off*int64(p.size)
	res.Samples = len(lat)
	res.LatP50, res.LatP99 = percentiles(lat)
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
// (n records, closed). Every phase starts from settle(dir).
func (r *runner) readPhases(ctx context.Context, name, dir string, p *payload, n int64, offs []int64) (err error) {
	o := &r.o
	if _, err := settle(dir); err != nil {
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
		if _, err := settle(dir); err != nil {
			return err
		}
		res := Result{Log: name, Phase: PhaseLookup, Size: p.size, LatUnit: "op"}
		lat := make([]int64, 0, len(offs))
		runtime.GC()
		start := time.Now()
		for _, off := range offs {
			if err := ctx.Err(); err != nil {
				return err
			}
			t := time.Now()
			v, err := l.LookupFirst(off)
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
		res.Bytes = res.Records * int64(p.size)
		res.Samples = len(lat)
		res.LatP50, res.LatP99 = percentiles(lat)
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
			if _, err := settle(dir); err != nil {
				return err
			}
			// Targets fall anywhere in (ts(off-1), ts(off)]: the answer is off.
			rng := rand.New(rand.NewPCG(o.Seed, uint64(p.size)))
			lat := make([]int64, 0, len(offs))
			runtime.GC()
			start := time.Now()
			for _, off := range offs {
				if err := ctx.Err(); err != nil {
					return err
				}
				target := tsOf(off) - rng.Int64N(TimeStep)
				t := time.Now()
				got, err := l.LookupTime(target)
				d := time.Since(t)
				if err != nil {
					return fmt.Errorf("lookup-time %d: %w", target, err)
				}
				if got != off {
					res.wrong(fmt.Errorf("%w: lookup-time ts(%d)-%d = offset %d", ErrMismatch, off, tsOf(off)-target, got))
				}
				res.Elapsed += d
				lat = append(lat, int64(d))
				if time.Since(start) >= o.PhaseTime {
					break
				}
			}
			res.Ops = int64(len(lat))
			res.Samples = len(lat)
			res.LatP50, res.LatP99 = percentiles(lat)
			r.add(res)
		}
	}

	if o.wants(PhaseRead) {
		if _, err := settle(dir); err != nil {
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

	nb := (m + int64(batch) - 1) / int64(batch)
	appendAt := make([]atomic.Int64, nb) // ns since t0 (+1, so 0 = unset)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()

	type readerOut struct {
		lag   []int64
		done  time.Duration
		err   error
		wrong int64
	}
	outs := make([]readerOut, readers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range outs {
		wg.Add(1)
		go func(out *readerOut) {
			defer wg.Done()
			out.lag = make([]int64, 0, m)
			var next int64
			var bad error
			out.err = f.Follow(ctx, 0, func(off int64, v []byte) bool {
				now := int64(time.Since(t0))
				if off != next {
					bad = fmt.Errorf("%w: follower got offset %d, want %d", ErrMismatch, off, next)
					return false
				}
				if !p.quick(v, off) {
					out.wrong++
				}
				if at := appendAt[off/int64(batch)].Load(); at > 0 {
					out.lag = append(out.lag, now-(at-1))
				}
				next++
				return next < m
			})
			out.done = time.Since(t0)
			if out.err == nil {
				out.err = bad
			}
			if out.err == nil && next != m {
				out.err = fmt.Errorf("%w: follower stopped at %d of %d", ErrMismatch, next, m)
			}
		}(&outs[i])
	}

	bb := newBatchBuf(p.size, batch)
	lat := make([]int64, 0, nb)
	var off int64
	var appendErr error
	for bi := int64(0); off < m; bi++ {
		k := int(min(int64(batch), m-off))
		vals, ts := bb.prepare(p, off, k)
		t := time.Now()
		appendAt[bi].Store(int64(t.Sub(t0)) + 1)
		if appendErr = l.Append(vals, ts); appendErr != nil {
			break
		}
		lat = append(lat, int64(time.Since(t)))
		off += int64(k)
	}
	appended := time.Since(t0)
	if appendErr != nil {
		cancel()
	}
	wg.Wait()
	if appendErr != nil {
		return res, appendErr
	}
	var lags []int64
	var last time.Duration
	for _, out := range outs {
		if out.err != nil {
			return res, out.err
		}
		lags = append(lags, out.lag...)
		last = max(last, out.done)
		res.Wrong += out.wrong
	}
	if res.Wrong > 0 {
		res.WrongExample = "followed values that fail the quick check"
	}
	res.Ops, res.Records, res.Bytes = m, m, m*int64(p.size)
	res.Elapsed = appended
	res.Samples = len(lat)
	res.LatP50, res.LatP99 = percentiles(lat)
	res.ReaderRecPS = float64(int64(readers)*m) / last.Seconds()
	res.ReaderMBps = float64(int64(readers)*m*int64(p.size)) / 1e6 / last.Seconds()
	res.LagP50, res.LagP99 = percentiles(lags)
	if len(lags) > 0 {
		res.LagMax = time.Duration(lags[len(lags)-1])
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
