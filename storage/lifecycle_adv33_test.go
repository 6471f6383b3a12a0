package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// newAdv33Gate is a file system that stops, once, the first Rename that
// matches: the goroutine making it is preempted right before the
// rename(2), as any thread may be, until the test lets it go (see
// adv35Gate).
func newAdv33Gate(match func(from, to string) bool) *adv35Gate {
	g := newAdv35Gate()
	g.arm(func(op, from, to string) bool { return op == "rename" && match(from, to) })
	return g
}

// adv33WaitOrFail waits for ch for at most d.
func adv33WaitOrFail(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// adv33MakeOld creates topic "t" of one partition holding records "old-i"
// at offsets 50 to 99: retention took the first 50.
func adv33MakeOld(t *testing.T, l *Log) {
	t.Helper()
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, _ := top.Partition(0)
	_, err = p.Append(values(100, "old"))
	require.NoError(t, err)
	_, err = p.AdvanceStart(50)
	require.NoError(t, err)
}

// adv33Replace deletes topic "t", creates it again with one partition,
// appends n records "new-i" and syncs them.
func adv33Replace(l *Log, n int) error {
	if err := l.DeleteTopic("t"); err != nil {
		return err
	}
	top, err := l.CreateTopic("t", 1, small("retention.ms=-1"))
	if err != nil {
		return err
	}
	p, err := top.Partition(0)
	if err != nil {
		return err
	}
	if _, err := p.Append(values(n, "new")); err != nil {
		return err
	}
	return p.Sync()
}

// adv33Recreate is adv33Replace, which must work.
func adv33Recreate(t *testing.T, l *Log, n int) {
	t.Helper()
	require.NoError(t, adv33Replace(l, n))
}

// adv33RecreateBeside runs adv33Recreate's steps beside an operation
// paused at g, which it lets go after 100 ms whether or not they are done
// (they may wait for the operation), then waits for both, done reporting
// the operation's end.
func adv33RecreateBeside(t *testing.T, l *Log, g *adv35Gate, done <-chan error, what string) {
	t.Helper()
	rec := make(chan error, 1)
	go func() { rec <- adv33Replace(l, 10) }()
	time.Sleep(100 * time.Millisecond)
	close(g.release)
	for _, ch := range []<-chan error{done, rec} {
		select {
		case err := <-ch:
			if ch == rec {
				require.NoError(t, err, "delete and create again")
			} // an error of the operation about the old files is fine
		case <-time.After(5 * time.Second):
			t.Fatalf("%s or the recreate hangs", what)
		}
	}
}

// adv33CheckNew reopens dir (a clean Close or a crash copy) and requires
// partition t-0 to hold exactly the n records "new-i" from offset 0.
func adv33CheckNew(t *testing.T, dir string, n int) {
	t.Helper()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%d:new-%d", i, i)
	}
	require.Equal(t, record.Offset(0), p.StartOffset(), "the new topic's log start")
	require.Equal(t, record.Offset(n), p.EndOffset(), "the new topic's log end")
	require.Equal(t, want, readAll(t, p, 0))
	require.NoError(t, l.Check())
}

// TestAdv33RetentionMeetsRecreatedTopic: promise "after a crash everything
// fsynced is there" (README, Durability) and "no batch that passes its
// checks is deleted". A retention run (EnforceRetention) detaches the old
// segments of topic t, writes the log start, and then renames the
// segments' files to *.deleted by path. If t is deleted and created again
// while the retention goroutine is between those steps, its renames must
// not reach the new topic's files, which have the same paths
// (t-0/00000000000000000000.log): the new topic's synced records must
// survive. Retention is paused at its first rename of a segment file (the
// delete then waits for it), and before that at the log start's
// checkpoint (the delete then runs first, and retention finds the
// partition closed).
func TestAdv33RetentionMeetsRecreatedTopic(t *testing.T) {
	for _, at := range []string{"segment", "checkpoint"} {
		t.Run(at, func(t *testing.T) { adv33RetentionMeetsRecreatedTopic(t, at) })
	}
}

