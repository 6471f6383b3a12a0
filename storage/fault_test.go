package storage

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// faultModel is what a fault workload knows: the value of every record an
// append acknowledged.
type faultModel struct {
	values []string // by offset, from 0
}

// faultWorkload drives a log through appends of one to forty records (so
// that one Append may take several batches, by max.message.bytes, and roll
// several times, by segment.bytes and by a small segment.index.bytes),
// syncs, a checkpoint, retention of nothing (retention.bytes is large), a
// clean close and a reopen. Every call that fails must fail with want
// (errors.Is) and leave the partition exactly as the model says; the
// workload then goes on. Failed opens are retried.
type faultWorkload struct {
	t     *testing.T
	fs    vfs.FS
	dir   string
	want  error
	model faultModel
	rng   *rand.Rand
	log   *Log
	p     *Partition
	fails int // calls that failed
	// onFail, if set, is called after each failure (the full-disk mode
	// frees the disk there).
	onFail func()
}

func (w *faultWorkload) check(what string, err error) bool {
	w.t.Helper()
	if err == nil {
		return true
	}
	w.fails++
	require.ErrorIs(w.t, err, w.want, "%s", what)
	if w.onFail != nil {
		w.onFail()
	}
	return false
}

func (w *faultWorkload) open() {
	w.t.Helper()
	for try := 0; ; try++ {
		l, err := Open(w.dir, Options{FS: w.fs, Logger: testLogger(w.t), RetentionCheckInterval: -1,
			Defaults: small("flush.ms=-1")})
		if w.check("open", err) {
			w.log = l
			break
		}
		require.Less(w.t, try, 3, "open keeps failing")
	}
	if top, err := w.log.Topic("t"); err == nil {
		w.p, _ = top.Partition(0)
		return
	}
	for try := 0; ; try++ {
		top, err := w.log.CreateTopic("t", 1, small("segment.bytes=3000", "max.message.bytes=700",
			"index.interval.bytes=120", "segment.index.bytes=64", "retention.bytes=100000000"))
		if w.check("create topic", err) {
			w.p, _ = top.Partition(0)
			return
		}
		require.Less(w.t, try, 3, "create keeps failing")
	}
}

// appendOne appends a write of 1 to 40 records, up to 300 bytes each,
// with Append at even steps and AppendValues (an append file's) at odd.
func (w *faultWorkload) appendOne(step int) {
	w.t.Helper()
	n := 1 + w.rng.IntN(40)
	recs := make([]Record, n)
	raw := make([][]byte, n)
	vals := make([]string, n)
	for i := range recs {
		vals[i] = fmt.Sprintf("s%d-%d-%s", step, i, strings.Repeat("x", w.rng.IntN(300)))
		recs[i] = Record{Value: []byte(vals[i])}
		raw[i] = recs[i].Value
	}
	end := w.p.EndOffset()
	require.Equal(w.t, record.Offset(len(w.model.values)), end, "step %d: the log end", step)
	var first record.Offset
	var err error
	if step%2 == 0 {
		first, err = w.p.Append(recs)
	} else {
		first, err = w.p.AppendValues(raw)
	}
	if w.check(fmt.Sprintf("append at step %d", step), err) {
		require.Equal(w.t, end, first)
		w.model.values = append(w.model.values, vals...)
	} else {
		require.Equal(w.t, end, w.p.EndOffset(), "step %d: a failed append moved the log end", step)
	}
	// Nothing partial is visible, whatever happened: the log is the model.
	if step%5 == 0 || err != nil {
		w.requireLog(fmt.Sprintf("step %d", step))
	}
}

// requireLog reads the partition from its start and compares it with the
// model.
func (w *faultWorkload) requireLog(what string) {
	w.t.Helper()
	got := readAll(w.t, w.p, w.p.StartOffset())
	require.Len(w.t, got, len(w.model.values), "%s: records", what)
	for i, g := range got {
		require.Equal(w.t, strconv.Itoa(i)+":"+w.model.values[i], g, "%s: record %d", what, i)
	}
}

