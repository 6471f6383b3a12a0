package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/layout"
)

// TestFollow29MidSwap: Kafka's cleaner swaps a segment in three renames
// (.cleaned to .swap, the old .log to .deleted, .swap to .log), so a
// follower that lists the folder between the last two finds no .log at
// the segment's base, only its .swap. That is not retention (for the
// first segment) nor a truncation (for a later one): the segment is
// being replaced, and every record stays readable, before and after.
func TestFollow29MidSwap(t *testing.T) {
	for _, which := range []int{0, 1} {
		t.Run(fmt.Sprintf("segment=%d", which), func(t *testing.T) {
			dir := t.TempDir()
			b, err := broker.Create(dir, "f", 0, broker.Options{SegmentBytes: 1024, IndexInterval: 100})
			require.NoError(t, err)
			var want strings.Builder
			for i := range 80 {
				v := fmt.Sprintf("r%d %s", i, strings.Repeat("x", i%30))
				_, err := b.Write(-1, false, v)
				require.NoError(t, err)
				want.WriteString(v + "\n")
			}
			require.NoError(t, b.Checkpoint(b.End()))
			_, p := followed(t, dir, ReadCommitted)
			eventually(t, "the follower", func() bool { got, err := viewText(t, p, 0); return err == nil && got == want.String() })
			segs := p.segments()
			require.Greater(t, len(segs), which+2)
			base := segs[which].base

			// Mid-swap: the copy is .log.swap, the old file .log.deleted.
			log := filepath.Join(p.Dir(), layout.SegmentFileName(base, layout.LogSuffix))
			data, err := os.ReadFile(log)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(log+layout.SwapSuffix, data, 0o644))
			require.NoError(t, os.Rename(log, log+layout.DeletedSuffix))
			require.NoError(t, p.catchUp())
			require.Zero(t, p.StartOffset(), "the log start stays")
			got, err := viewText(t, p, 0)
			require.NoError(t, err, "mid-swap")
			require.Equal(t, want.String(), got, "mid-swap")

			// The swap done.
			require.NoError(t, os.Rename(log+layout.SwapSuffix, log))
			require.NoError(t, os.Remove(log+layout.DeletedSuffix))
			require.NoError(t, p.catchUp())
			got, err = viewText(t, p, 0)
			require.NoError(t, err, "after the swap")
			require.Equal(t, want.String(), got, "after the swap")
		})
	}
}
