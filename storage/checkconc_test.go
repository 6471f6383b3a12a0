package storage

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckDuringAppends: Check run while appends go on (and roll) finds
// nothing wrong. It used to read the log end apart from the scan of the
// active segment, and an append in between made it report "log end offset
// is 856, the log ends at 840" of a partition with nothing wrong.
func TestCheckDuringAppends(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=3000"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	var stop atomic.Bool
	done := make(chan error)
	go func() {
		var err error
		for i := 0; i < 2000 && err == nil && !stop.Load(); i++ {
			_, err = p.Append([]Record{{Value: []byte(strings.Repeat("a", 50))}})
		}
		stop.Store(true)
		done <- err
	}()
	checks := 0
	for ; !stop.Load(); checks++ {
		if err := p.Check(); err != nil {
			stop.Store(true)
			<-done
			require.NoError(t, err, "check %d", checks)
		}
	}
	require.NoError(t, <-done)
	require.Positive(t, checks)
	require.Greater(t, len(p.SegmentBases()), 1, "the appends rolled")
}
