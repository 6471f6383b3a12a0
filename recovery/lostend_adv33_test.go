package recovery_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

// Adversarial tests of commit 16c4e74: a gapless log that ends below the
// recovery point of the checkpoint goes on at the recovery point, past a
// hole.

// adv33Logs lists the .log files of a partition folder.
func adv33Logs(t *testing.T, dir string) []string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*"+layout.LogSuffix))
	require.NoError(t, err)
	for i := range logs {
		logs[i] = filepath.Base(logs[i])
	}
	sort.Strings(logs)
	return logs
}

func adv33SetCheckpoint(t *testing.T, data, file string, off record.Offset) {
	t.Helper()
	require.NoError(t, recovery.WriteCheckpoint(vfs.Default, filepath.Join(data, file),
		map[recovery.TopicPartition]record.Offset{{Topic: "t", Partition: 0}: off}))
}

// adv33Findings splits what Check returns into its findings: Check joins
// them (errors.Join, possibly nested), and a finding wraps ErrCheck and
// what it found.
func adv33Findings(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || reflect.TypeOf(err) != reflect.TypeOf(errors.Join(err)) {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, adv33Findings(e)...)
	}
	return out
}

// adv33RequireOnlyHoles requires Check to fail, and only with holes: no
// broken segment, index or log end.
func adv33RequireOnlyHoles(t *testing.T, l *storage.Log, what string) {
	t.Helper()
	err := l.Check()
	require.Error(t, err, "%s: Check reports the hole", what)
	for _, e := range adv33Findings(err) {
		require.ErrorIs(t, e, storage.ErrHole, "%s: Check finds nothing but the hole: %v", what, e)
	}
}

// adv33RequireHoleAt requires a Reader and a View from offset off to fail
// with ErrHole.
func adv33RequireHoleAt(t *testing.T, p *storage.Partition, off record.Offset, what string) {
	t.Helper()
	r, err := p.NewReader(off)
	if err == nil {
		_, err = r.Next()
		r.Close()
	}
	require.ErrorIs(t, err, storage.ErrHole, "%s: a Reader from lost offset %d", what, off)
	v, err := p.NewView(storage.Values, off)
	if err == nil {
		buf := make([]byte, 64)
		_, err = v.ReadAt(buf, 0)
		v.Close()
	}
	require.ErrorIs(t, err, storage.ErrHole, "%s: a View from lost offset %d", what, off)
}

// adv33Damage is a way to lose the end of a cleanly closed partition
// below its recovery point; it returns the first offset lost.
type adv33Damage struct {
	name string
	do   func(t *testing.T, b *built) record.Offset
}

var adv33Damages = []adv33Damage{
	{"last .log deleted", func(t *testing.T, b *built) record.Offset {
		require.NoError(t, os.Remove(b.path(b.last(), layout.LogSuffix)))
		return b.segs[b.last()].base
	}},
	{"last batch truncated away", func(t *testing.T, b *built) record.Offset {
		truncateFile(t, b.path(b.last(), layout.LogSuffix), int64(b.lastBatch(b.last()).pos))
		return b.lastBatch(b.last()).base
	}},
	{"last .log emptied", func(t *testing.T, b *built) record.Offset {
		truncateFile(t, b.path(b.last(), layout.LogSuffix), 0)
		return b.segs[b.last()].base
	}},
	{"last batch's crc flipped", func(t *testing.T, b *built) record.Offset {
		p := b.path(b.last(), layout.LogSuffix)
		data := readFile(t, p)
		data[b.lastBatch(b.last()).pos+17] ^= 0x40 // the CRC-32C
		writeFile(t, p, data)
		return b.lastBatch(b.last()).base
	}},
}

