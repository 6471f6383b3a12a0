package recovery_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// TestCrashGapAcrossLogStart is the state a crash left in TestCrashLoop
// (Reorder, KeepPrefix): the end of a segment was never synced, the next
// segment (the one retention had made the log start) never reached the
// disk, yet a later segment's file did. The gap begins below the log start
// but reaches past it: the offsets there were never durable, so the later
// segments are set aside (kept as .stray) and the log ends where the
// durable data ends: at the recovery point, past a hole, when the gap
// begins below it. A gap entirely below the recovery point stays a hole.
func TestCrashGapAcrossLogStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// rp and logStart, from the built partition
		rp, logStart func(b *built, prevNext record.Offset) record.Offset
		setAside     bool
		force        bool // scan the segments below the recovery point too (logfs check --repair)
	}{
		{"above", func(_ *built, prevNext record.Offset) record.Offset { return prevNext },
			func(b *built, _ record.Offset) record.Offset { return b.segs[2].base }, true, false},
		{"aboveRecoveryPoint", func(_ *built, prevNext record.Offset) record.Offset { return prevNext + 1 },
			func(*built, record.Offset) record.Offset { return -1 }, true, false},
		{"below", func(b *built, _ record.Offset) record.Offset { return b.segs[3].base },
			func(*built, record.Offset) record.Offset { return -1 }, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := buildPartition(t, 120)
			require.Greater(t, len(b.segs), 4)
			// Segment 1 loses its last batch, segment 2 is gone.
			prevNext := b.lastBatch(1).base
			truncateFile(t, b.path(1, layout.LogSuffix), int64(b.lastBatch(1).pos))
			for _, suf := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix} {
				require.NoError(t, os.Remove(b.path(2, suf)))
			}
			removeMarker(t, b.data)
			rp, ls := tc.rp(b, prevNext), tc.logStart(b, prevNext)
			st, err := recovery.LoadPartition(recovery.PartitionOptions{FS: vfs.Default, Dir: b.dir,
				RecoveryPoint: rp, LogStart: ls, Gapless: true, Force: tc.force, Logger: testLogger(),
				IndexConfig: recovery.IndexConfig{IndexBytes: 4096, IndexInterval: 200}})
			require.NoError(t, err)
			rep := st.Report
			if !tc.setAside {
				require.Empty(t, rep.Dropped)
				require.Len(t, rep.Holes, 1)
				require.Equal(t, []recovery.Hole{{From: prevNext, To: b.segs[3].base, Why: rep.Holes[0].Why}}, rep.Holes)
				require.Equal(t, b.end, st.NextOffset)
				return
			}
			end := max(prevNext, ls)
			if rp > end {
				// The offsets below the recovery point were durable: they
				// are a hole, and the log goes on at the recovery point.
				require.Equal(t, []recovery.Hole{{From: end, To: rp, Why: rep.Holes[0].Why}}, rep.Holes)
				end = rp
			} else {
				require.Empty(t, rep.Holes, "a crash's lost tail is no hole")
			}
			var dropped []record.Offset
			for _, d := range rep.Dropped {
				dropped = append(dropped, d.Base)
				require.FileExists(t, d.AsideAs, "set aside, never deleted")
				require.NoFileExists(t, d.File)
			}
			var want []record.Offset
			for _, s := range b.segs[3:] {
				want = append(want, s.base)
			}
			require.Equal(t, want, dropped, "every segment past the gap is set aside")
			require.Equal(t, end, st.NextOffset, "the log ends where the durable data ends")
			require.LessOrEqual(t, st.Segments[len(st.Segments)-1].Base, st.NextOffset)
		})
	}
}

// TestCrashLostFirstSegments: a crash after retention made segment 2 the
// log start kept none of the files from it on but a later segment's (the
// k=843 state of TestCrashLoop/Reorder): the later segments are set aside
// and the log is empty at the log start, which never moves past the
// checkpoint. Without a log start checkpoint the segments stay.
func TestCrashLostFirstSegments(t *testing.T) {
	for _, tc := range []struct {
		name     string
		logStart bool
	}{{"withLogStart", true}, {"noLogStart", false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := buildPartition(t, 120)
			require.Greater(t, len(b.segs), 4)
			for i := 0; i < 4; i++ {
				for _, suf := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix} {
					require.NoError(t, os.Remove(b.path(i, suf)))
				}
			}
			removeMarker(t, b.data)
			ls, rp := record.Offset(-1), b.segs[2].base-1
			if tc.logStart {
				ls = b.segs[2].base
			}
			st, err := recovery.LoadPartition(recovery.PartitionOptions{FS: vfs.Default, Dir: b.dir,
				RecoveryPoint: rp, LogStart: ls, Gapless: true, Logger: testLogger(),
				IndexConfig: recovery.IndexConfig{IndexBytes: 4096, IndexInterval: 200}})
			require.NoError(t, err)
			rep := st.Report
			if !tc.logStart {
				require.Empty(t, rep.Dropped)
				require.Equal(t, b.segs[4].base, st.Segments[0].Base)
				require.Equal(t, b.end, st.NextOffset)
				return
			}
			var dropped []record.Offset
			for _, d := range rep.Dropped {
				dropped = append(dropped, d.Base)
				require.FileExists(t, d.AsideAs, "set aside, never deleted")
			}
			var want []record.Offset
			for _, s := range b.segs[4:] {
				want = append(want, s.base)
			}
			require.Equal(t, want, dropped)
			require.Equal(t, ls, st.NextOffset, "the log is empty at the log start")
			require.Equal(t, ls, st.LogStart)
		})
	}
}