func adv33RetentionMeetsRecreatedTopic(t *testing.T, at string) {
	dir := t.TempDir()
	seg0 := filepath.Join(dir, "t-0", layout.SegmentFileName(0, layout.LogSuffix))
	match := func(from, to string) bool { return from == seg0 && to == seg0+layout.DeletedSuffix }
	if at == "checkpoint" {
		match = func(from, to string) bool { return to == filepath.Join(dir, layout.LogStartFile) }
	}
	g := newAdv33Gate(match)
	l, err := Open(dir, Options{FS: g, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.bytes=0", "retention.ms=-1", "file.delete.delay.ms=3600000"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 10; i++ {
		_, err := p.Append(values(1, "old"))
		require.NoError(t, err)
	}
	require.Greater(t, len(p.SegmentBases()), 2)

	done := make(chan error, 1)
	go func() { _, err := l.EnforceRetention(); done <- err }()
	adv33WaitOrFail(t, g.reached, 5*time.Second, "retention's pause")
	adv33RecreateBeside(t, l, g, done, "retention")
	_, statErr := os.Stat(seg0)
	crashed := t.TempDir() // what a kill -9 now leaves
	copyDir(t, dir, crashed)
	require.NoError(t, l.Close())
	adv33CheckNew(t, crashed, 10)
	adv33CheckNew(t, dir, 10)
	require.NoError(t, statErr, "the new topic's first segment is where it was")
}

// TestAdv33AdvanceStartMeetsRecreatedTopic: the same promise for
// Partition.AdvanceStart (a follower copy's eviction and DeleteRecords):
// it lets go of the partition's lock, writes the checkpoints, then
// renames the segments it dropped by path. A topic deleted and created
// again meanwhile must not lose its synced records to it.
func TestAdv33AdvanceStartMeetsRecreatedTopic(t *testing.T) {
	dir := t.TempDir()
	seg0 := filepath.Join(dir, "t-0", layout.SegmentFileName(0, layout.LogSuffix))
	g := newAdv33Gate(func(from, to string) bool { return from == seg0 && to == seg0+layout.DeletedSuffix })
	l, err := Open(dir, Options{FS: g, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.ms=-1", "file.delete.delay.ms=3600000"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 10; i++ {
		_, err := p.Append(values(1, "old"))
		require.NoError(t, err)
	}
	bases := p.SegmentBases()
	require.Greater(t, len(bases), 2)

	done := make(chan error, 1)
	go func() { _, err := p.AdvanceStart(bases[2]); done <- err }()
	adv33WaitOrFail(t, g.reached, 5*time.Second, "AdvanceStart's pause")
	adv33RecreateBeside(t, l, g, done, "AdvanceStart")
	_, statErr := os.Stat(seg0)
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	require.NoError(t, l.Close())
	adv33CheckNew(t, crashed, 10)
	adv33CheckNew(t, dir, 10)
	require.NoError(t, statErr, "the new topic's first segment is where it was")
}

// TestAdv33PrependAbortMeetsRecreatedTopic: Prepend.Commit "fails,
// changing nothing, when the partition's first segment is no longer the
// one BeginPrepend saw". When the topic was deleted and created again
// meanwhile, the Abort that follows removes the prepended segments'
// files by path: it must not remove the new topic's segment of the same
// base offset, whose records were synced.
func TestAdv33PrependAbortMeetsRecreatedTopic(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1, Gaps: true})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, _ := top.Partition(0)
	require.NoError(t, p.ResetFetched(10, [][]byte{leaderBatch(t, 10, 2, "old")}))
	pp, err := p.BeginPrepend(0)
	require.NoError(t, err)
	require.NoError(t, pp.Append([][]byte{leaderBatch(t, 0, 2, "old")}))

	adv33Recreate(t, l, 10)
	require.Error(t, pp.Commit(), "the old partition is gone")
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	require.NoError(t, l.Close())
	adv33CheckNew(t, crashed, 10)
	adv33CheckNew(t, dir, 10)
}