// TestAdv33LostEndIdempotent: once a writable open has started the log
// again at the recovery point past a hole, every later open (clean,
// unclean, read-only as `check`, forced as `check --repair`, twice, and
// read-only forced) finds the same log: the same log end, no second empty
// segment, the same one hole for forced loads, nothing cut or set aside,
// reads inside the hole fail with ErrHole and Check finds nothing but the
// hole; the first append after all that gets the recovery point.
func TestAdv33LostEndIdempotent(t *testing.T) {
	for _, d := range adv33Damages {
		for _, clean := range []bool{false, true} {
			if clean && d.name != "last .log deleted" {
				continue // the marker vouches for the bytes of a clean shutdown
			}
			t.Run(fmt.Sprintf("%s/clean=%v", d.name, clean), func(t *testing.T) {
				b := buildPartition(t, 60)
				lost := d.do(t, b)
				if !clean {
					removeMarker(t, b.data)
				}
				l, p := adv32Open(t, b.data, storage.Options{})
				require.Equal(t, b.end, p.EndOffset(), "the log goes on at the recovery point")
				holes := l.RecoveryReport().Partitions[0].Holes
				require.Len(t, holes, 1)
				require.Equal(t, lost, holes[0].From)
				require.Equal(t, b.end, holes[0].To)
				require.NoError(t, l.Close())
				want := adv33Logs(t, b.dir)

				for i, o := range []struct {
					opts    storage.Options
					unclean bool
				}{
					{storage.Options{}, false},
					{storage.Options{}, true},
					{storage.Options{ReadOnly: true}, false},
					{storage.Options{ReadOnly: true}, true},
					{storage.Options{ReadOnly: true, ForceRecovery: true}, false},
					{storage.Options{ForceRecovery: true}, false},
					{storage.Options{ForceRecovery: true}, false},
					{storage.Options{ReadOnly: true, ForceRecovery: true}, true},
					{storage.Options{}, true},
				} {
					what := fmt.Sprintf("open %d (%+v, unclean %v)", i, o.opts, o.unclean)
					if o.unclean && markerExists(b.data) {
						removeMarker(t, b.data)
					}
					l, p := adv32Open(t, b.data, o.opts)
					require.Equal(t, b.end, p.EndOffset(), "%s: the same log end", what)
					if o.opts.ForceRecovery {
						h := l.RecoveryReport().Partitions[0].Holes
						require.Len(t, h, 1, "%s: the one hole", what)
						require.Equal(t, [2]record.Offset{lost, b.end}, [2]record.Offset{h[0].From, h[0].To}, "%s", what)
					}
					require.Empty(t, l.RecoveryReport().Partitions[0].Dropped, "%s", what)
					require.Empty(t, l.RecoveryReport().Partitions[0].Cuts, "%s: nothing left to cut", what)
					adv33RequireHoleAt(t, p, lost, what)
					adv33RequireHoleAt(t, p, b.end-1, what)
					adv33RequireOnlyHoles(t, l, what)
					require.NoError(t, l.Close())
					require.Equal(t, want, adv33Logs(t, b.dir), "%s: no second empty segment", what)
				}
				// The first append after all that gets the recovery point.
				l, p = adv32Open(t, b.data, storage.Options{})
				off, err := p.Append([]storage.Record{{Value: []byte("after")}})
				require.NoError(t, err)
				require.Equal(t, b.end, off, "no offset is handed out twice")
				require.NoError(t, l.Close())
			})
		}
	}
}

