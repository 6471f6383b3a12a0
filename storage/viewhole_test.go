package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// TestViewsStopAtHoles: in a partition logfs wrote itself (gapless: it
// never compacts), a record file whose range holds a hole behaves as one
// whose range holds bad bytes (TestViewsStopAtBadBytes): it opens, its
// size and reads stop where the hole starts, the read that reaches it
// fails with ErrHole (EIO through the mount), a file from inside the hole
// is refused, and files from an offset after it are whole. Holes inside a
// segment (a batch cut out by repair), between segments (a renamed
// segment set aside by repair) and at an emptied segment (a clean open);
// both formats and isolation levels, with and without the values sidecar.
// With Options.Gaps (a Kafka data directory, which may be compacted) the
// same partition is read across the hole without an error.
func TestViewsStopAtHoles(t *testing.T) {
	for _, damage := range []string{"batch cut out", "segment set aside", "segment emptied"} {
		for _, sidecar := range []bool{true, false} {
			for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
				for _, gaps := range []bool{false, true} {
					if gaps && (!sidecar || iso == ReadUncommitted) {
						continue // one run suffices for the compacted-log case
					}
					name := fmt.Sprintf("%s/sidecar=%v/%v/gaps=%v", damage, sidecar, iso, gaps)
					t.Run(name, func(t *testing.T) { checkViewsStopAtHoles(t, damage, sidecar, iso, gaps) })
				}
			}
		}
	}
}

