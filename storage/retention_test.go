package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetentionRunsInBackground checks the schedule of the background
// retention: a first run 30 s after Open (Kafka's log.initial.task.delay.ms),
// however long the interval, then one every RetentionCheckInterval.
func TestRetentionRunsInBackground(t *testing.T) {
	clk := newClock()
	l := openLog(t, t.TempDir(), Options{Now: clk.Now, RetentionCheckInterval: 10 * time.Minute})
	topic, err := l.CreateTopic("t", 1, small("retention.ms=1000", "file.delete.delay.ms=0"))
	require.NoError(t, err)
	p, err := topic.Partition(0)
	require.NoError(t, err)
	appendExpired := func() {
		_, err := p.Append([]Record{{Timestamp: clk.Now().UnixMilli() - 5000, Value: []byte("old")}})
		require.NoError(t, err)
	}
	// quiet checks that retention does not run for a while of real time
	// (the background loop looks every 100 ms).
	quiet := func(start int64) {
		time.Sleep(350 * time.Millisecond)
		require.Equal(t, start, int64(p.StartOffset()), "retention ran early")
	}
	waitStart := func(want int64) {
		deadline := time.Now().Add(10 * time.Second)
		for int64(p.StartOffset()) != want {
			require.False(t, time.Now().After(deadline), "retention did not run: start %d, want %d", p.StartOffset(), want)
			time.Sleep(20 * time.Millisecond)
		}
	}

	appendExpired()
	clk.Advance(29 * time.Second)
	quiet(0)
	clk.Advance(2 * time.Second)
	waitStart(1)

	appendExpired()
	clk.Advance(9 * time.Minute)
	quiet(1)
	clk.Advance(time.Minute)
	waitStart(2)
}