// TestAdv33CleanShutdownLostEnd: README (Holes) promises that when damage
// takes the end of the log below the recovery point ("or its .log
// deleted") the next writable open starts a new segment at the recovery
// point and the lost offsets stay a hole, which reads report (ErrHole)
// instead of waiting at them. Here the data directory was shut down
// cleanly and then lost its last segment whole (`rm 000…N.*`: the .log
// and its index files). A forced read-only load names the hole and says
// "a writable open goes on at" the recovery point; the writable open must
// then report that hole, serve ErrHole from a lost offset and have Check
// find nothing but the hole.
func TestAdv33CleanShutdownLostEnd(t *testing.T) {
	b := buildPartition(t, 60)
	lost := b.segs[b.last()].base
	for _, s := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix, layout.ViewIndexSuffix} {
		if err := os.Remove(b.path(b.last(), s)); err != nil && !errors.Is(err, os.ErrNotExist) {
			require.NoError(t, err)
		}
	}
	require.True(t, markerExists(b.data))

	l, _ := adv32Open(t, b.data, storage.Options{ReadOnly: true, ForceRecovery: true})
	h := l.RecoveryReport().Partitions[0].Holes
	require.Len(t, h, 1, "a forced load finds the hole")
	require.Equal(t, [2]record.Offset{lost, b.end}, [2]record.Offset{h[0].From, h[0].To})
	require.NoError(t, l.Close())

	l, p := adv32Open(t, b.data, storage.Options{})
	require.Equal(t, b.end, p.EndOffset())
	adv33RequireHoleAt(t, p, lost, "writable open after a clean shutdown")
	adv33RequireOnlyHoles(t, l, "writable open after a clean shutdown")
	h = l.RecoveryReport().Partitions[0].Holes
	require.Len(t, h, 1, "the writable open reports the hole:\n%s", reportText(l.RecoveryReport()))
	require.NoError(t, l.Close())
}

// TestAdv33RecoveryPointNearMaxInt64: a damaged recovery-point checkpoint
// (a bit flip, a planted file) says the log reached offsets near
// math.MaxInt64. Nothing may panic and appends must never wrap: an append
// either fails with an error or returns a non-negative offset below the
// new, non-negative log end; the log closes cleanly and opens again with
// the same end. (Before 16c4e74 the unclean open ignored such a recovery
// point with a warning and went on at the data's end.)
func TestAdv33RecoveryPointNearMaxInt64(t *testing.T) {
	for _, rp := range []record.Offset{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 3} {
		for _, clean := range []bool{false, true} {
			t.Run(fmt.Sprintf("rp=%d/clean=%v", rp, clean), func(t *testing.T) {
				b := buildPartition(t, 30)
				adv33SetCheckpoint(t, b.data, layout.RecoveryPointFile, rp)
				adv33AppendsNeverWrap(t, b, clean)
			})
		}
	}
	// The same through the log-start checkpoint (older than 16c4e74: the
	// log starts afresh at it).
	t.Run("logStart=MaxInt64", func(t *testing.T) {
		b := buildPartition(t, 30)
		adv33SetCheckpoint(t, b.data, layout.LogStartFile, math.MaxInt64)
		adv33AppendsNeverWrap(t, b, false)
	})
}

