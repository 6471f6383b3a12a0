package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// TestRecoveryReport checks that a partition says what opening it cut: a
// clean open reports nothing, a forced recovery of a log with garbage at
// its end reports the garbage, read-only without touching the file and
// writable after cutting it.
func TestRecoveryReport(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	tp, err := l.CreateTopic("orders", 1, nil)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(values(10, "v"))
	require.NoError(t, err)
	require.NoError(t, l.Close())

	clean, err := Open(dir, Options{Logger: testLogger(t), ReadOnly: true})
	require.NoError(t, err)
	p, err = clean.Partition("orders", 0)
	require.NoError(t, err)
	require.Equal(t, RecoveryReport{}, p.Recovery())
	require.NoError(t, clean.Close())

	logPath := layout.SegmentPath(filepath.Join(dir, "orders-0"), 0, layout.LogSuffix)
	st, err := os.Stat(logPath)
	require.NoError(t, err)
	garbage := []byte("not a batch at all, just junk bytes")
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(garbage)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	for _, readOnly := range []bool{true, false} {
		l, err := Open(dir, Options{Logger: testLogger(t), ReadOnly: readOnly, ForceRecovery: true, RetentionCheckInterval: -1})
		require.NoError(t, err)
		p, err := l.Partition("orders", 0)
		require.NoError(t, err)
		r := p.Recovery()
		require.Equal(t, int64(len(garbage)), r.CutBytes, "read-only %v", readOnly)
		require.Equal(t, st.Size()+int64(len(garbage)), r.ScannedBytes, "read-only %v", readOnly)
		require.Empty(t, r.Dropped)
		require.Equal(t, record.Offset(10), p.EndOffset())
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
		after, err := os.Stat(logPath)
		require.NoError(t, err)
		if readOnly {
			require.Equal(t, st.Size()+int64(len(garbage)), after.Size(), "a read-only open must not cut")
		} else {
			require.Equal(t, st.Size(), after.Size())
		}
	}
}