func checkViewsStopAtHoles(t *testing.T, damage string, sidecar bool, iso Isolation, gaps bool) {
	dir := t.TempDir()
	pdir := buildSegments(t, dir, 400)
	l, err := Open(dir, Options{Isolation: iso, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	segs := p.segments()
	require.Greater(t, len(segs), 5)
	seg := segs[2]
	batches := batchesOf(t, seg, true)
	require.Greater(t, len(batches), 4)
	bad := batches[len(batches)/2]
	holeFrom, resume := bad.BaseOffset, bad.NextOffset() // the offsets that go
	if damage != "batch cut out" {
		holeFrom, resume = seg.base, segs[3].base
	}
	end := p.EndOffset()
	starts := []record.Offset{0, segs[1].base, holeFrom - 2, holeFrom - 1, holeFrom, resume - 1, resume, resume + 1, segs[4].base, end - 1}
	want := map[Format]map[record.Offset][]byte{}
	for _, f := range []Format{Values, JSONL} {
		want[f] = map[record.Offset][]byte{}
		after := renderAll(t, p, f, resume)
		for _, n := range starts {
			all := renderAll(t, p, f, max(n, resume))
			if n < holeFrom {
				all = renderAll(t, p, f, n)
				all = all[:len(all)-len(renderAll(t, p, f, holeFrom))]
				if gaps {
					all = append(all, after...) // read across
				}
			}
			want[f][n] = all
		}
	}
	require.NoError(t, l.Close())

	logPath := layout.SegmentPath(pdir, seg.base, layout.LogSuffix)
	switch damage {
	case "batch cut out":
		// A flipped byte, then repair: the batch goes to a .cut file.
		writeLog(t, seg, []byte{bad.Bytes[len(bad.Bytes)-3] ^ 0x40}, int64(bad.Pos)+int64(len(bad.Bytes))-3)
		require.NoError(t, repairDir(t, dir).Close())
		require.Len(t, filesWith(t, pdir, ".log.cut-"), 1)
	case "segment set aside":
		to := layout.SegmentPath(pdir, seg.base+7, "")
		for _, suf := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix, layout.ViewIndexSuffix} {
			require.NoError(t, os.Rename(layout.SegmentPath(pdir, seg.base, suf), to+suf))
		}
		require.NoError(t, repairDir(t, dir).Close())
		require.FileExists(t, to+layout.LogSuffix+layout.StraySuffix)
	case "segment emptied":
		require.NoError(t, os.Truncate(logPath, 0))
	}
	if !sidecar {
		views, _ := filepath.Glob(filepath.Join(pdir, "*"+layout.ViewIndexSuffix))
		for _, v := range views {
			require.NoError(t, os.Remove(v))
		}
	}
	l, err = Open(dir, Options{Isolation: iso, ReadOnly: true, Gaps: gaps, Logger: testLogger(t)})
	require.NoError(t, err)
	defer l.Close()
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, end, p.EndOffset())
	for _, f := range []Format{Values, JSONL} {
		for _, n := range starts {
			stops := !gaps && n < holeFrom
			v, err := p.NewView(f, n)
			if !gaps && n >= holeFrom && n < resume {
				require.ErrorIs(t, err, ErrHole, "%v from %d: a file from inside the hole is refused", f, n)
				continue
			}
			require.NoError(t, err, "%v from %d", f, n)
			// Read at once, with no size asked first and a buffer that
			// spans segments (as consume reads), then with the size.
			got, rerr := readView(t, v, 1<<20)
			if stops {
				require.ErrorIs(t, rerr, ErrHole, "%v from %d: a read with no size asked stops at the hole", f, n)
			} else {
				require.NoError(t, rerr, "%v from %d", f, n)
			}
			require.True(t, bytes.Equal(want[f][n], got), "%v from %d, no size asked: %d bytes, want %d", f, n, len(got), len(want[f][n]))
			require.NoError(t, v.Close())
			v, err = p.NewView(f, n)
			require.NoError(t, err)
			size, err := v.Size()
			require.NoError(t, err, "%v from %d: the file opens", f, n)
			require.Equal(t, int64(len(want[f][n])), size, "%v from %d: the size stops where the hole starts", f, n)
			if stops {
				require.ErrorIs(t, v.Stopped(), ErrHole, "%v from %d", f, n)
			} else {
				require.NoError(t, v.Stopped(), "%v from %d", f, n)
			}
			got, rerr = readView(t, v, 1000)
			if stops {
				require.ErrorIs(t, rerr, ErrHole, "%v from %d: the read that reaches the hole fails", f, n)
				require.ErrorContains(t, rerr, fmt.Sprintf("offsets %d to %d are missing", holeFrom, resume-1))
				// A read that ends at the hole is short and fine; the
				// next one fails.
				if size >= 3 {
					buf := make([]byte, 7)
					k, err := v.ReadAt(buf, size-3)
					require.NoError(t, err, "%v from %d", f, n)
					require.Equal(t, want[f][n][size-3:], buf[:k])
				}
				_, err = v.ReadAt(make([]byte, 7), size)
				require.ErrorIs(t, err, ErrHole)
			} else {
				require.NoError(t, rerr, "%v from %d", f, n)
			}
			require.True(t, bytes.Equal(want[f][n], got), "%v from %d: %d bytes, want %d", f, n, len(got), len(want[f][n]))
			size2, err := v.Size()
			require.NoError(t, err)
			require.Equal(t, size, size2, "%v from %d", f, n)
			require.NoError(t, v.Close())
		}
		// A stat answers the same, from the sizes views summed as well
		// (Partition.sizes): from the last start to the first, twice.
		for round := 0; round < 2; round++ {
			for k := len(starts) - 1; k >= 0; k-- {
				n := starts[k]
				if !gaps && n >= holeFrom && n < resume {
					continue
				}
				size, stopped, err := p.ViewSize(f, n)
				require.NoError(t, err, "%v from %d", f, n)
				require.Equal(t, int64(len(want[f][n])), size, "round %d: %v from %d", round, f, n)
				require.Equal(t, !gaps && n < holeFrom, stopped, "round %d: %v from %d", round, f, n)
			}
		}
	}
	if !gaps {
		require.ErrorIs(t, l.Check(), ErrHole)
	}
}

// TestViewRetentionGapIsNoHole: in a gapless partition, segments that
// retention deleted before a view pinned them are no hole: a view opened
// on an empty partition reads the segment it pinned, then gets
// ErrDeleted, never ErrHole (the next segment left starts past the
// pinned one's end, but not right after it).
func TestViewRetentionGapIsNoHole(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.bytes=0", "retention.ms=-1", "file.delete.delay.ms=0"))
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	require.True(t, p.gapless())
	v, err := p.NewView(Values, 0) // pins the empty active segment
	require.NoError(t, err)
	defer v.Close()
	for i := 0; i < 20; i++ {
		_, err := p.Append(values(1, fmt.Sprint(i)))
		require.NoError(t, err)
	}
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	got, err := readView(t, v, 1<<16)
	require.ErrorIs(t, err, ErrDeleted)
	require.NotErrorIs(t, err, ErrHole)
	require.NotEmpty(t, got)
	require.True(t, bytes.HasPrefix(got, []byte("0-0\n")), "the pinned segment's records: %q", got)
	_, err = v.Size()
	require.ErrorIs(t, err, ErrDeleted)
	require.NoError(t, l.Check())
}