// adv33AppendsNeverWrap opens b writable and appends three times; each
// append fails or moves the log end forward; the log closes and reopens
// with the same end.
func adv33AppendsNeverWrap(t *testing.T, b *built, clean bool) {
	t.Helper()
	if !clean {
		removeMarker(t, b.data)
	}
	l, p := adv32Open(t, b.data, storage.Options{})
	for i := 0; i < 3; i++ {
		end := p.EndOffset()
		require.GreaterOrEqual(t, end, record.Offset(0), "the log end is an offset")
		off, err := p.Append([]storage.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
		if err != nil {
			require.Equal(t, end, p.EndOffset(), "a failed append changes nothing")
			continue
		}
		require.Equal(t, end, off)
		require.Greater(t, p.EndOffset(), off, "append %d at %d: the log end moves forward, never wraps", i, off)
	}
	end := p.EndOffset()
	require.NoError(t, l.Close(), "the log closes cleanly")
	l, p = adv32Open(t, b.data, storage.Options{})
	require.Equal(t, end, p.EndOffset())
	require.NoError(t, l.Close())
}

// TestAdv33OddRecoveryPoints: a recovery point that is negative, at the
// log end, or a bit flip far past it. A negative one is no recovery point
// (the log ends where its data ends, no hole); one at the end changes
// nothing; one far past the data makes the offsets up to it a hole that
// check reports first and that reads report after, and the log goes on
// there, once.
func TestAdv33OddRecoveryPoints(t *testing.T) {
	for _, tc := range []struct {
		rp, end record.Offset
		hole    bool
	}{
		{-5, 60, false},
		{-1, 60, false},
		{60, 60, false},
		{60 | 1<<9, 60 | 1<<9, true}, // "60" with a bit flipped: 572
	} {
		t.Run(fmt.Sprint(tc.rp), func(t *testing.T) {
			b := buildPartition(t, 60)
			adv33SetCheckpoint(t, b.data, layout.RecoveryPointFile, tc.rp)
			removeMarker(t, b.data)
			l, p := adv32Open(t, b.data, storage.Options{ReadOnly: true, ForceRecovery: true})
			require.Equal(t, tc.end, p.EndOffset(), "a read-only load shows the log a writable one makes")
			require.Equal(t, tc.hole, len(l.RecoveryReport().Partitions[0].Holes) == 1, "check reports a hole: %v", tc.hole)
			require.NoError(t, l.Close())
			for i := 0; i < 2; i++ {
				l, p = adv32Open(t, b.data, storage.Options{})
				require.Equal(t, tc.end, p.EndOffset())
				if tc.hole {
					adv33RequireHoleAt(t, p, b.end, "after the jump")
					adv33RequireOnlyHoles(t, l, "after the jump")
				} else {
					require.NoError(t, l.Check())
				}
				require.NoError(t, l.Close())
				removeMarker(t, b.data)
			}
			l, p = adv32Open(t, b.data, storage.Options{})
			off, err := p.Append([]storage.Record{{Value: []byte("x")}})
			require.NoError(t, err)
			require.Equal(t, tc.end, off)
			require.NoError(t, l.Close())
		})
	}
}

// adv33CrashRun opens dir on fs writable, appends one record, syncs and
// closes: the open that starts the log again at the recovery point, and
// the first append after it. It stops at the first error.
func adv33CrashRun(dir string, fs vfs.FS) error {
	l, err := storage.Open(dir, storage.Options{FS: fs, Logger: testLogger(), RetentionCheckInterval: -1,
		CheckpointInterval: 24 * time.Hour, RecoveryThreads: 1})
	if err != nil {
		return err
	}
	p, err := l.Partition("t", 0)
	if err == nil {
		_, err = p.Append([]storage.Record{{Timestamp: 1, Value: []byte("after")}})
	}
	if err == nil {
		err = p.Sync()
	}
	return errors.Join(err, l.Close())
}

// TestAdv33CrashWhileGoingOnAtRecoveryPoint: a crash (every crashfs mode)
// at each file operation of the writable open that starts the log again
// at the recovery point (the empty segment, its indexes, the folder sync,
// the checkpoints) and of the first append after it. The next open must
// not lose the hole (a read from a lost offset fails with ErrHole), must
// not hand out a lost offset (the log end and the next append are at or
// past the recovery point), must keep every durable record before the
// hole, and must leave no broken segment (Check finds nothing but the
// hole); a second open (after every other crash) agrees.
func TestAdv33CrashWhileGoingOnAtRecoveryPoint(t *testing.T) {
	for _, d := range []adv33Damage{adv33Damages[0], adv33Damages[3]} {
		t.Run(d.name, func(t *testing.T) {
			b := buildPartition(t, 40)
			lost := d.do(t, b)
			removeMarker(t, b.data)
			base := filepath.Join(fastTempDir(t), "base")
			copyTree(t, b.data, base)

			probe := filepath.Join(fastTempDir(t), "probe")
			copyTree(t, base, probe)
			pfs := crashfs.New(vfs.Default)
			require.NoError(t, adv33CrashRun(probe, pfs))
			ops := pfs.Ops()
			require.Greater(t, ops, 0)
			cases := 0
			for _, mode := range []crashfs.Mode{crashfs.DropAll, crashfs.KeepPrefix, crashfs.Reorder, crashfs.KeepAll} {
				for k := 0; k < ops; k++ {
					what := fmt.Sprintf("%v k=%d of %d", mode, k, ops)
					work := filepath.Join(fastTempDir(t), "work")
					copyTree(t, base, work)
					cfs := crashfs.New(vfs.Default)
					cfs.CrashAt(k, crashfs.CrashConfig{Mode: mode, Rand: rand.New(rand.NewPCG(uint64(k), uint64(mode)))})
					err := adv33CrashRun(work, cfs)
					crashed, cerr := cfs.Crashed()
					require.NoError(t, cerr, what)
					require.True(t, crashed, what)
					require.ErrorIs(t, err, crashfs.ErrCrashed, what)
					cases++

					rounds := 1 + (k+1)%2 // a second open after every other crash
					for round := 0; round < rounds; round++ {
						what := fmt.Sprintf("%s, open %d after the crash", what, round)
						l, err := storage.Open(work, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1})
						require.NoError(t, err, what)
						p, err := l.Partition("t", 0)
						require.NoError(t, err, what)
						end := p.EndOffset()
						require.GreaterOrEqual(t, end, b.end, "%s: no lost offset is handed out again", what)
						r, err := p.NewReader(0)
						require.NoError(t, err, what)
						for off := record.Offset(0); off < lost; off++ {
							rec, err := r.Next()
							require.NoError(t, err, "%s: offset %d", what, off)
							require.Equal(t, off, rec.Offset, what)
							require.Equal(t, value(off), string(rec.Value), what)
						}
						_, err = r.Next()
						require.ErrorIs(t, err, storage.ErrHole, "%s: the hole is not lost", what)
						r.Close()
						adv33RequireHoleAt(t, p, b.end-1, what)
						if end > b.end {
							r, err := p.NewReader(b.end)
							require.NoError(t, err, what)
							rec, err := r.Next()
							require.NoError(t, err, what)
							require.Equal(t, "after", string(rec.Value), what)
							r.Close()
						}
						adv33RequireOnlyHoles(t, l, what)
						require.NoError(t, l.Close(), what)
						if round == 0 {
							removeMarker(t, work) // and again as after a crash
						}
					}
					require.NoError(t, os.RemoveAll(work))
				}
			}
			t.Logf("%d crash cases", cases)
		})
	}
}

