package bench

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
	"strings"
	"sync"
	"time"

	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

// runner is one Run: its options, its directory, the report it fills and
// the mounts it has started.
type runner struct {
	o        Options
	root     string
	rep      *Report
	progress io.Writer
	mountMu  sync.Mutex
	mounts   []*mountProc // running, for cleanup
}

// tamper, when set (by tests), is called with each logfs data set's
// directory before it is read, to corrupt it and prove the checks fire.
var tamper func(dir string) error

// Run measures the phases of o and returns the report. Progress lines,
// one per measured cell, go to progress unless it is nil.
//
// Everything is written to a fresh directory under o.Dir, which Run
// removes before it returns, also on error and when ctx is cancelled; only
// a mount that would not stop makes it leave the directory in place (and
// return ErrStillMounted). The report of a run that stopped early holds
// what was measured so far; it is nil only when the options are invalid
// (ErrInvalidOptions) or the directory cannot be made.
// A wrong answer is not an error of Run: see Report.Err.
func Run(ctx context.Context, o Options, progress io.Writer) (rep *Report, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp(o.Dir, "logfs-bench-")
	if err != nil {
		return nil, err
	}
	if root, err = filepath.Abs(root); err != nil { // /proc/PID/maps names files by absolute path
		return nil, err
	}
	r := &runner{o: o, root: root, progress: progress}
	defer func() { err = errors.Join(err, r.cleanup()) }()
	rep = &Report{Machine: ProbeMachine(root), Options: o, Started: time.Now()}
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
	if o.wants(PhaseMemory) {
		if err := r.memory(ctx); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// finish folds the runs of every cell, computes the ratios and checks the
// targets, also for a run that stopped early.
func (r *runner) finish() {
	rep := r.rep
	rep.ElapsedS = time.Since(rep.Started).Seconds()
	rep.LoadEnd = loadAvg()
	rep.Results = medians(rep.Results)
	ratios(rep.Results)
	rep.Targets = targets(rep)
	for _, res := range rep.Results {
		rep.Wrong += res.Wrong
	}
	if rep.Memory != nil {
		rep.Wrong += rep.Memory.Wrong
	}
}

// cleanup stops every mount and removes the run's directory, but never
// while something is still mounted inside it.
func (r *runner) cleanup() error {
	r.mountMu.Lock()
	ms := slices.Clone(r.mounts)
	r.mountMu.Unlock()
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.stop())
	}
	if mps := mountsUnder(r.root); len(mps) > 0 {
		return errors.Join(append(errs, fmt.Errorf("%w, %s left in place: %s", ErrStillMounted, r.root, strings.Join(mps, ", ")))...)
	}
	errs = append(errs, os.RemoveAll(r.root))
	return errors.Join(errs...)
}

func (r *runner) logf(format string, args ...any) {
	if r.progress != nil {
		fmt.Fprintf(r.progress, format+"\n", args...)
	}
}

// add records one run of a cell and prints its progress line.
func (r *runner) add(res Result) {
	res.finish()
	res.Runs = 1
	r.rep.Results = append(r.rep.Results, res)
	if r.progress == nil {
		return
	}
	line := fmt.Sprintf("%-12s size=%-5d batch=%-3d %-5s %10s/op %9s MB/s  p50 %s p99 %s", res.Phase, res.Size, res.Batch, res.Subject,
		NanosCell(res.NsPerOp), mbCell(res), DurationCell(res.P50), DurationCell(res.P99))
	if res.Wrong > 0 {
		line += fmt.Sprintf("  WRONG %d: %s", res.Wrong, res.WrongExample)
	}
	r.logf("%s", line)
}

