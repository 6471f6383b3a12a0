package recovery_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

// The crash loop (pebble's TestDBWALRotationCrash): run a storage workload
// on crashfs and crash it at its k-th mutating file system operation, for
// every k until the workload finishes before k, in every crash mode; reopen
// what the crash left with storage.Open and check the durability promise.

const crashTopic = "c"

// crashPartitions is how many partitions the workload writes.
const crashPartitions = 2

// partModel is what the workload knows about one partition.
type partModel struct {
	values map[record.Offset]string // every record an append returned
	// acked: every offset below it was acknowledged by a completed Sync
	// (Partition.Sync, Log.Sync or Log.Close).
	acked record.Offset
	// startCeil is the highest log start offset the workload saw, including
	// one a retention that the crash interrupted had already set.
	startCeil record.Offset
}

// workload drives a Log through appends of varied sizes, syncs, rolls
// (segment.bytes is small), retention, a clean close and reopen, and a
// last close, stopping at the first error, which after a crash is expected.
type workload struct {
	t     *testing.T
	fs    vfs.FS
	dir   string
	rng   *rand.Rand
	log   *storage.Log
	parts [crashPartitions]*partModel
	now   atomic.Int64 // the log's clock, ms
	steps int
}

func newWorkload(t *testing.T, fs vfs.FS, dir string, seed uint64) *workload {
	w := &workload{t: t, fs: fs, dir: dir, rng: rand.New(rand.NewPCG(seed, 99))}
	for i := range w.parts {
		w.parts[i] = &partModel{values: map[record.Offset]string{}}
	}
	w.now.Store(1_700_000_000_000)
	return w
}

func (w *workload) clock() time.Time { return time.UnixMilli(w.now.Load()) }

func (w *workload) open() error {
	// No background work that depends on time: flush.ms never, checkpoints
	// and retention only when the workload asks, deletes at Close. The
	// flush that follows a roll still runs in the background.
	l, err := storage.Open(w.dir, storage.Options{
		FS: w.fs, Logger: testLogger(), Now: w.clock, RetentionCheckInterval: -1,
		CheckpointInterval: 24 * time.Hour, RecoveryThreads: 2,
		Defaults: overrides(w.t, "flush.ms=-1", "file.delete.delay.ms=3600000"),
	})
	if err != nil {
		return err
	}
	w.log = l
	return nil
}

func (w *workload) partition(i int) (*storage.Partition, error) {
	return w.log.Partition(crashTopic, i)
}

