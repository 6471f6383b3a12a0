package index

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// oe is an offset-index entry as stored: relative offset, position.
type oe struct{ rel, pos uint32 }

// te is a time-index entry as stored: timestamp, relative offset.
type te struct {
	ts  int64
	rel uint32
}

func offsetBytes(es ...oe) []byte {
	b := make([]byte, 0, len(es)*OffsetEntrySize)
	for _, e := range es {
		b = binary.BigEndian.AppendUint32(b, e.rel)
		b = binary.BigEndian.AppendUint32(b, e.pos)
	}
	return b
}

func timeBytes(es ...te) []byte {
	b := make([]byte, 0, len(es)*TimeEntrySize)
	for _, e := range es {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, e.rel)
	}
	return b
}

// writeFile writes data to name in a fresh temporary directory.
func writeFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

func fileSize(t testing.TB, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	require.NoError(t, err)
	return st.Size()
}

// newOffsetIndex creates an offset index in a temporary directory. At the
// end of the test it checks the index, if still open, and closes it.
func newOffsetIndex(t testing.TB, base record.Offset, maxBytes int64) *OffsetIndex {
	t.Helper()
	x, err := CreateOffsetIndex(filepath.Join(t.TempDir(), "00000000000000000000.index"), base, Options{MaxBytes: maxBytes, LogSize: -1})
	require.NoError(t, err)
	t.Cleanup(func() { checkAndClose(t, &x.file) })
	return x
}

// newTimeIndex is newOffsetIndex for a time index.
func newTimeIndex(t testing.TB, base record.Offset, maxBytes int64) *TimeIndex {
	t.Helper()
	x, err := CreateTimeIndex(filepath.Join(t.TempDir(), "00000000000000000000.timeindex"), base, Options{MaxBytes: maxBytes})
	require.NoError(t, err)
	t.Cleanup(func() { checkAndClose(t, &x.file) })
	return x
}

func checkAndClose(t testing.TB, c *file) {
	t.Helper()
	if err := c.Check(); !errors.Is(err, ErrClosed) {
		require.NoError(t, err, "Check after the test")
	}
	require.NoError(t, c.Close())
}

// fillOffsets appends n entries with keys base+1, base+2, ... (times
// step) at positions 100, 200, ...
func fillOffsets(t testing.TB, x *OffsetIndex, n int, step int64) {
	t.Helper()
	for i := 1; i <= n; i++ {
		require.NoError(t, x.Append(x.Base()+record.Offset(int64(i)*step), record.Position(100*i)))
	}
}