// adv33Plant writes a checkpoint file of dir with the given lines
// ("topic partition offset").
func adv33Plant(t *testing.T, dir, name string, lines ...string) {
	t.Helper()
	b := fmt.Sprintf("0\n%d\n", len(lines))
	for _, l := range lines {
		b += l + "\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(b), 0o600))
}

// adv33Source makes a cleanly shut down data directory with topic t of
// one partition holding n records "old-i".
func adv33Source(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	l := reopen(t, dir, false)
	top, err := l.CreateTopic("t", 1, small("retention.ms=-1"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	_, err = p.Append(values(n, "old"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	return dir
}

// adv33NoOffsetTwice appends one record to t-0 of an open log and
// requires it to get an offset past every record already there, and the
// partition to read back without an offset twice.
func adv33NoOffsetTwice(t *testing.T, l *Log) {
	t.Helper()
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	before := readAll(t, p, p.StartOffset())
	off, err := p.Append(values(1, "after"))
	if err != nil {
		return // refusing to append is not handing an offset out twice
	}
	seen := map[string]bool{}
	for _, r := range before {
		var o int64
		_, _ = fmt.Sscanf(r, "%d:", &o)
		require.Less(t, o, int64(off), "offset %d handed out again; the log held %v", off, before)
	}
	for _, r := range readAll(t, p, p.StartOffset()) {
		var o int64
		_, _ = fmt.Sscanf(r, "%d:", &o)
		k := fmt.Sprint(o)
		require.False(t, seen[k], "offset %d twice", o)
		seen[k] = true
	}
}

// TestAdv33CleanLowRecoveryPoint: promise "no offset is handed out
// twice" and "nothing panics" with a damaged checkpoint: after a clean
// shutdown the recovery point of t-0 reads lower than the log end (a
// bit flipped in the file, or a duplicate entry whose later line is
// stale). The next open must not take it for the log end: the next
// append gets an offset past the records on disk, and Check passes.
func TestAdv33CleanLowRecoveryPoint(t *testing.T) {
	for name, lines := range map[string][]string{
		"lowered":   {"t 0 4"},
		"duplicate": {"t 0 10", "t 0 4"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := adv33Source(t, 10)
			adv33Plant(t, dir, layout.RecoveryPointFile, lines...)
			l := reopen(t, dir, false)
			defer l.Close()
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			require.Len(t, readAll(t, p, 0), 10, "every record is there")
			adv33NoOffsetTwice(t, l)
			require.NoError(t, l.Check())
		})
	}
}

// TestAdv33HugeCheckpointOffsets: promise "nothing panics", "no offset
// is handed out twice" and "nothing wrong is served" with a planted
// checkpoint entry far beyond the log (math.MaxInt64, and one short of
// it), after a clean shutdown and after a crash: the opens return, an
// append either fails or gives offsets that do not wrap past
// math.MaxInt64, and the data directory still opens afterwards.
func TestAdv33HugeCheckpointOffsets(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		clean      bool
	}{
		{"rp-clean", layout.RecoveryPointFile, true},
		{"rp-crash", layout.RecoveryPointFile, false},
		{"ls-clean", layout.LogStartFile, true},
		{"ls-crash", layout.LogStartFile, false},
	} {
		for _, off := range []int64{1<<63 - 1, 1<<63 - 2} {
			t.Run(fmt.Sprintf("%s-%d", tc.name, off), func(t *testing.T) {
				dir := adv33Source(t, 10)
				adv33Plant(t, dir, tc.file, fmt.Sprintf("t 0 %d", off))
				if !tc.clean {
					require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
				}
				ro, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1, ReadOnly: true})
				require.NoError(t, err)
				_ = ro.Check()
				require.NoError(t, ro.Close())

				l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
				require.NoError(t, err)
				p, err := l.Partition("t", 0)
				require.NoError(t, err)
				first, err := p.Append(values(3, "after"))
				if err == nil {
					assert.GreaterOrEqual(t, p.EndOffset(), first, "the log end wrapped past math.MaxInt64")
				}
				_ = l.Close()
				l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
				require.NoError(t, err, "the data directory opens again")
				_ = l.Check()
				require.NoError(t, l.Close())
			})
		}
	}
}

// TestAdv33PlantedEntriesOfAbsentTopic: checkpoint entries for a topic
// that does not exist (a delete whose checkpoint rewrite a crash
// prevented, or planted) are not inherited by a topic created under that
// name: its synced records survive a crash. Promise: "a topic deleted
// and created again under its old name takes nothing from the old one's
// checkpoints", "after a crash everything fsynced is there".
func TestAdv33PlantedEntriesOfAbsentTopic(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprint("clean=", clean), func(t *testing.T) {
			dir := adv33Source(t, 1) // topic t; "ghost" has entries only
			adv33Plant(t, dir, layout.LogStartFile, "ghost 0 50", "ghost 3 7", "t 0 0")
			adv33Plant(t, dir, layout.RecoveryPointFile, "ghost 0 100", "ghost 3 9", "t 0 1")
			if !clean {
				require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
			}
			l := reopen(t, dir, false)
			top, err := l.CreateTopic("ghost", 4, nil)
			require.NoError(t, err)
			for _, p := range top.Partitions() {
				_, err := p.Append(values(10, "new"))
				require.NoError(t, err)
				require.NoError(t, p.Sync())
			}
			crashed := t.TempDir()
			copyDir(t, dir, crashed)
			require.NoError(t, l.Close())
			l = reopen(t, crashed, false)
			defer l.Close()
			for id := 0; id < 4; id++ {
				p, err := l.Partition("ghost", id)
				require.NoError(t, err)
				require.Equal(t, record.Offset(0), p.StartOffset(), "partition %d", id)
				require.Equal(t, record.Offset(10), p.EndOffset(), "partition %d", id)
				require.Len(t, readAll(t, p, 0), 10)
			}
			require.NoError(t, l.Check())
		})
	}
}