// TestAdv33TimeAndRetentionAcrossHole: after the log went on at the
// recovery point, a time lookup never lands in the hole (a time the lost
// records had resolves to the first record after the hole, or to the log
// end while there is none), and retention by size and by time works on:
// the segments before the hole go, the log start moves past the hole
// (reads there are then out of range, not a hole), and Check passes.
func TestAdv33TimeAndRetentionAcrossHole(t *testing.T) {
	for _, byTime := range []bool{false, true} {
		t.Run(fmt.Sprintf("byTime=%v", byTime), func(t *testing.T) {
			b := buildPartition(t, 60)
			lost := adv33Damages[0].do(t, b)
			removeMarker(t, b.data)
			var now atomic.Int64 // unix ms; read by the log's background goroutine too
			now.Store(stamp(1000))
			l, p := adv32Open(t, b.data, storage.Options{Now: func() time.Time { return time.UnixMilli(now.Load()) }})
			require.Equal(t, b.end, p.EndOffset())

			for _, ts := range []int64{stamp(lost), stamp(b.end - 1), stamp(b.end + 100)} {
				off, err := p.OffsetForTime(ts)
				require.NoError(t, err)
				require.Equal(t, b.end, off, "time %d: nothing at or after it but the log end", ts)
			}
			off, err := p.OffsetForTime(stamp(lost - 1))
			require.NoError(t, err)
			require.Equal(t, lost-1, off)

			got, err := p.Append([]storage.Record{{Timestamp: stamp(b.end + 5), Value: []byte("after")}})
			require.NoError(t, err)
			require.Equal(t, b.end, got)
			for _, ts := range []int64{stamp(lost), stamp(b.end - 1), stamp(b.end + 5)} {
				off, err := p.OffsetForTime(ts)
				require.NoError(t, err)
				require.Equal(t, b.end, off, "time %d: the first record after the hole", ts)
			}
			v, err := p.NewView(storage.Values, b.end)
			require.NoError(t, err)
			buf := make([]byte, 64)
			n, err := v.ReadAt(buf, 0)
			if !errors.Is(err, io.EOF) {
				require.NoError(t, err)
			}
			require.Equal(t, "after\n", string(buf[:n]), "reads after the hole work")
			require.NoError(t, v.Close())

			top, err := l.Topic("t")
			require.NoError(t, err)
			o := top.Overrides()
			if byTime {
				require.NoError(t, o.Set("retention.ms", "1000"))
				now.Store(stamp(b.end+5) + 500) // only the record after the hole is young
			} else {
				require.NoError(t, o.Set("retention.bytes", "1"))
			}
			require.NoError(t, top.SetConfig(o))
			_, err = l.EnforceRetention()
			require.NoError(t, err)
			require.Equal(t, b.end, p.StartOffset(), "the log start moves past the hole")
			require.Equal(t, b.end+1, p.EndOffset())
			_, err = p.NewReader(lost)
			require.ErrorIs(t, err, storage.ErrOffsetOutOfRange)
			require.NoError(t, l.Check(), "no hole is left above the log start")
			require.NoError(t, l.Close())

			l, p = adv32Open(t, b.data, storage.Options{ForceRecovery: true})
			require.Empty(t, l.RecoveryReport().Partitions[0].Holes)
			require.Equal(t, [2]record.Offset{b.end, b.end + 1}, [2]record.Offset{p.StartOffset(), p.EndOffset()})
			require.NoError(t, l.Check())
			require.NoError(t, l.Close())
		})
	}
}