// size runs every phase of one record size once.
func (r *runner) size(ctx context.Context, size int) error {
	o := &r.o
	n := o.recordsFor(size)
	p := newPayload(size, o.Seed)
	reads := o.wants(PhaseLookup) || o.wants(PhaseLookupTime) || o.wants(PhaseRead) || o.wantsMount()
	var keepLogfs, keepRaw string
	defer func() {
		RemoveSynced(keepLogfs)
		RemoveSynced(keepRaw)
	}()
	for bi, batch := range o.Batches {
		last := bi == len(o.Batches)-1
		if !o.wants(PhaseAppend) && !(reads && last) {
			continue
		}
		for _, subj := range []string{SubjectRaw, SubjectLogfs} {
			dir := filepath.Join(r.root, fmt.Sprintf("%s-%d-%d", subj, size, batch))
			res, err := r.appendPhase(ctx, subj, dir, p, n, batch, false)
			if err != nil {
				return fmt.Errorf("%s append size=%d batch=%d: %w", subj, size, batch, err)
			}
			if o.wants(PhaseAppend) {
				r.add(res)
			}
			switch {
			case !(reads && last):
				if err := RemoveSynced(dir); err != nil {
					return err
				}
			case subj == SubjectLogfs:
				keepLogfs = dir
			default:
				keepRaw = dir
			}
		}
	}
	if o.wants(PhaseAppendSync) {
		for _, batch := range o.Batches {
			for _, subj := range []string{SubjectRaw, SubjectLogfs} {
				dir := filepath.Join(r.root, fmt.Sprintf("%s-%d-%d-fsync", subj, size, batch))
				res, err := r.appendPhase(ctx, subj, dir, p, n, batch, true)
				if err != nil {
					return fmt.Errorf("%s append+fsync size=%d batch=%d: %w", subj, size, batch, err)
				}
				r.add(res)
				if err := RemoveSynced(dir); err != nil {
					return err
				}
			}
		}
	}
	if keepLogfs != "" && tamper != nil {
		if err := tamper(keepLogfs); err != nil {
			return err
		}
	}
	for _, subj := range []string{SubjectRaw, SubjectLogfs} {
		dir := keepLogfs
		if subj == SubjectRaw {
			dir = keepRaw
		}
		if dir == "" {
			continue
		}
		if err := r.readPhases(ctx, subj, dir, p, n); err != nil {
			return fmt.Errorf("%s size=%d: %w", subj, size, err)
		}
	}
	if o.wants(PhaseMixed) {
		for _, batch := range o.Batches {
			dir := filepath.Join(r.root, fmt.Sprintf("mixed-%d-%d", size, batch))
			res, err := r.mixedPhase(ctx, dir, p, min(int64(o.MixedRecords), n), batch)
			if rerr := RemoveSynced(dir); err == nil {
				err = rerr
			}
			if err != nil {
				return fmt.Errorf("mixed size=%d batch=%d: %w", size, batch, err)
			}
			r.add(res)
		}
	}
	if o.wantsMount() && keepLogfs != "" {
		if err := r.toolPhases(ctx, keepLogfs, p, n); err != nil {
			return fmt.Errorf("mount size=%d: %w", size, err)
		}
	}
	return nil
}