// TestAdv33RecreateCrashSweep crashes, at each of its file system
// operations (keeping a random subset of what was not synced), the
// sequence: delete topic t (log start 50, recovery point 100 in the
// checkpoints), create t again, append 10 records, Partition.Sync.
// Promises: "a topic deleted and created again under its old name takes
// nothing from the old one's checkpoints", "after a crash everything
// fsynced is there", nothing panics. What the crash leaves is t as it
// was (records 50 to 99), no t, or the new t from offset 0 with a prefix
// of its records, all ten once Sync returned; never a mix.
func TestAdv33RecreateCrashSweep(t *testing.T) {
	src := t.TempDir()
	l := reopen(t, src, false)
	adv33MakeOld(t, l)
	keep, err := l.CreateTopic("keep", 1, nil)
	require.NoError(t, err)
	kp, _ := keep.Partition(0)
	_, err = kp.Append([]Record{{Value: []byte("kept")}})
	require.NoError(t, err)
	require.NoError(t, l.Close())

	synced := false
	run := func(dir string, cfs *crashfs.FS, before *int) (*Log, error) {
		synced = false
		l, err := Open(dir, Options{FS: cfs, Logger: testLogger(t), RetentionCheckInterval: -1})
		if err != nil {
			return nil, err
		}
		if before != nil {
			*before = cfs.Ops()
		}
		if err := adv33Replace(l, 10); err != nil {
			return l, err
		}
		synced = true
		return l, nil
	}
	olds, news, gones := 0, 0, 0
	crashEachOp(t, src, run, func(snap string, k int, seed uint64) {
		for _, readOnly := range []bool{true, false} {
			l, err := Open(snap, Options{Logger: testLogger(t), RetentionCheckInterval: -1, ReadOnly: readOnly})
			require.NoError(t, err, "k=%d seed=%d", k, seed)
			kp, err := l.Partition("keep", 0)
			require.NoError(t, err)
			require.Equal(t, []string{"0:kept"}, readAll(t, kp, 0))
			p, err := l.Partition("t", 0)
			if err != nil {
				require.ErrorIs(t, err, ErrNoTopic)
				require.False(t, synced, "k=%d seed=%d: the synced topic is gone", k, seed)
				gones++
			} else {
				got := readAll(t, p, p.StartOffset())
				if p.StartOffset() == 50 && len(got) == 50 && got[0] == "50:old-50" {
					require.False(t, synced, "k=%d seed=%d: the old topic is back after the new one synced", k, seed)
					require.Equal(t, record.Offset(100), p.EndOffset())
					olds++
				} else {
					require.Equal(t, record.Offset(0), p.StartOffset(), "k=%d seed=%d ro=%v: the new topic starts at 0; got %v", k, seed, readOnly, got)
					require.Equal(t, record.Offset(len(got)), p.EndOffset(), "k=%d seed=%d ro=%v", k, seed, readOnly)
					for i, r := range got {
						require.Equal(t, fmt.Sprintf("%d:new-%d", i, i), r, "k=%d seed=%d ro=%v", k, seed, readOnly)
					}
					if synced {
						require.Len(t, got, 10, "k=%d seed=%d ro=%v: synced records", k, seed, readOnly)
					}
					news++
				}
			}
			if !readOnly {
				require.NoError(t, l.Check(), "k=%d seed=%d", k, seed)
			}
			require.NoError(t, l.Close())
		}
	})
	require.NotZero(t, olds)
	require.NotZero(t, news)
	require.NotZero(t, gones)
}