// adv33KafkaCases are Kafka partitions of the 2.7 fixture whose last
// segment is deleted: where the data then ends, and a recovery point to
// plant (0: the checkpoint's).
var adv33KafkaCases = []struct {
	part    int
	last    record.Offset // the last segment, deleted
	end     record.Offset // where the data then ends
	plantRP record.Offset
}{
	{28, 2, 2, 0},    // the checkpoint says 3
	{17, 1, 1, 0},    // the checkpoint says 1: nothing lost below it
	{39, 18, 18, 50}, // a planted recovery point far past the data
}

// adv33KafkaCopy copies the Kafka 2.7 fixture, deletes the last segment of
// partition part (its .log and any index files), plants rp when not 0 and
// sets the clean-shutdown marker or removes it.
func adv33KafkaCopy(t *testing.T, part int, last, rp record.Offset, clean bool) (data, dir string) {
	t.Helper()
	var src string
	for _, d := range fixtures.DataDirs(t) {
		if d.Set == "kafka-2.7-multisegment-compacted" {
			src = d.Path
		}
	}
	if src == "" {
		t.Skip("fixture kafka-2.7-multisegment-compacted not found")
	}
	before := treeDigest(t, src)
	t.Cleanup(func() { require.Equal(t, before, treeDigest(t, src), "the fixture is untouched") })
	data = filepath.Join(t.TempDir(), "data")
	copyTree(t, src, data)
	dir = filepath.Join(data, fmt.Sprintf("__consumer_offsets-%d", part))
	for _, s := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix} {
		if err := os.Remove(layout.SegmentPath(dir, last, s)); err != nil && !errors.Is(err, os.ErrNotExist) {
			require.NoError(t, err)
		}
	}
	if rp > 0 {
		ck, err := recovery.ReadCheckpoint(vfs.Default, filepath.Join(data, layout.RecoveryPointFile))
		require.NoError(t, err)
		ck[recovery.TopicPartition{Topic: "__consumer_offsets", Partition: part}] = rp
		require.NoError(t, recovery.WriteCheckpoint(vfs.Default, filepath.Join(data, layout.RecoveryPointFile), ck))
	}
	marker := filepath.Join(data, layout.CleanShutdownFile)
	if clean {
		writeFile(t, marker, nil)
	} else if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	return data, dir
}