func (w *faultWorkload) run() {
	w.t.Helper()
	w.open()
	for step := 0; step < 60; step++ {
		w.appendOne(step)
		switch step % 13 {
		case 4:
			w.check("sync", w.p.Sync())
		case 9:
			w.check("log sync", w.log.Sync())
		case 11:
			_, err := w.log.EnforceRetention()
			w.check("retention", err)
		}
		if step == 30 {
			w.check("close", w.log.Close())
			w.open()
			w.requireLog("after a reopen")
		}
	}
	w.check("close", w.log.Close())
}

// reopenAndCheck opens dir without faults, as the next start would, and
// requires exactly the acknowledged records, a passing Check, and appends
// at the log end.
func reopenAndCheck(t *testing.T, dir string, m faultModel, what string) {
	t.Helper()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err, "%s: reopen", what)
	defer func() { require.NoError(t, l.Close()) }()
	p, err := l.Partition("t", 0)
	require.NoError(t, err, "%s", what)
	got := readAll(t, p, 0)
	require.Len(t, got, len(m.values), "%s: records after reopen", what)
	for i, g := range got {
		require.Equal(t, strconv.Itoa(i)+":"+m.values[i], g, "%s: record %d after reopen", what, i)
	}
	require.NoError(t, l.Check(), "%s", what)
	off, err := p.Append(values(1, "after"))
	require.NoError(t, err, "%s", what)
	require.Equal(t, record.Offset(len(m.values)), off, "%s", what)
}

// TestFaultAtEveryOperation fails each mutating file system operation of a
// workload in turn, with ENOSPC, EIO and EDQUOT, and with a disk that
// stays full until the failed call returns: every failing call reports the
// error, nothing of a failed append is ever visible, the log goes on, and
// the next start has every acknowledged record and nothing else. The index
// files go through the same file system as the logs, so their writes are
// among the operations.
func TestFaultAtEveryOperation(t *testing.T) {
	t.Parallel() // its own folder and no package settings: runs beside the other slow ones
	dir := shmTempDir(t)
	probe := crashfs.New(vfs.Default)
	w := &faultWorkload{t: t, fs: probe, dir: dir + "/probe", want: nil, rng: rand.New(rand.NewPCG(1, 1))}
	w.run()
	ops := probe.Ops()
	require.Zero(t, w.fails)
	require.Greater(t, ops, 300, "the workload is too small to say much")
	// About 20 operations per mode by default (a few seconds, more under
	// -race); LOGFS_FAULT_STRIDE=1 fails every one of them (minutes).
	stride := max(ops/20, 1)
	if s := os.Getenv("LOGFS_FAULT_STRIDE"); s != "" {
		var err error
		stride, err = strconv.Atoi(s)
		require.NoError(t, err, "LOGFS_FAULT_STRIDE")
	}
	for m, mode := range []string{"ENOSPC", "EIO", "EDQUOT", "full"} {
		t.Run(mode, func(t *testing.T) {
			failed := 0
			for k := m * stride / 4; k < ops+10; k += stride {
				d := fmt.Sprintf("%s/%s-%d", dir, mode, k)
				fs := crashfs.New(vfs.Default)
				w := &faultWorkload{t: t, fs: fs, dir: d, rng: rand.New(rand.NewPCG(1, 1))}
				switch mode {
				case "ENOSPC":
					w.want = syscall.ENOSPC
					fs.FailAfter(k, fmt.Errorf("%w: %w", crashfs.ErrInjected, syscall.ENOSPC))
				case "EIO":
					w.want = syscall.EIO
					fs.FailAfter(k, fmt.Errorf("%w: %w", crashfs.ErrInjected, syscall.EIO))
				case "EDQUOT":
					w.want = syscall.EDQUOT
					fs.FailAfter(k, fmt.Errorf("%w: %w", crashfs.ErrInjected, syscall.EDQUOT))
				case "full":
					w.want = syscall.ENOSPC
					fs.FillAfter(k)
					w.onFail = fs.Free
				}
				w.run()
				if w.fails > 0 {
					failed++
				}
				reopenAndCheck(t, d, w.model, fmt.Sprintf("%s k=%d", mode, k))
				require.NoError(t, os.RemoveAll(d))
			}
			t.Logf("%s: every %d of %d operations: %d runs saw a failure", mode, stride, ops, failed)
			require.Greater(t, failed, ops/stride/3, "most faults must reach a caller (the others hit the background flush)")
		})
	}
}

