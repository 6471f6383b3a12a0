package storage

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// TestCheckProgressInsideSegment: a check of one big segment reports
// progress while it scans it, not only when the segment is done (logfs
// check sat at 0 % for a whole 1 GiB segment), and the calls add up to
// the log's bytes. The step is lowered so that a small log has several.
func TestCheckProgressInsideSegment(t *testing.T) {
	defer func(step record.Position) { checkProgressStep = step }(checkProgressStep)
	checkProgressStep = 4 << 10
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	for i := 0; i < 200; i++ {
		_, err := p.Append([]Record{{Timestamp: 1_700_000_000_000 + int64(i), Value: []byte(fmt.Sprintf("%04d-%0500d", i, i))}})
		require.NoError(t, err)
	}
	segs, err := p.Segments()
	require.NoError(t, err)
	require.Len(t, segs, 1, "one segment")
	size := segs[0].Bytes
	require.Greater(t, size, int64(20*checkProgressStep))

	var calls []int64
	require.NoError(t, l.CheckProgress(func(n int64) { calls = append(calls, n) }))
	var sum int64
	for _, n := range calls {
		require.GreaterOrEqual(t, n, int64(0))
		sum += n
	}
	require.Equal(t, size, sum, "the calls add up to the segment's bytes")
	// A call each time the scan passes a step (batches are not aligned
	// to steps: at least one call per two steps).
	require.GreaterOrEqual(t, len(calls), int(size/int64(2*checkProgressStep)), "a call every %d bytes or so: %v", checkProgressStep, calls)
	for _, n := range calls[:len(calls)-1] {
		require.GreaterOrEqual(t, n, int64(checkProgressStep), "no call before a step's bytes")
	}
}