// TestAdv33RetentionBeforeAnyAppend: retention that runs while the
// segment at the recovery point is still empty (no append since the
// hole) deletes the segments before the hole and leaves the log empty at
// the recovery point: start and end there, no new segment, Check passes,
// and the next append (also after a reopen) gets the recovery point.
func TestAdv33RetentionBeforeAnyAppend(t *testing.T) {
	for _, setting := range []string{"retention.ms=1000", "retention.bytes=0"} {
		t.Run(setting, func(t *testing.T) {
			b := buildPartition(t, 60)
			adv33Damages[0].do(t, b)
			removeMarker(t, b.data)
			now := time.UnixMilli(stamp(10_000))
			l, p := adv32Open(t, b.data, storage.Options{Now: func() time.Time { return now }})
			want := adv33Logs(t, b.dir)
			top, err := l.Topic("t")
			require.NoError(t, err)
			o := top.Overrides()
			require.NoError(t, o.SetPair(setting))
			require.NoError(t, top.SetConfig(o))
			_, err = l.EnforceRetention()
			require.NoError(t, err)
			require.Equal(t, [2]record.Offset{b.end, b.end}, [2]record.Offset{p.StartOffset(), p.EndOffset()})
			require.NoError(t, l.Check())
			require.NoError(t, l.Close())
			logs := adv33Logs(t, b.dir)
			require.Equal(t, want[len(want)-1:], logs, "only the segment at the recovery point is left")

			l, p = adv32Open(t, b.data, storage.Options{})
			require.Equal(t, [2]record.Offset{b.end, b.end}, [2]record.Offset{p.StartOffset(), p.EndOffset()})
			off, err := p.Append([]storage.Record{{Value: []byte("x")}})
			require.NoError(t, err)
			require.Equal(t, b.end, off)
			require.NoError(t, l.Check())
			require.NoError(t, l.Close())
		})
	}
}

// TestAdv33KafkaLostLastLog: in a Kafka data directory (meta.properties)
// a lost end keeps Kafka's rule: a deleted last segment (below the
// recovery point of the checkpoint, or one planted far past the data)
// makes no new segment and no hole, on a read-only (`check`) and a
// writable open, clean or not; after an unclean shutdown (and in `check`)
// the log ends where the data ends and appends go on there. The fixture
// itself is untouched.
func TestAdv33KafkaLostLastLog(t *testing.T) {
	for _, tc := range adv33KafkaCases {
		for _, clean := range []bool{false, true} {
			t.Run(fmt.Sprintf("__consumer_offsets-%d/clean=%v", tc.part, clean), func(t *testing.T) {
				data, dir := adv33KafkaCopy(t, tc.part, tc.last, tc.plantRP, clean)
				logsBefore := adv33Logs(t, dir)
				for _, ro := range []bool{true, false} {
					l, err := storage.Open(data, storage.Options{ReadOnly: ro, ForceRecovery: ro, Logger: testLogger(), RetentionCheckInterval: -1})
					require.NoError(t, err)
					for _, pr := range l.RecoveryReport().Partitions {
						require.Empty(t, pr.Holes, "%s: no hole in a Kafka directory", pr.Dir)
					}
					p, err := l.Partition("__consumer_offsets", tc.part)
					require.NoError(t, err)
					end := p.EndOffset()
					if ro || !clean { // clean and writable: TestAdv33KafkaCleanLostEnd
						require.Equal(t, tc.end, end, "read-only %v: the log ends where the data ends", ro)
					}
					if !ro {
						require.Equal(t, logsBefore, adv33Logs(t, dir), "no new segment")
						off, err := p.Append([]storage.Record{{Value: []byte("kafka")}})
						require.NoError(t, err)
						require.Equal(t, end, off)
					}
					require.NoError(t, l.Close())
				}
			})
		}
	}
}