// TestFailedAppendLeavesNothing: a write that spans several batches and
// rolls, failing at its last write, leaves no record, no segment and no
// index entry of it, and the same write then succeeds.
func TestFailedAppendLeavesNothing(t *testing.T) {
	fs := crashfs.New(vfs.Default)
	dir := t.TempDir()
	l := openLog(t, dir, Options{FS: fs})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=2000", "max.message.bytes=500", "index.interval.bytes=100"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	_, err = p.Append(values(5, "before"))
	require.NoError(t, err)
	big := make([]Record, 60)
	for i := range big {
		big[i] = Record{Value: []byte(fmt.Sprintf("big-%d-%s", i, strings.Repeat("y", 90)))}
	}

	// Learn how many operations the write takes, on a copy.
	probeDir := t.TempDir()
	require.NoError(t, os.CopyFS(probeDir, os.DirFS(dir)))
	segsBefore, entries := len(p.segments()), indexEntries(t, p)
	before := readAll(t, p, 0)
	ops0 := fs.Ops()
	for k := 0; ; k++ {
		fs.FailAfter(ops0+k, fmt.Errorf("%w: %w", crashfs.ErrInjected, syscall.ENOSPC))
		first, err := p.Append(big)
		if err == nil {
			fs.FailAfter(-1, nil)
			require.Equal(t, record.Offset(5), first)
			require.Greater(t, len(p.segments()), segsBefore, "the write rolled")
			require.Greater(t, k, 10, "the write took several operations")
			break
		}
		require.ErrorIs(t, err, syscall.ENOSPC, "k=%d", k)
		require.Equal(t, record.Offset(5), p.EndOffset(), "k=%d", k)
		require.Equal(t, before, readAll(t, p, 0), "k=%d", k)
		require.Len(t, p.segments(), segsBefore, "k=%d: a rolled segment stayed", k)
		require.Equal(t, entries, indexEntries(t, p), "k=%d: index entries stayed", k)
		require.NoError(t, p.Check(), "k=%d", k)
		requireNoStraySegments(t, p, k)
		ops0 = fs.Ops()
	}
	got := readAll(t, p, 0)
	require.Len(t, got, 65)
	for i, b := range big {
		require.Equal(t, fmt.Sprintf("%d:%s", 5+i, b.Value), got[5+i])
	}
}

// indexEntries returns the entries of every index of p, segment by
// segment.
func indexEntries(t *testing.T, p *Partition) []int {
	t.Helper()
	var out []int
	for _, s := range p.segments() {
		s.idxMu.RLock()
		a, err := s.offIdx.Entries()
		require.NoError(t, err)
		b, err := s.timeIdx.Entries()
		require.NoError(t, err)
		s.idxMu.RUnlock()
		out = append(out, a, b)
	}
	return out
}

// requireNoStraySegments requires that p's folder holds the files of its
// segments and nothing else a start would take for a segment.
func requireNoStraySegments(t *testing.T, p *Partition, k int) {
	t.Helper()
	ents, err := os.ReadDir(p.dir)
	require.NoError(t, err)
	want := map[string]bool{}
	for _, s := range p.segments() {
		for _, q := range []string{s.logPath(), s.indexPath(), s.timeIndexPath(), s.viewIndexPath()} {
			want[q[len(p.dir)+1:]] = true
		}
	}
	for _, e := range ents {
		require.True(t, want[e.Name()], "k=%d: stray %s", k, e.Name())
	}
}