// run runs the workload and returns the first error.
func (w *workload) run() error {
	if err := w.open(); err != nil {
		return err
	}
	if _, err := w.log.CreateTopic(crashTopic, crashPartitions, overrides(w.t,
		"segment.bytes=1400", "index.interval.bytes=200", "segment.index.bytes=1024")); err != nil {
		return err
	}
	phase := func(appends int) error {
		for i := 0; i < appends; i++ {
			if err := w.appendOne(i % crashPartitions); err != nil {
				return err
			}
			switch {
			case i%7 == 6:
				if err := w.syncPartition(w.rng.IntN(crashPartitions)); err != nil {
					return err
				}
			case i%17 == 16:
				if err := w.syncLog(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := phase(40); err != nil {
		return err
	}
	// Retention: keep about two segments per partition.
	top, err := w.log.Topic(crashTopic)
	if err != nil {
		return err
	}
	o := top.Overrides()
	if err := o.Set("retention.bytes", "2800"); err != nil {
		return err
	}
	if err := top.SetConfig(o); err != nil {
		return err
	}
	if err := w.retention(); err != nil {
		return err
	}
	if err := phase(25); err != nil {
		return err
	}
	if err := w.closeLog(); err != nil {
		return err
	}
	if err := w.open(); err != nil {
		return err
	}
	if err := phase(30); err != nil {
		return err
	}
	if err := w.retention(); err != nil {
		return err
	}
	if err := phase(10); err != nil {
		return err
	}
	// Time passes: retention.ms condemns every segment, so retention rolls
	// a new active segment first and deletes all the others.
	top, err = w.log.Topic(crashTopic)
	if err != nil {
		return err
	}
	o = top.Overrides()
	if err := o.Set("retention.ms", "3600000"); err != nil {
		return err
	}
	if err := top.SetConfig(o); err != nil {
		return err
	}
	w.now.Add(2 * 3600 * 1000)
	if err := w.retention(); err != nil {
		return err
	}
	if err := phase(6); err != nil {
		return err
	}
	return w.closeLog()
}

func (w *workload) appendOne(i int) error {
	p, err := w.partition(i)
	if err != nil {
		return err
	}
	n := 1 + w.rng.IntN(3)
	recs := make([]storage.Record, n)
	vals := make([]string, n)
	for j := range recs {
		size := []int{0, 5, 40, 150, 400}[w.rng.IntN(5)] + w.rng.IntN(20)
		vals[j] = fmt.Sprintf("p%d-s%d-%d-", i, w.steps, j) + strings.Repeat(string(rune('a'+w.rng.IntN(26))), size)
		recs[j] = storage.Record{Timestamp: w.now.Add(10), Value: []byte(vals[j])}
	}
	w.steps++
	first, err := p.Append(recs)
	if err != nil {
		return err
	}
	for j, v := range vals {
		w.parts[i].values[first+record.Offset(j)] = v
	}
	return nil
}

func (w *workload) syncPartition(i int) error {
	p, err := w.partition(i)
	if err != nil {
		return err
	}
	end := p.EndOffset()
	if err := p.Sync(); err != nil {
		return err
	}
	w.parts[i].acked = max(w.parts[i].acked, end)
	return nil
}

func (w *workload) ends() [crashPartitions]record.Offset {
	var ends [crashPartitions]record.Offset
	for i := range ends {
		if p, err := w.partition(i); err == nil {
			ends[i] = p.EndOffset()
		}
	}
	return ends
}

func (w *workload) syncLog() error {
	ends := w.ends()
	if err := w.log.Sync(); err != nil {
		return err
	}
	for i, e := range ends {
		w.parts[i].acked = max(w.parts[i].acked, e)
	}
	return nil
}

func (w *workload) retention() error {
	_, err := w.log.EnforceRetention()
	w.observeStarts()
	return err
}

// observeStarts records the log start offsets, which a retention sets in
// memory before it renames the files it condemns.
func (w *workload) observeStarts() {
	if w.log == nil {
		return
	}
	for i := range w.parts {
		if p, err := w.partition(i); err == nil {
			w.parts[i].startCeil = max(w.parts[i].startCeil, p.StartOffset())
		}
	}
}

func (w *workload) closeLog() error {
	ends := w.ends()
	l := w.log
	w.log = nil
	if err := l.Close(); err != nil {
		return err
	}
	for i, e := range ends {
		w.parts[i].acked = max(w.parts[i].acked, e)
	}
	return nil
}

// abandon releases what a crashed log holds. Its Close fails at every file
// system call, but unmaps and closes the index files it holds directly,
// which may trim them: take the snapshot of the crash first.
func (w *workload) abandon() {
	if w.log != nil {
		w.log.Close()
		w.log = nil
	}
}

// crashVariant is a crash mode, and whether the index files (which crashfs
// does not model: they are memory-mapped) are damaged after the crash as a
// power loss could: left untrimmed, cut, zeroed or lost.
type crashVariant struct {
	mode   crashfs.Mode
	mangle bool
}

func (v crashVariant) String() string {
	if v.mangle {
		return v.mode.String() + "+indexes"
	}
	return v.mode.String()
}

var crashVariants = []crashVariant{
	{crashfs.DropAll, false},
	{crashfs.KeepPrefix, false},
	{crashfs.Reorder, false},
	{crashfs.KeepAll, false},
	{crashfs.KeepPrefix, true},
}

// TestCrashLoop crashes the workload at every mutating operation in every
// crash mode, and in one run of four also crashes the recovery that
// follows at a random operation before recovering again.
func TestCrashLoop(t *testing.T) {
	stride := 1
	if testing.Short() || raceEnabled {
		stride = 7 // a sample of the crash points; every one without -short and -race
	}
	const seed = 20261129
	var total atomic.Int64
	for _, v := range crashVariants {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			var chained int
			k := 0
			for ; ; k += stride {
				done, c := crashOnce(t, v, k, seed)
				chained += c
				if done {
					break
				}
			}
			total.Add(int64(k/stride + chained))
			t.Logf("%v: crashed at every %d of %d operations, plus %d crashes during recovery", v, stride, k, chained)
		})
	}
	t.Cleanup(func() { t.Logf("%d crash cases", total.Load()) })
}

// crashOnce runs the workload with a crash at operation k and checks the
// recovery. It reports whether the workload finished before k, and how many
// crashes during recovery it added.
func crashOnce(t *testing.T, v crashVariant, k int, seed uint64) (bool, int) {
	t.Helper()
	root, err := os.MkdirTemp(crashTempDir(), "logfs-crash-")
	require.NoError(t, err)
	defer os.RemoveAll(root)
	data := filepath.Join(root, "data")
	rng := rand.New(rand.NewPCG(seed, uint64(k)*16+uint64(v.mode)*2+b2u(v.mangle)))
	cfs := crashfs.New(vfs.Default)
	cfs.CrashAt(k, crashfs.CrashConfig{Mode: v.mode, Rand: rng})
	w := newWorkload(t, cfs, data, seed)
	err = w.run()
	w.observeStarts()
	crashed, cerr := cfs.Crashed()
	require.NoError(t, cerr, "k=%d", k)
	if !crashed {
		require.NoError(t, err, "k=%d: the workload fails only by crashing", k)
		// The workload finished: its own end state must hold too.
		checkRecovered(t, w, data, fmt.Sprintf("%v k=%d (no crash)", v, k))
		return true, 0
	}
	require.ErrorIs(t, err, crashfs.ErrCrashed, "k=%d", k)
	snap := filepath.Join(root, "snap")
	copyTree(t, data, snap)
	w.abandon()
	if v.mangle {
		mangleIndexes(t, snap, rng)
	}
	what := fmt.Sprintf("%v k=%d", v, k)
	chained := 0
	if k%4 == 0 {
		crashRecovery(t, snap, rng, what)
		chained = 1
	}
	checkRecovered(t, w, snap, what)
	return false, chained
}

// crashTempDir is where crash cases write: a tmpfs when there is one.
// crashfs models durability itself, so real fsyncs only cost time.
func crashTempDir() string {
	if d := os.Getenv("LOGFS_CRASH_TMPDIR"); d != "" {
		return d
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "logfs-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

// fastTempDir is t.TempDir on crashTempDir: for tests whose fsyncs prove
// nothing.
func fastTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp(crashTempDir(), "logfs-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// crashRecovery crashes storage.Open of dir at a random operation of its
// recovery, leaving in dir what that crash left.
func crashRecovery(t *testing.T, dir string, rng *rand.Rand, what string) {
	t.Helper()
	// Count the operations of a recovery on a copy.
	probe := dir + ".probe"
	copyTree(t, dir, probe)
	defer os.RemoveAll(probe)
	pfs := crashfs.New(vfs.Default)
	l, err := storage.Open(probe, storage.Options{FS: pfs, Logger: testLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err, "%s: recovery", what)
	ops := pfs.Ops()
	require.NoError(t, l.Close())
	if ops == 0 {
		return
	}
	j := rng.IntN(ops)
	mode := crashVariants[rng.IntN(4)].mode
	work := dir + ".work"
	copyTree(t, dir, work)
	defer os.RemoveAll(work)
	cfs := crashfs.New(vfs.Default)
	cfs.CrashAt(j, crashfs.CrashConfig{Mode: mode, Rand: rng})
	l, err = storage.Open(work, storage.Options{FS: cfs, Logger: testLogger(), RetentionCheckInterval: -1})
	crashed, cerr := cfs.Crashed()
	require.NoError(t, cerr)
	require.True(t, crashed, "%s: recovery crashed at %d of %d operations", what, j, ops)
	require.Error(t, err, "%s: a recovery that crashed fails", what)
	require.NoError(t, os.RemoveAll(dir))
	copyTree(t, work, dir)
}

// mangleIndexes damages index files as a power loss can: memory-mapped
// writes and trims that never reached the disk.
func mangleIndexes(t *testing.T, dir string, rng *rand.Rand) {
	t.Helper()
	if !exists(dir) {
		return
	}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		if !strings.HasSuffix(p, layout.IndexSuffix) && !strings.HasSuffix(p, layout.TimeIndexSuffix) {
			return nil
		}
		switch rng.IntN(6) {
		case 0: // untrimmed: preallocated to segment.index.bytes
			return os.Truncate(p, 1024)
		case 1: // cut anywhere
			return os.Truncate(p, rng.Int64N(info.Size()+1))
		case 2: // pages never written back
			return os.WriteFile(p, make([]byte, info.Size()), 0o644)
		case 3: // the file's creation never reached the disk
			return os.Remove(p)
		}
		return nil
	})
	require.NoError(t, err)
}

// checkRecovered opens dir, as after the crash, and checks the durability
// promise against what the workload knows: every acknowledged record is
// there with its exact bytes, the records are exactly [start, end) with no
// hole and each is one the workload appended, the log start did not pass
// what retention reached, Check passes, appends go on at the log end, and
// a clean close and reopen keep it all.
func checkRecovered(t *testing.T, w *workload, dir, what string) {
	t.Helper()
	opts := storage.Options{Logger: testLogger(), RetentionCheckInterval: -1}
	l, err := storage.Open(dir, opts)
	require.NoError(t, err, "%s: recovery", what)
	ends := make([]record.Offset, crashPartitions)
	for i, m := range w.parts {
		p, err := l.Partition(crashTopic, i)
		if err != nil {
			require.Zero(t, m.acked, "%s: partition %d lost", what, i)
			require.Empty(t, m.values, "%s: partition %d lost", what, i)
			ends[i] = -1
			continue
		}
		start, end := p.StartOffset(), p.EndOffset()
		require.GreaterOrEqual(t, end, m.acked, "%s: partition %d lost acknowledged records", what, i)
		require.LessOrEqual(t, start, m.startCeil, "%s: partition %d start passed retention", what, i)
		checkExactly(t, p, m, start, end, what)
		off, err := p.Append([]storage.Record{{Timestamp: 1, Value: []byte("after")}})
		require.NoError(t, err, "%s: append after recovery", what)
		require.Equal(t, end, off, "%s: partition %d: offsets go on at the log end", what, i)
		m.values[off] = "after" // for the reopen below; w is not used again
		ends[i] = end + 1
	}
	require.NoError(t, l.Check(), "%s: Check after recovery", what)
	require.NoError(t, l.Close())

	l, err = storage.Open(dir, opts)
	require.NoError(t, err, "%s: clean reopen", what)
	require.True(t, l.RecoveryReport().Clean || len(l.Topics()) == 0, "%s: the close was clean", what)
	for i, m := range w.parts {
		if ends[i] < 0 {
			continue
		}
		p, err := l.Partition(crashTopic, i)
		require.NoError(t, err)
		require.Equal(t, ends[i], p.EndOffset(), "%s: clean reopen", what)
		checkExactly(t, p, m, p.StartOffset(), ends[i], what)
	}
	require.NoError(t, l.Check(), "%s: Check after clean reopen", what)
	require.NoError(t, l.Close())
}

// checkExactly reads p from start: the records must be exactly [start,
// end), each with the value the workload appended at its offset.
func checkExactly(t *testing.T, p *storage.Partition, m *partModel, start, end record.Offset, what string) {
	t.Helper()
	r, err := p.NewReader(start)
	require.NoError(t, err, "%s", what)
	defer r.Close()
	next := start
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s: %v offset %d", what, p, next)
		require.Equal(t, next, rec.Offset, "%s: %v: a hole before %d", what, p, rec.Offset)
		want, ok := m.values[rec.Offset]
		require.True(t, ok, "%s: %v offset %d was never appended", what, p, rec.Offset)
		require.Equal(t, want, string(rec.Value), "%s: %v offset %d", what, p, rec.Offset)
		next++
	}
	require.Equal(t, end, next, "%s: %v reads up to the log end", what, p)
}
