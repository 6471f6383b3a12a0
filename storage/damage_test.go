package storage

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// TestTruncatedTimeIndex: a sealed segment's .timeindex cut at an entry
// boundary is a structurally valid file that lost its final entry, so
// the segment's largest timestamp reads too low and a lookup by time
// skipped the segment (time/T started late). The final-entry rule finds
// it: Check reports it on a read-only log, lookups answer from the log,
// and a writable log rebuilds the file on first use.
func TestTruncatedTimeIndex(t *testing.T) {
	for _, readOnly := range []bool{true, false} {
		dir := t.TempDir()
		pdir := buildSegments(t, dir, 400)
		tix := layout.SegmentPath(pdir, 0, layout.TimeIndexSuffix)
		data, err := os.ReadFile(tix)
		require.NoError(t, err)
		require.Greater(t, len(data), 3*index.TimeEntrySize)
		require.NoError(t, os.WriteFile(tix, data[:len(data)-2*index.TimeEntrySize], 0o644))

		var logs logCounter
		l, err := Open(dir, Options{ReadOnly: readOnly, Logger: logs.logger(), RetentionCheckInterval: -1})
		require.NoError(t, err)
		p, err := l.Partition("t", 0)
		require.NoError(t, err)
		if readOnly {
			err := l.Check()
			require.ErrorIs(t, err, ErrCheck)
			require.ErrorContains(t, err, "last timestamp is not the segment's largest")
		}
		segs, err := p.Segments()
		require.NoError(t, err)
		next := segs[1].BaseOffset
		for off := record.Offset(0); off < next+5; off++ {
			got, err := p.OffsetForTime(1_700_000_000_000 + int64(off))
			require.NoError(t, err)
			require.Equal(t, off, got, "read-only=%v: time of offset %d", readOnly, off)
		}
		if !readOnly {
			require.NoError(t, l.Check())
			require.Equal(t, 1, logs.count("rebuilding it from the log"))
			got, err := os.ReadFile(tix)
			require.NoError(t, err)
			require.Equal(t, data, got, "rebuilt byte for byte")
		}
		require.NoError(t, l.Close())
	}
}