// TestAppendSplitsByMaxMessageBytes: one Append is one batch when it fits
// max.message.bytes, and the fewest batches that each fit otherwise.
func TestAppendSplitsByMaxMessageBytes(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("max.message.bytes=2000"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	_, err = p.Append(values(10, "small"))
	require.NoError(t, err)
	require.Len(t, batchesOf(t, p.active(), false), 1)
	recs := make([]Record, 100)
	for i := range recs {
		recs[i] = Record{Value: []byte(strings.Repeat("z", 100))}
	}
	first, err := p.Append(recs)
	require.NoError(t, err)
	require.Equal(t, record.Offset(10), first)
	bs := batchesOf(t, p.active(), false)
	require.GreaterOrEqual(t, len(bs), 1+100*100/2000)
	for _, b := range bs {
		require.LessOrEqual(t, int64(b.Size()), int64(2000), "batch at %d", b.BaseOffset)
	}
	require.Equal(t, record.Offset(110), p.EndOffset())
	require.Len(t, readAll(t, p, 0), 110)
}

// TestFailedAppendIsNeverSeen: followers waiting for records while
// multi-batch appends fail at random see only records of appends that
// succeeded.
func TestFailedAppendIsNeverSeen(t *testing.T) {
	fs := crashfs.New(vfs.Default)
	l := openLog(t, t.TempDir(), Options{FS: fs})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=4000", "max.message.bytes=600", "index.interval.bytes=100"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	seen := make(chan []string)
	go func() {
		var got []string
		r, err := p.NewReader(0)
		if err != nil {
			seen <- []string{err.Error()}
			return
		}
		defer r.Close()
		next := record.Offset(0)
		for len(got) < 2000 {
			rec, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					got = append(got, "error: "+err.Error())
					break
				}
				if p.Wait(t.Context(), next) != nil {
					break
				}
				continue
			}
			next = rec.Offset + 1
			got = append(got, string(rec.Value))
		}
		seen <- got
	}()
	rng := rand.New(rand.NewPCG(3, 3))
	ok := map[string]bool{}
	total := 0
	for w := 0; total < 2000; w++ {
		n := 1 + rng.IntN(30)
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{Value: []byte(fmt.Sprintf("w%d-%d-%s", w, i, strings.Repeat("q", rng.IntN(200))))}
		}
		if rng.IntN(3) == 0 {
			fs.FailAfter(fs.Ops()+rng.IntN(8), fmt.Errorf("%w: %w", crashfs.ErrInjected, syscall.EIO))
		}
		if _, err := p.Append(recs); err != nil {
			require.ErrorIs(t, err, syscall.EIO)
			continue
		}
		fs.FailAfter(-1, nil)
		for _, r := range recs {
			ok[string(r.Value)] = true
		}
		total += n
	}
	got := <-seen
	require.Len(t, got, 2000)
	for i, v := range got {
		require.True(t, ok[v], "record %d, %q, is of a failed append", i, v)
	}
}

// TestFailedViewIndexWriteLeavesNoTmp fails each operation of a clean
// close in turn, after reads built a view index: whatever fails, no
// half-written view-index copy stays to take room on a full disk, and the
// next open renders the same bytes.
func TestFailedViewIndexWriteLeavesNoTmp(t *testing.T) {
	for k := 0; k < 40; k++ {
		fs := crashfs.New(vfs.Default)
		dir := t.TempDir()
		l, err := Open(dir, Options{FS: fs, Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		top, err := l.CreateTopic("t", 1, small("segment.bytes=100000"))
		require.NoError(t, err)
		p, _ := top.Partition(0)
		for i := 0; i < 50; i++ {
			_, err := p.Append(values(3, strings.Repeat("z", i)))
			require.NoError(t, err)
		}
		want := renderAll(t, p, Values, 0)
		fs.FailAfter(fs.Ops()+k, fmt.Errorf("%w: %w", crashfs.ErrInjected, syscall.ENOSPC))
		if err := l.Close(); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, "k=%d", k)
		}
		tmps, err := filepath.Glob(filepath.Join(dir, "t-0", "*.tmp"))
		require.NoError(t, err)
		require.Empty(t, tmps, "k=%d", k)
		l = openLog(t, dir, Options{})
		p, err = l.Partition("t", 0)
		require.NoError(t, err)
		require.Equal(t, want, renderAll(t, p, Values, 0), "k=%d", k)
	}
}