// TestAdv33KafkaCleanLostEnd: README (Holes): in a Kafka data directory
// "a lost end is Kafka's: appends go on where the data ends" (Kafka's
// LogLoader takes the log end from the active segment, readNextOffset,
// also after a clean shutdown). After a clean shutdown the last segment
// is deleted (its .log; this fixture's active segments have no index
// files): the writable open must end the log where the data ends, as
// `logfs check` (a forced load) says it does.
func TestAdv33KafkaCleanLostEnd(t *testing.T) {
	for _, tc := range adv33KafkaCases {
		if tc.plantRP == 0 && tc.part == 17 {
			continue // nothing lost below the checkpoint
		}
		t.Run(fmt.Sprintf("__consumer_offsets-%d", tc.part), func(t *testing.T) {
			data, _ := adv33KafkaCopy(t, tc.part, tc.last, tc.plantRP, true)
			l, err := storage.Open(data, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1})
			require.NoError(t, err)
			p, err := l.Partition("__consumer_offsets", tc.part)
			require.NoError(t, err)
			require.Equal(t, tc.end, p.EndOffset(), "the log ends where the data ends")
			off, err := p.Append([]storage.Record{{Value: []byte("kafka")}})
			require.NoError(t, err)
			require.Equal(t, tc.end, off, "appends go on where the data ends")
			require.NoError(t, l.Close())
		})
	}
}

// adv33Rendered is the values rendering of offsets [from, to).
func adv33Rendered(from, to record.Offset) string {
	var out string
	for o := from; o < to; o++ {
		out += value(o) + "\n"
	}
	return out
}

// adv33ReadView reads v from its start until a read fails or returns
// nothing, and returns what it read and the error that ended it (nil at
// a plain end).
func adv33ReadView(v *storage.View) (string, error) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := v.ReadAt(buf, int64(len(out)))
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		if err != nil || n == 0 {
			return string(out), err
		}
	}
}

// TestAdv33ViewsStopAtLostEnd: README (Holes): "A record file that starts
// before a hole opens, its size and reads stop where the hole starts and
// the read there fails". Here the hole is the lost end (the values view
// indexes were written to their .viewindex sidecars before the damage, so
// a stale sidecar of the damaged segment is met too): a view from the log
// start and one from just before the hole hold exactly the records before
// it, and the read past them fails with ErrHole; after a clean reopen
// (sidecars written again) the same.
func TestAdv33ViewsStopAtLostEnd(t *testing.T) {
	for _, d := range adv33Damages {
		t.Run(d.name, func(t *testing.T) {
			b := buildPartition(t, 60)
			l, p := adv32Open(t, b.data, storage.Options{})
			v, err := p.NewView(storage.Values, 0)
			require.NoError(t, err)
			got, err := adv33ReadView(v)
			require.NoError(t, err)
			require.Equal(t, adv33Rendered(0, b.end), got)
			require.NoError(t, v.Close())
			require.NoError(t, l.Close())
			require.FileExists(t, b.path(b.last(), layout.ViewIndexSuffix), "the sidecar is there to be stale")

			lost := d.do(t, b)
			removeMarker(t, b.data)
			for round := 0; round < 2; round++ {
				l, p := adv32Open(t, b.data, storage.Options{})
				for _, from := range []record.Offset{0, lost - 2} {
					what := fmt.Sprintf("round %d, view from %d", round, from)
					want := adv33Rendered(from, lost)
					v, err := p.NewView(storage.Values, from)
					require.NoError(t, err, what)
					size, err := v.Size()
					require.NoError(t, err, what)
					require.Equal(t, int64(len(want)), size, "%s: its size stops where the hole starts", what)
					got, err := adv33ReadView(v)
					require.Equal(t, want, got, "%s: every record before the hole", what)
					require.ErrorIs(t, err, storage.ErrHole, "%s: the read at the hole fails", what)
					require.NoError(t, v.Close())
				}
				require.NoError(t, l.Close())
			}
		})
	}
}
