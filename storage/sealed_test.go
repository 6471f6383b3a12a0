package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// TestCrashedActiveTimeIndex: after a crash (a broker or logfs killed with
// -9) the active segment's time index lacks its final entry, which Kafka
// and logfs write only on roll or close. That is not damage (index.Sealed):
// a read-only Check of the crashed directory passes, and lookups by time
// find every record. The same file in a sealed segment (not the last, or
// the last of a cleanly shut down directory) is still reported, as
// TestTruncatedTimeIndex wants.
func TestCrashedActiveTimeIndex(t *testing.T) {
	for _, tc := range []struct {
		name      string
		segment   func(n int) int // which segment's time index loses its final entry
		clean     bool            // the clean-shutdown marker stays
		corrupt   bool
		writeable bool
	}{
		{name: "crash, active segment", segment: func(n int) int { return n - 1 }},
		{name: "crash, active segment, writable open", segment: func(n int) int { return n - 1 }, writeable: true},
		{name: "crash, sealed segment", segment: func(n int) int { return n - 2 }, corrupt: true},
		{name: "clean, active segment", segment: func(n int) int { return n - 1 }, clean: true, corrupt: true},
		{name: "clean, sealed segment", segment: func(n int) int { return 0 }, clean: true, corrupt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pdir := buildSegments(t, dir, 420)
			logs, err := filepath.Glob(filepath.Join(pdir, "*"+layout.LogSuffix))
			require.NoError(t, err)
			require.Greater(t, len(logs), 3)
			k := tc.segment(len(logs))
			base, _, ok := layout.ParseSegmentFileName(filepath.Base(logs[k]))
			require.True(t, ok)
			tix := layout.SegmentPath(pdir, base, layout.TimeIndexSuffix)
			data, err := os.ReadFile(tix)
			require.NoError(t, err)
			require.Greater(t, len(data), 2*index.TimeEntrySize, "the segment has entries besides the final one")
			// What a crash leaves: every entry the appends wrote, not the
			// one close adds.
			require.NoError(t, os.WriteFile(tix, data[:len(data)-index.TimeEntrySize], 0o644))
			if !tc.clean {
				require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
			}

			l, err := Open(dir, Options{ReadOnly: !tc.writeable, Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
			defer l.Close()
			err = l.Check()
			if tc.corrupt {
				require.ErrorIs(t, err, ErrCheck)
				require.ErrorContains(t, err, "last timestamp is not the segment's largest")
				require.ErrorContains(t, err, filepath.Base(tix))
			} else {
				require.NoError(t, err)
			}
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			for off := record.Offset(0); off < 420; off++ {
				got, err := p.OffsetForTime(1_700_000_000_000 + int64(off))
				require.NoError(t, err)
				require.Equal(t, off, got, "time of offset %d", off)
			}
			segs, err := p.Segments()
			require.NoError(t, err)
			last := segs[len(segs)-1]
			require.Equal(t, int64(1_700_000_000_000+419), last.MaxTimestamp, fmt.Sprintf("max timestamp of the segment at %d", last.BaseOffset))
		})
	}
}