// appendPhase appends n records (or, with fsync, as many as FsyncTime
// allows) in calls of batch records to a fresh data set in dir.
func (r *runner) appendPhase(ctx context.Context, subj, dir string, p *payload, n int64, batch int, fsync bool) (res Result, err error) {
	phase, what := PhaseAppend, "Partition.Append"
	if subj == SubjectRaw {
		what = "write(2)"
	}
	if fsync {
		phase = PhaseAppendSync
		what += map[string]string{SubjectRaw: " + fsync", SubjectLogfs: " + Partition.Sync"}[subj]
	}
	res = Result{Phase: phase, Size: p.size, Batch: batch, Subject: subj, What: what, LatUnit: "call"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	if err := vfs.Default.SyncDir(filepath.Dir(dir)); err != nil {
		return res, err
	}
	l, err := openSubject(subj, dir, r.o.SegmentBytes)
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
	var limit time.Duration
	if fsync {
		limit = r.o.FsyncTime
	}
	a, err := TimeBatches(ctx, n, batch, limit, func(off int64, k int) (time.Duration, error) {
		vals, recs := bv.prepare(p, off, k)
		t := time.Now()
		if err := l.append(vals, recs); err != nil {
			return 0, err
		}
		if fsync {
			if err := l.sync(); err != nil {
				return 0, err
			}
		}
		return time.Since(t), nil
	})
	if err != nil {
		return res, err
	}
	off := a.Records
	res.Elapsed, res.Ops, res.Records, res.Bytes = a.Elapsed, off, off, off*int64(p.size)
	res.P50, res.P99 = Percentiles(a.Lat)
	if lb, ok := l.(*logfsSubject); ok {
		if end := int64(lb.p.EndOffset()); end != off {
			return res, fmt.Errorf("wrong data: log ends at offset %d after %d records", end, off)
		}
		res.Verified = off
	}
	return res, nil
}

// readPhases runs lookup, lookup-time and read on the data set in dir.
func (r *runner) readPhases(ctx context.Context, subj, dir string, p *payload, n int64) (err error) {
	o := &r.o
	if !o.wants(PhaseLookup) && !o.wants(PhaseLookupTime) && !o.wants(PhaseRead) {
		return nil
	}
	l, err := openSubject(subj, dir, o.SegmentBytes)
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
	if o.wants(PhaseLookup) {
		what := "Reader.Seek + Next"
		if subj == SubjectRaw {
			what = "pread(2) at a known position"
		}
		res := Result{Phase: PhaseLookup, Size: p.size, Subject: subj, What: what, LatUnit: "lookup"}
		if _, err := Settle(dir); err != nil {
			return err
		}
		m, err := TimeLookups(ctx, "lookup", offs, o.PhaseTime, func(off int64) ([]byte, time.Duration, error) {
			t := time.Now()
			v, err := l.lookup(off)
			return v, time.Since(t), err
		}, func(i int, v []byte) error { return p.check(v, offs[i]) })
		if err != nil {
			return err
		}
		res.Elapsed, res.Wrong, res.WrongExample = m.Elapsed, m.Wrong, m.WrongExample
		res.Ops, res.Records = int64(len(m.Lat)), int64(len(m.Lat))
		res.Bytes, res.Verified = res.Records*int64(p.size), res.Records
		res.P50, res.P99 = Percentiles(m.Lat)
		r.add(res)
	}
	if o.wants(PhaseLookupTime) {
		if _, err := l.lookupTime(timestampOf(0)); !errors.Is(err, errNoTimeLookup) {
			if err != nil {
				return fmt.Errorf("lookup-time: %w", err)
			}
			if _, err := Settle(dir); err != nil {
				return err
			}
			res := Result{Phase: PhaseLookupTime, Size: p.size, Subject: subj, What: "Partition.OffsetForTime", LatUnit: "lookup",
				Note: "baseline: raw lookup by offset (one pread)"}
			targets := make([]int64, len(offs)) // on a record, or between two
			for i, off := range offs {
				targets[i] = timestampOf(off) - rng.Int64N(2)
			}
			m, err := TimeLookups(ctx, "lookup-time", targets, o.PhaseTime, func(ts int64) (int64, time.Duration, error) {
				t := time.Now()
				off, err := l.lookupTime(ts)
				return off, time.Since(t), err
			}, func(i int, got int64) error {
				if got != offs[i] {
					return fmt.Errorf("time %d (of offset %d) found offset %d", targets[i], offs[i], got)
				}
				return nil
			})
			if err != nil {
				return err
			}
			res.Elapsed, res.Wrong, res.WrongExample = m.Elapsed, m.Wrong, m.WrongExample
			res.Ops, res.Verified = int64(len(m.Lat)), int64(len(m.Lat))
			res.P50, res.P99 = Percentiles(m.Lat)
			r.add(res)
		}
	}
	if o.wants(PhaseRead) {
		what := "Reader.Next from offset 0"
		if subj == SubjectRaw {
			what = "1 MiB read(2)s"
		}
		if _, err := Settle(dir); err != nil {
			return err
		}
		res := Result{Phase: PhaseRead, Size: p.size, Subject: subj, What: what}
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
func (r *runner) mixedPhase(ctx context.Context, dir string, p *payload, m int64, batch int) (res Result, err error) {
	readers := r.o.Readers
	res = Result{Phase: PhaseMixed, Size: p.size, Batch: batch, Subject: SubjectLogfs, LatUnit: "call", Readers: readers,
		What: fmt.Sprintf("Partition.Append, %d followers in Reader.Wait", readers), Note: "baseline: raw append without readers"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	l, err := openLogfs(dir, r.o.SegmentBytes)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := l.close(); err == nil {
			err = cerr
		}
	}()
	bv := newBatchValues(p.size, batch)
	var recs []storage.Record
	x, err := TimeMixed(ctx, m, batch, readers, func(ctx context.Context, f *Follower) error {
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
			if int64(rec.Offset) != next {
				return fmt.Errorf("wrong data: follower got offset %d, want %d", rec.Offset, next)
			}
			f.Got(next)
			if !p.quick(rec.Value, next) {
				f.Wrong(fmt.Sprintf("follower: offset %d fails the value check", next))
			}
			next++
		}
		return nil
	}, func(off int64, k int) { _, recs = bv.prepare(p, off, k) }, func() error { return l.append(nil, recs) })
	res.Elapsed = x.Elapsed
	if err != nil {
		return res, err
	}
	res.Wrong, res.WrongExample = x.Wrong, x.WrongExample
	res.Ops, res.Records, res.Bytes, res.Verified = m, m, m*int64(p.size), m*int64(readers)
	res.P50, res.P99 = Percentiles(x.Lat)
	res.ReaderMBps = float64(int64(readers)*m*int64(p.size)) / 1e6 / x.ReadersDone.Seconds()
	res.LagP50, res.LagP99 = Percentiles(x.Lag)
	return res, nil
}
