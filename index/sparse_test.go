package index

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/vfs"
)

// TestSparseTail: an offset index of three entries whose file was made
// 4 GiB with truncate (a hole: zeros, no disk space) has three entries,
// whether mapped (OpenOffsetIndex) or read for a check (vfs.ReadFileData); the
// hole is neither mapped page by page nor read (it took 12 s to open and
// 16 GiB of memory to read at 16 GiB). A file that is not whole entries
// is read whole, for the rules to refuse.
func TestSparseTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "00000000000000000000.index")
	var entries []byte
	for i := uint32(1); i <= 3; i++ {
		entries = binary.BigEndian.AppendUint32(entries, 10*i)
		entries = binary.BigEndian.AppendUint32(entries, 4096*i)
	}
	require.NoError(t, os.WriteFile(p, entries, 0o644))
	require.NoError(t, os.Truncate(p, 4<<30))

	b, err := vfs.ReadFileData(vfs.Default, p, OffsetEntrySize)
	require.NoError(t, err)
	require.Less(t, len(b), 1<<20, "the hole is not read")
	require.Equal(t, entries, b[:len(entries)])
	got, err := DecodeOffsetEntries(p, b, 0, 1<<20)
	require.NoError(t, err)
	require.Len(t, got, 3)

	x, err := OpenOffsetIndex(p, 0, Options{LogSize: 1 << 20})
	require.NoError(t, err)
	n, err := x.Entries()
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.NoError(t, x.Close())

	require.NoError(t, os.Truncate(p, int64(len(entries))+3))
	b, err = vfs.ReadFileData(vfs.Default, p, OffsetEntrySize)
	require.NoError(t, err)
	require.Len(t, b, len(entries)+3)
	_, err = DecodeOffsetEntries(p, b, 0, 1<<20)
	require.Error(t, err)
}