// TestAdv33AddPartitionCrashSweep crashes, at each of its file system
// operations, the sequence: create topic n, append to partition 0,
// AddPartition(1), append to it, Log.Sync. Promises: creating a topic is
// all or nothing; a partition that exists after the crash is whole and
// serves only its own records from offset 0; what Sync made durable is
// there; Check passes; nothing panics.
func TestAdv33AddPartitionCrashSweep(t *testing.T) {
	src := sweepSource(t, false)
	synced := false
	run := func(dir string, cfs *crashfs.FS, before *int) (*Log, error) {
		synced = false
		l, err := Open(dir, Options{FS: cfs, Logger: testLogger(t), RetentionCheckInterval: -1})
		if err != nil {
			return nil, err
		}
		if before != nil {
			*before = cfs.Ops()
		}
		top, err := l.CreateTopic("n", 1, small("retention.ms=-1"))
		if err != nil {
			return l, err
		}
		p0, _ := top.Partition(0)
		if _, err := p0.Append(values(5, "p0")); err != nil {
			return l, err
		}
		p1, err := top.AddPartition(1)
		if err != nil {
			return l, err
		}
		if _, err := p1.Append(values(5, "p1")); err != nil {
			return l, err
		}
		if err := l.Sync(); err != nil {
			return l, err
		}
		synced = true
		return l, nil
	}
	crashEachOp(t, src, run, func(snap string, k int, seed uint64) {
		for _, readOnly := range []bool{true, false} {
			l, err := Open(snap, Options{Logger: testLogger(t), RetentionCheckInterval: -1, ReadOnly: readOnly})
			require.NoError(t, err, "k=%d seed=%d", k, seed)
			top, err := l.Topic("n")
			if err != nil {
				require.False(t, synced, "k=%d seed=%d", k, seed)
			} else {
				for _, p := range top.Partitions() {
					got := readAll(t, p, 0)
					require.Equal(t, record.Offset(0), p.StartOffset())
					require.Equal(t, record.Offset(len(got)), p.EndOffset(), "k=%d seed=%d", k, seed)
					for i, r := range got {
						require.Equal(t, fmt.Sprintf("%d:p%d-%d", i, p.ID(), i), r, "k=%d seed=%d", k, seed)
					}
					if synced {
						require.Len(t, got, 5, "k=%d seed=%d partition %d", k, seed, p.ID())
					}
				}
				if synced {
					require.Len(t, top.Partitions(), 2)
				}
			}
			if !readOnly {
				require.NoError(t, l.Check(), "k=%d seed=%d", k, seed)
			}
			require.NoError(t, l.Close())
		}
	})
}

// TestAdv33AfterClose: a Log that Close returned from has let go of the
// data directory (its lock, and the clean-shutdown marker is written):
// DeleteTopic, CreateTopic and AddPartition fail with ErrClosed and
// change nothing on disk, as Append does. Promise: one writer at a time
// ("a process that writes locks the directory"), and a clean shutdown's
// marker vouches for what is there.
func TestAdv33AfterClose(t *testing.T) {
	dir := adv33Source(t, 3)
	l := reopen(t, dir, false)
	top, err := l.Topic("t")
	require.NoError(t, err)
	p, _ := top.Partition(0)
	require.NoError(t, l.Close())
	before := mustReadDir(t, dir)

	_, err = p.Append(values(1, "late"))
	assert.ErrorIs(t, err, ErrClosed, "Append")
	_, err = l.CreateTopic("u", 1, nil)
	assert.ErrorIs(t, err, ErrClosed, "CreateTopic")
	_, err = top.AddPartition(1)
	assert.ErrorIs(t, err, ErrClosed, "AddPartition")
	assert.ErrorIs(t, l.DeleteTopic("t"), ErrClosed, "DeleteTopic")
	assert.Equal(t, before, mustReadDir(t, dir), "nothing changed in the data directory")
}

