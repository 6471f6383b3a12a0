package index

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/tmpfs"
	"github.com/logfs/logfs/record"
)

// TestFullDiskIsAnError appends to both indexes on a real tmpfs that fills
// up: the append that finds no room gets ENOSPC, the entries before it are
// still there, and appends go on once there is room again. With indexes
// written through a writable mapping this test dies of SIGBUS.
func TestFullDiskIsAnError(t *testing.T) {
	dir := tmpfs.Mount(t, 256<<10)
	ox, err := CreateOffsetIndex(filepath.Join(dir, "00000000000000000000.index"), 0, Options{})
	require.NoError(t, err)
	defer ox.Close()
	tx, err := CreateTimeIndex(filepath.Join(dir, "00000000000000000000.timeindex"), 0, Options{})
	require.NoError(t, err)
	defer tx.Close()
	tmpfs.Fill(t, dir, "filler")

	n := 0
	var oerr, terr error
	for i := 1; oerr == nil && terr == nil; i++ {
		if oerr = ox.Append(record.Offset(i), record.Position(10*i)); oerr == nil {
			terr = tx.MaybeAppend(int64(i), record.Offset(i), false)
		}
		if oerr == nil && terr == nil {
			n = i
		}
		require.Less(t, i, 1<<20, "the disk never filled")
	}
	err = oerr
	if err == nil {
		err = terr
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	got, err := ox.Entries()
	require.NoError(t, err)
	require.GreaterOrEqual(t, got, n)
	for _, i := range []int{1, n / 2, n} {
		off, pos, err := ox.Lookup(record.Offset(i))
		require.NoError(t, err)
		require.Equal(t, record.Offset(i), off)
		require.Equal(t, record.Position(10*i), pos)
		ts, toff, err := tx.Lookup(int64(i))
		require.NoError(t, err)
		require.Equal(t, int64(i), ts)
		require.Equal(t, record.Offset(i), toff)
	}
	require.ErrorIs(t, ox.Seal(), syscall.ENOSPC, "sealing needs room for what is pending")

	require.NoError(t, os.Remove(filepath.Join(dir, "filler")))
	for i := n + 1; i < n+2000; i++ {
		if got, _ := ox.Entries(); i <= got {
			continue // appended before the error
		}
		require.NoError(t, ox.Append(record.Offset(i), record.Position(10*i)))
	}
	require.NoError(t, ox.Seal())
	require.NoError(t, ox.Flush())
	require.NoError(t, ox.Check())
}
