package index

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// logOfBatches writes a .log of batches holding counts[i] records each,
// with consecutive offsets from 0, and returns the file and each batch's
// position.
func logOfBatches(t *testing.T, counts ...int) (*os.File, []record.Position) {
	t.Helper()
	var (
		data []byte
		pos  []record.Position
		next record.Offset
		b    record.Builder
	)
	for _, n := range counts {
		b.Reset()
		for i := 0; i < n; i++ {
			b.Append(1_700_000_000_000, nil, []byte("value"), nil)
		}
		batch, err := b.Build()
		require.NoError(t, err)
		record.SetBaseOffset(batch, next)
		pos = append(pos, record.Position(len(data)))
		data = append(data, batch...)
		next += record.Offset(n)
	}
	name := filepath.Join(t.TempDir(), "00000000000000000000.log")
	require.NoError(t, os.WriteFile(name, data, 0o644))
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f, pos
}

func TestLogMapReadAt(t *testing.T) {
	f, _ := logOfBatches(t, 1, 2, 3)
	want, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	m, err := MapLog(f.Fd(), f.Name(), int64(len(want)))
	require.NoError(t, err)
	require.Equal(t, len(want), m.Len())

	got := make([]byte, len(want))
	n, err := m.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	require.Equal(t, want, got)

	n, err = m.ReadAt(got[:10], int64(len(want)-4))
	require.ErrorIs(t, err, io.EOF, "a read past the end is short, like a file's")
	require.Equal(t, 4, n)
	require.Equal(t, want[len(want)-4:], got[:4])
	_, err = m.ReadAt(got[:1], int64(len(want)))
	require.ErrorIs(t, err, io.EOF)
	_, err = m.ReadAt(got[:1], -1)
	require.Error(t, err)

	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
	_, err = m.ReadAt(got[:1], 0)
	require.ErrorIs(t, err, ErrClosed)
	_, _, _, err = m.FindBatch(0, record.Position(len(want)), 0, 0, 4096)
	require.ErrorIs(t, err, ErrClosed)
}

// An active segment is mapped past the end of its file: bytes appended
// later are read through the same mapping.
func TestLogMapSeesAppends(t *testing.T) {
	f, _ := logOfBatches(t, 1)
	st, err := f.Stat()
	require.NoError(t, err)
	m, err := MapLog(f.Fd(), f.Name(), 1<<20)
	require.NoError(t, err)
	defer m.Close()
	more := []byte("appended after the mapping was made")
	_, err = f.WriteAt(more, st.Size())
	require.NoError(t, err)
	got := make([]byte, len(more))
	_, err = m.ReadAt(got, st.Size())
	require.NoError(t, err)
	require.Equal(t, more, got)
}

// A file cut under its mapping by someone else makes reads of the lost
// bytes fail with ErrFault instead of killing the process with SIGBUS.
func TestLogMapTruncatedUnderneath(t *testing.T) {
	f, _ := logOfBatches(t, 1, 1, 1, 1)
	st, err := f.Stat()
	require.NoError(t, err)
	m, err := MapLog(f.Fd(), f.Name(), st.Size())
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, f.Truncate(0))

	_, err = m.ReadAt(make([]byte, 16), 0)
	require.ErrorIs(t, err, ErrFault)
	_, _, _, err = m.FindBatch(0, record.Position(st.Size()), 3, 0, 4096)
	require.ErrorIs(t, err, ErrFault)
}

func TestLogMapFindBatch(t *testing.T) {
	f, pos := logOfBatches(t, 1, 3, 1, 5)
	st, err := f.Stat()
	require.NoError(t, err)
	end := record.Position(st.Size())
	m, err := MapLog(f.Fd(), f.Name(), st.Size())
	require.NoError(t, err)
	defer m.Close()

	// Offsets 0 | 1 2 3 | 4 | 5 6 7 8 9
	batchOf := []int{0, 1, 1, 1, 2, 3, 3, 3, 3, 3}
	firstOf := []record.Offset{0, 1, 4, 5}
	for off, i := range batchOf {
		for from := 0; from <= i; from++ {
			at, ended, found, err := m.FindBatch(pos[from], end, record.Offset(off), firstOf[from], 4096)
			require.NoError(t, err)
			require.True(t, found, "offset %d from batch %d", off, from)
			require.Equal(t, pos[i], at, "offset %d from batch %d", off, from)
			require.Equal(t, firstOf[i], ended, "the batch before ends where batch %d begins", i)
		}
	}
	at, _, found, err := m.FindBatch(pos[0], end, 10, 0, 4096)
	require.NoError(t, err)
	require.False(t, found, "past the last batch")
	require.Equal(t, end, at)

	// A range that ends inside the last batch stops at its start.
	at, _, found, err = m.FindBatch(pos[0], end-1, 9, 0, 4096)
	require.NoError(t, err)
	require.False(t, found)
	require.Equal(t, pos[3], at)

	// A bad header stops the walk where it is, for the caller to report.
	_, err = f.WriteAt([]byte{99}, int64(pos[2])+16) // magic
	require.NoError(t, err)
	at, _, found, err = m.FindBatch(pos[0], end, 7, 0, 4096)
	require.NoError(t, err)
	require.False(t, found)
	require.Equal(t, pos[2], at)
	at, _, found, err = m.FindBatch(pos[0], end, 2, 0, 4096)
	require.NoError(t, err)
	require.True(t, found, "batches before the bad one are still found")
	require.Equal(t, pos[1], at)

	// So does a base offset that goes back below where the batch before
	// ended (batch 1 claiming offset 0), or below from.
	_, err = f.WriteAt([]byte{0, 0, 0, 0, 0, 0, 0, 0}, int64(pos[1]))
	require.NoError(t, err)
	at, ended, found, err := m.FindBatch(pos[0], end, 4, 0, 4096)
	require.NoError(t, err)
	require.False(t, found)
	require.Equal(t, pos[1], at)
	require.Equal(t, record.Offset(1), ended)
	at, ended, found, err = m.FindBatch(pos[1], end, 4, 1, 4096)
	require.NoError(t, err)
	require.False(t, found)
	require.Equal(t, pos[1], at)
	require.Equal(t, record.Offset(1), ended)
}

func TestMapLogRejectsBadSizes(t *testing.T) {
	f, _ := logOfBatches(t, 1)
	for _, size := range []int64{0, -1} {
		_, err := MapLog(f.Fd(), f.Name(), size)
		require.Error(t, err, "size %d", size)
	}
	var pe *os.PathError
	_, err := MapLog(^uintptr(0), "bad-fd", 4096)
	require.True(t, errors.As(err, &pe), "a failed mmap names the file: %v", err)
}