// TestAdv33LifecycleStorm runs topic creates, deletes and partition adds
// against Sync, retention, AdvanceStart, Check and appends from several
// goroutines, then Close. Promises: no deadlock (checkpoint writes take
// Log.mu before ckptMu; partition locks are never held across them),
// nothing panics, and after a crash copy taken once everything is
// synced, each surviving topic reads back whole from offset 0 (its
// records are its own) and Check passes.
func TestAdv33LifecycleStorm(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1, CheckpointInterval: time.Millisecond})
	require.NoError(t, err)
	names := []string{"a.b", "a_b", "c", "d"}
	var creates, deletes atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	worker := func(seed int, fn func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := seed; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				fn(i)
			}
		}()
	}
	for w := 0; w < 3; w++ {
		worker(w, func(i int) {
			name := names[i%len(names)]
			if i%3 == 0 {
				if l.DeleteTopic(name) == nil {
					deletes.Add(1)
				}
				return
			}
			if top, err := l.CreateTopic(name, 1+i%2, small("segment.bytes=400", "retention.ms=-1")); err == nil {
				creates.Add(1)
				_, _ = top.AddPartition(len(top.Partitions()))
			}
		})
	}
	worker(0, func(i int) {
		for _, n := range l.Topics() {
			if top, err := l.Topic(n); err == nil {
				for _, p := range top.Partitions() {
					if _, err := p.Append(values(3, fmt.Sprintf("%s/%d", n, p.ID()))); err == nil && i%4 == 0 {
						_, _ = p.AdvanceStart(p.EndOffset() - 1)
					}
				}
			}
		}
	})
	worker(0, func(i int) {
		_ = l.Sync()
		_, _ = l.EnforceRetention()
		if i%5 == 0 {
			_ = l.Check()
		}
	})
	// 1.5 s of storm, and more until the creates and deletes it needs went
	// through: a loaded machine under the race detector does fewer in the
	// time. The counts are checked below.
	for start := time.Now(); time.Since(start) < 1500*time.Millisecond ||
		(creates.Load() <= 5 || deletes.Load() <= 5) && time.Since(start) < time.Minute; {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		n := runtimeStack(buf)
		t.Fatalf("deadlock:\n%s", buf[:n])
	}
	require.Greater(t, creates.Load(), int64(5), "topics were created")
	require.Greater(t, deletes.Load(), int64(5), "topics were deleted")
	require.NoError(t, l.Sync())
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
	for _, d := range []string{crashed, dir} {
		l := reopen(t, d, false)
		for _, n := range l.Topics() {
			top, _ := l.Topic(n)
			for _, p := range top.Partitions() {
				got := readAll(t, p, p.StartOffset())
				require.Len(t, got, int(p.EndOffset()-p.StartOffset()), "%s-%d", n, p.ID())
				for _, r := range got {
					require.Contains(t, r, fmt.Sprintf(":%s/%d-", n, p.ID()), "%s-%d holds only its own records", n, p.ID())
				}
			}
		}
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
	}
}

func runtimeStack(buf []byte) int { return runtime.Stack(buf, true) }

