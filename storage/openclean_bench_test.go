package storage

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// cleanDataDir writes a data directory of parts partitions of segs
// segments each, as a clean shutdown leaves it: one small batch per
// segment, trimmed indexes (no offset entry, the final time-index entry),
// both checkpoints and the marker. Files are written directly: building
// 10,000 segments through appends and rolls would take minutes of fsyncs.
func cleanDataDir(tb testing.TB, dir string, parts, segs int) {
	tb.Helper()
	var bld record.Builder
	for p := 0; p < parts; p++ {
		pdir := filepath.Join(dir, layout.PartitionDirName("bench", p))
		require.NoError(tb, os.MkdirAll(pdir, 0o755))
		for s := 0; s < segs; s++ {
			base := record.Offset(s)
			ts := int64(1_700_000_000_000 + s)
			bld.Reset()
			bld.Append(ts, nil, []byte(fmt.Sprintf("partition %d segment %d", p, s)), nil)
			raw, err := bld.Build()
			require.NoError(tb, err)
			record.SetBaseOffset(raw, base)
			require.NoError(tb, os.WriteFile(layout.SegmentPath(pdir, base, layout.LogSuffix), raw, 0o644))
			require.NoError(tb, os.WriteFile(layout.SegmentPath(pdir, base, layout.IndexSuffix), nil, 0o644))
			tix := binary.BigEndian.AppendUint64(nil, uint64(ts))
			tix = binary.BigEndian.AppendUint32(tix, 0)
			require.NoError(tb, os.WriteFile(layout.SegmentPath(pdir, base, layout.TimeIndexSuffix), tix, 0o644))
		}
	}
	rp, ls := map[recovery.TopicPartition]record.Offset{}, map[recovery.TopicPartition]record.Offset{}
	for p := 0; p < parts; p++ {
		tp := recovery.TopicPartition{Topic: "bench", Partition: p}
		rp[tp], ls[tp] = record.Offset(segs), 0
	}
	require.NoError(tb, recovery.WriteCheckpoint(vfs.Default, filepath.Join(dir, layout.RecoveryPointFile), rp))
	require.NoError(tb, recovery.WriteCheckpoint(vfs.Default, filepath.Join(dir, layout.LogStartFile), ls))
	require.NoError(tb, recovery.WriteCleanShutdownMarker(vfs.Default, dir))
}

// BenchmarkOpenClean measures Open of a data directory of 10,000 segments
// after a clean shutdown (Close between iterations, untimed, leaves the
// marker again). Open maps no index and reads no .log byte but the last
// batches of each partition: it lists the folders, walks each last
// segment's headers from its last index entry to find the log end, opens
// each .log (stat, fstat) and trusts the checkpoints for the rest.
// Besides ns/op it reports the best wall time (best_ms) and the process CPU
// time per open (cpu_ms/op), which other load on the machine disturbs
// less; the work runs on RecoveryThreads (the CPU count) workers.
//
//	go test ./storage -run '^$' -bench OpenClean -benchtime 10x
func BenchmarkOpenClean(b *testing.B) {
	for _, shape := range []struct{ parts, segs int }{{1, 10000}, {100, 100}, {10000, 1}} {
		b.Run(fmt.Sprintf("%dx%d", shape.parts, shape.segs), func(b *testing.B) {
			dir := b.TempDir()
			cleanDataDir(b, dir, shape.parts, shape.segs)
			fs := &countingFS{FS: vfs.Default}
			opts := Options{FS: fs, Logger: testLogger(b), RetentionCheckInterval: -1}
			var best time.Duration
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cpu0 := cpuTime()
				start := time.Now()
				l, err := Open(dir, opts)
				d := time.Since(start)
				cpu += cpuTime() - cpu0
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if best == 0 || d < best {
					best = d
				}
				if !l.RecoveryReport().Clean {
					b.Fatalf("not a clean open")
				}
				n := 0
				for _, name := range l.Topics() {
					top, _ := l.Topic(name)
					for _, p := range top.Partitions() {
						for _, s := range p.segments() {
							if s.offIdx.Mapped() || s.timeIdx.Mapped() {
								b.Fatalf("segment %d of %v mapped", s.base, p)
							}
							n++
						}
					}
				}
				if n != shape.parts*shape.segs {
					b.Fatalf("%d segments", n)
				}
				require.NoError(b, l.Close())
				b.StartTimer()
			}
			b.ReportMetric(float64(best.Microseconds())/1000, "best_ms")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu_ms/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far: what an open
// costs whatever else the machine runs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestOpenCleanTenThousandSegments is the benchmark's promise as a test,
// without timing: 10,000 segments open cleanly with no index mapped and no
// log byte read but each partition's last batch (its last segment has no
// index entry), and every record reads back.
func TestOpenCleanTenThousandSegments(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 30,000 files")
	}
	dir := t.TempDir()
	cleanDataDir(t, dir, 100, 100)
	fs := &countingFS{FS: vfs.Default}
	l, err := Open(dir, Options{FS: fs, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	require.True(t, l.RecoveryReport().Clean)
	p, err := l.Partition("bench", 42)
	require.NoError(t, err)
	segs := p.segments()
	require.LessOrEqual(t, fs.logBytes.Load(), 100*segs[len(segs)-1].size.Load(), "log bytes read: at most each partition's last segment")
	p, err = l.Partition("bench", 42)
	require.NoError(t, err)
	require.Equal(t, record.Offset(100), p.EndOffset())
	for _, s := range p.segments() {
		require.False(t, s.offIdx.Mapped() || s.timeIdx.Mapped())
	}
	got := readAll(t, p, 0)
	require.Len(t, got, 100)
	require.Equal(t, "99:partition 42 segment 99", got[99])
	require.NoError(t, l.Check())
	require.NoError(t, l.Close())
}