// TestAdv33AddPartitionInheritsNoCheckpoint: checkpoint entries for a
// partition a topic does not have (t-1 of a topic of one partition: a
// checkpoint restored with the data, or planted) are not taken by the
// partition AddPartition makes under that number: its synced records
// survive a crash from offset 0. Promises: "after a crash everything
// fsynced is there", "recovery never deletes a batch that passes its
// checks" (here it would take them for deleted by retention).
func TestAdv33AddPartitionInheritsNoCheckpoint(t *testing.T) {
	dir := adv33Source(t, 1)
	adv33Plant(t, dir, layout.LogStartFile, "t 0 0", "t 1 50")
	adv33Plant(t, dir, layout.RecoveryPointFile, "t 0 1", "t 1 100")
	l := reopen(t, dir, false)
	top, err := l.Topic("t")
	require.NoError(t, err)
	p, err := top.AddPartition(1)
	require.NoError(t, err)
	_, err = p.Append(values(10, "new"))
	require.NoError(t, err)
	require.NoError(t, p.Sync())
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	require.NoError(t, l.Close())

	l = reopen(t, crashed, false)
	defer l.Close()
	require.Empty(t, l.RecoveryReport().Partitions[1].Expired, "nothing taken for deleted by retention")
	p, err = l.Partition("t", 1)
	require.NoError(t, err)
	require.Equal(t, record.Offset(0), p.StartOffset())
	require.Equal(t, record.Offset(10), p.EndOffset())
	require.Len(t, readAll(t, p, 0), 10)
	require.NoError(t, l.Check())
}

// TestAdv33RecreateFullDisk fills the disk at each file system operation
// of: delete topic t (log start 50, recovery point 100 checkpointed),
// create t again, append, Partition.Sync; then frees it and finishes the
// job (deleting a t still old, creating t if missing, appending), syncs
// and takes a crash copy. Promises: "a full disk is ENOSPC, not a crash"
// (every error is ENOSPC, nothing panics), the log goes on once there is
// room, and the new t takes nothing from the old one: after the crash it
// holds exactly what was appended to it, from offset 0.
func TestAdv33RecreateFullDisk(t *testing.T) {
	src := t.TempDir()
	l := reopen(t, src, false)
	adv33MakeOld(t, l)
	require.NoError(t, l.Close())

	steps := func(l *Log) error { return adv33Replace(l, 10) }
	probe := shmTempDir(t)
	copyDir(t, src, probe)
	cfs := crashfs.New(vfs.Default)
	l, err := Open(probe, Options{FS: cfs, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	from := cfs.Ops()
	require.NoError(t, steps(l))
	to := cfs.Ops()
	require.NoError(t, l.Close())

	for k := from; k < to; k++ {
		dir := shmTempDir(t)
		copyDir(t, src, dir)
		cfs := crashfs.New(vfs.Default)
		l, err := Open(dir, Options{FS: cfs, Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		cfs.FillAfter(k)
		if err := steps(l); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, "k=%d", k)
		}
		cfs.Free()
		if p, err := l.Partition("t", 0); err == nil && p.StartOffset() == 50 {
			require.NoError(t, l.DeleteTopic("t"), "k=%d", k)
		}
		top, err := l.Topic("t")
		if err != nil {
			top, err = l.CreateTopic("t", 1, nil)
			require.NoError(t, err, "k=%d: create after the disk has room", k)
		}
		p, err := top.Partition(0)
		require.NoError(t, err, "k=%d", k)
		_, err = p.Append(values(1, "more"))
		require.NoError(t, err, "k=%d", k)
		require.NoError(t, p.Sync(), "k=%d", k)
		want := readAll(t, p, 0)
		require.Equal(t, record.Offset(0), p.StartOffset(), "k=%d", k)
		crashed := shmTempDir(t)
		copyDir(t, dir, crashed)
		require.NoError(t, l.Close(), "k=%d", k)

		l = reopen(t, crashed, false)
		p, err = l.Partition("t", 0)
		require.NoError(t, err, "k=%d", k)
		require.Equal(t, record.Offset(0), p.StartOffset(), "k=%d", k)
		require.Equal(t, want, readAll(t, p, 0), "k=%d: what was synced, from 0", k)
		require.NoError(t, l.Check(), "k=%d", k)
		require.NoError(t, l.Close())
	}
}

// TestAdv33PlantedOddEntries: checkpoint entries that are odd but say
// nothing about t-0's data (negative offsets, entries of partitions and
// topics that do not exist, a repeated line) change nothing, after a
// clean shutdown or a crash: every record reads back, the next append
// gets offset 10, Check passes. Promises: "nothing panics", "recovery
// never deletes a batch that passes its checks", "no offset is handed
// out twice".
func TestAdv33PlantedOddEntries(t *testing.T) {
	cases := map[string][2][]string{ // log start lines, recovery point lines
		"negative-rp":   {{"t 0 0"}, {"t 0 -5"}},
		"negative-ls":   {{"t 0 -7"}, {"t 0 10"}},
		"both-negative": {{"t 0 -1"}, {"t 0 -1"}},
		"others":        {{"t 0 0", "t 7 99", "zz 0 5"}, {"t 0 10", "t 7 99", "zz 0 500"}},
		"repeated":      {{"t 0 0", "t 0 0"}, {"t 0 10", "t 0 10"}},
	}
	for name, c := range cases {
		for _, clean := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/clean=%v", name, clean), func(t *testing.T) {
				dir := adv33Source(t, 10)
				adv33Plant(t, dir, layout.LogStartFile, c[0]...)
				adv33Plant(t, dir, layout.RecoveryPointFile, c[1]...)
				if !clean {
					require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
				}
				l := reopen(t, dir, false)
				defer l.Close()
				p, err := l.Partition("t", 0)
				require.NoError(t, err)
				require.Equal(t, record.Offset(0), p.StartOffset())
				require.Len(t, readAll(t, p, 0), 10)
				off, err := p.Append(values(1, "after"))
				require.NoError(t, err)
				require.Equal(t, record.Offset(10), off)
				require.NoError(t, l.Check())
			})
		}
	}
}

// TestAdv33FailedDeleteThenCreate makes each file system operation of a
// DeleteTopic fail once (EIO), then creates the topic again, appends and
// syncs. Promises: a topic is whole or gone, never a mix of the old and
// the new; a CreateTopic that succeeded, and records it synced, are what
// the next open shows (the old topic never comes back over them);
// nothing panics; Check passes.
func TestAdv33FailedDeleteThenCreate(t *testing.T) {
	src := t.TempDir()
	l := reopen(t, src, false)
	top, err := l.CreateTopic("t", 2, small("retention.ms=-1"))
	require.NoError(t, err)
	for _, p := range top.Partitions() {
		_, err = p.Append(values(5, "old"))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())

	probe := shmTempDir(t)
	copyDir(t, src, probe)
	cfs := crashfs.New(vfs.Default)
	l, err = Open(probe, Options{FS: cfs, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	from := cfs.Ops()
	require.NoError(t, l.DeleteTopic("t"))
	to := cfs.Ops()
	require.NoError(t, l.Close())

	for k := from; k < to; k++ {
		dir := shmTempDir(t)
		copyDir(t, src, dir)
		cfs := crashfs.New(vfs.Default)
		l, err := Open(dir, Options{FS: cfs, Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		cfs.FailAfter(k, syscall.EIO)
		delErr := l.DeleteTopic("t")
		created := false
		if top, err := l.CreateTopic("t", 1, nil); err == nil {
			p, _ := top.Partition(0)
			_, err = p.Append(values(3, "new"))
			require.NoError(t, err, "k=%d", k)
			require.NoError(t, p.Sync(), "k=%d", k)
			created = true
		}
		_ = l.Close()

		for _, readOnly := range []bool{true, false} {
			l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1, ReadOnly: readOnly})
			require.NoError(t, err, "k=%d delete: %v", k, delErr)
			top, err := l.Topic("t")
			switch {
			case created:
				require.NoError(t, err, "k=%d ro=%v delete: %v: the created topic is there", k, readOnly, delErr)
				if !assert.Len(t, top.Partitions(), 1, "k=%d ro=%v delete: %v", k, readOnly, delErr) {
					l.Close()
					continue
				}
				p, _ := top.Partition(0)
				require.Equal(t, []string{"0:new-0", "1:new-1", "2:new-2"}, readAll(t, p, 0), "k=%d ro=%v delete: %v", k, readOnly, delErr)
			case err == nil:
				require.Len(t, top.Partitions(), 2, "k=%d ro=%v delete: %v: the old topic, whole", k, readOnly, delErr)
				assert.Equal(t, int64(-1), top.Config().RetentionMs, "k=%d ro=%v delete: %v: the old topic, with its settings", k, readOnly, delErr)
				for _, p := range top.Partitions() {
					require.Len(t, readAll(t, p, 0), 5, "k=%d ro=%v", k, readOnly)
				}
			}
			if !readOnly {
				require.NoError(t, l.Check(), "k=%d", k)
			}
			require.NoError(t, l.Close())
		}
	}
}
