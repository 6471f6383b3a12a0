package index

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// sealedOffsetFile writes a closed (trimmed) offset index of n entries with
// keys 1..n at positions 100, 200, ... and returns its path.
func sealedOffsetFile(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "00000000000000000000.index")
	x, err := CreateOffsetIndex(p, 0, Options{MaxBytes: 4096})
	require.NoError(t, err)
	fillOffsets(t, x, n, 1)
	require.NoError(t, x.Close())
	return p
}

func TestCreateReservesCapacity(t *testing.T) {
	for name, tc := range map[string]struct {
		time     bool
		maxBytes int64
		wantCap  int
	}{
		"offset, default size": {false, 0, 10485760 / OffsetEntrySize},
		"time, default size":   {true, 0, 10485756 / TimeEntrySize},
		"offset, rounded down": {false, 1001, 1000 / OffsetEntrySize},
		"time, rounded down":   {true, 1001, 996 / TimeEntrySize},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x")
			require.NoError(t, os.WriteFile(p, []byte("an older file, replaced by Create"), 0o644))
			o := Options{MaxBytes: tc.maxBytes}
			var c *file
			if tc.time {
				x, err := CreateTimeIndex(p, 0, o)
				require.NoError(t, err)
				c = &x.file
			} else {
				x, err := CreateOffsetIndex(p, 0, o)
				require.NoError(t, err)
				c = &x.file
			}
			require.Equal(t, int64(0), fileSize(t, p), "no block is reserved: the file holds what is written")
			require.True(t, c.Mapped())
			n, err := c.Entries()
			require.NoError(t, err)
			require.Equal(t, 0, n)
			require.Equal(t, tc.wantCap, c.MaxEntries())
			require.NoError(t, c.Close())
			require.Equal(t, int64(0), fileSize(t, p))
		})
	}
}

func TestSealAndCloseTrim(t *testing.T) {
	for _, seal := range []bool{false, true} {
		t.Run(map[bool]string{false: "close", true: "seal"}[seal], func(t *testing.T) {
			dir := t.TempDir()
			ox, err := CreateOffsetIndex(filepath.Join(dir, "a.index"), 0, Options{})
			require.NoError(t, err)
			tx, err := CreateTimeIndex(filepath.Join(dir, "a.timeindex"), 0, Options{})
			require.NoError(t, err)
			fillOffsets(t, ox, 5, 3)
			for i := 1; i <= 7; i++ {
				require.NoError(t, tx.MaybeAppend(int64(1000*i), record.Offset(i), false))
			}
			if seal {
				require.NoError(t, ox.Seal())
				require.NoError(t, tx.Seal())
				require.True(t, ox.Mapped(), "a sealed index keeps a read-only mapping")
				require.True(t, ox.IsFull(), "a sealed index is full")
				require.Equal(t, 5, ox.MaxEntries())
				require.ErrorIs(t, ox.Append(100, 10000), ErrReadOnly)
				require.ErrorIs(t, tx.MaybeAppend(9000, 9, true), ErrReadOnly)
				require.NoError(t, ox.Seal(), "sealing twice does nothing")
				require.NoError(t, ox.Flush())
				off, pos, err := ox.Lookup(7)
				require.NoError(t, err)
				require.Equal(t, record.Offset(6), off)
				require.Equal(t, record.Position(200), pos)
			}
			require.NoError(t, ox.Close())
			require.NoError(t, tx.Close())
			require.Equal(t, int64(5*OffsetEntrySize), fileSize(t, filepath.Join(dir, "a.index")))
			require.Equal(t, int64(7*TimeEntrySize), fileSize(t, filepath.Join(dir, "a.timeindex")))
			require.NoError(t, ox.Close(), "Close is idempotent")
		})
	}
}

func TestOpenIsLazy(t *testing.T) {
	p := sealedOffsetFile(t, 3)
	open := func() *OffsetIndex {
		x, err := OpenOffsetIndex(p, 0, Options{LogSize: -1})
		require.NoError(t, err)
		require.False(t, x.Mapped(), "Open maps nothing")
		return x
	}

	t.Run("first use maps", func(t *testing.T) {
		x := open()
		defer x.Close()
		off, pos, err := x.Lookup(2)
		require.NoError(t, err)
		require.Equal(t, record.Offset(2), off)
		require.Equal(t, record.Position(200), pos)
		require.True(t, x.Mapped())
	})
	t.Run("close does not map", func(t *testing.T) {
		x := open()
		require.NoError(t, x.Close())
		require.False(t, x.Mapped())
		require.Equal(t, int64(3*OffsetEntrySize), fileSize(t, p))
		_, _, err := x.Lookup(2)
		require.ErrorIs(t, err, ErrClosed, "a closed index is not mapped by a late lookup")
		require.False(t, x.Mapped())
	})
	t.Run("seal does not map", func(t *testing.T) {
		x := open()
		defer x.Close()
		require.NoError(t, x.Seal())
		require.NoError(t, x.Flush())
		require.False(t, x.Mapped())
	})
	t.Run("append does not map", func(t *testing.T) {
		x := open()
		defer x.Close()
		require.ErrorIs(t, x.Append(10, 1000), ErrReadOnly)
		require.ErrorIs(t, x.Reset(), ErrReadOnly)
		require.False(t, x.Mapped())
	})
	t.Run("rename does not map", func(t *testing.T) {
		x := open()
		np := p + ".deleted"
		require.NoError(t, x.Rename(np))
		require.False(t, x.Mapped())
		require.Equal(t, np, x.Path())
		n, err := x.Entries()
		require.NoError(t, err)
		require.Equal(t, 3, n, "first use after a rename maps the new path")
		require.NoError(t, x.Rename(p))
		require.NoError(t, x.Close())
	})
	t.Run("delete does not map", func(t *testing.T) {
		q := sealedOffsetFile(t, 2)
		x, err := OpenOffsetIndex(q, 0, Options{LogSize: -1})
		require.NoError(t, err)
		require.NoError(t, x.Delete())
		require.False(t, x.Mapped())
		_, err = os.Stat(q)
		require.ErrorIs(t, err, fs.ErrNotExist)
		_, err = x.Entries()
		require.ErrorIs(t, err, ErrClosed)
		require.NoError(t, x.Delete(), "deleting a deleted index is not an error")
		require.NoError(t, x.Close())
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := OpenOffsetIndex(filepath.Join(t.TempDir(), "none.index"), 0, Options{})
		require.ErrorIs(t, err, fs.ErrNotExist)
		_, err = OpenTimeIndex(filepath.Join(t.TempDir(), "none.timeindex"), 0, Options{})
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
}

func TestManyLazyIndexesMapOnlyWhatIsRead(t *testing.T) {
	// A partition of many segments: opening maps nothing, reading one
	// segment maps one index.
	p := sealedOffsetFile(t, 4)
	xs := make([]*OffsetIndex, 500)
	for i := range xs {
		x, err := OpenOffsetIndex(p, 0, Options{LogSize: -1})
		require.NoError(t, err)
		xs[i] = x
	}
	_, _, err := xs[123].Lookup(3)
	require.NoError(t, err)
	for i, x := range xs {
		require.Equal(t, i == 123, x.Mapped(), "index %d", i)
		require.NoError(t, x.Close())
	}
}

func TestDeleteMapped(t *testing.T) {
	x := newOffsetIndex(t, 0, 1024)
	fillOffsets(t, x, 3, 1)
	p := x.Path()
	require.NoError(t, x.Delete())
	require.False(t, x.Mapped())
	_, err := os.Stat(p)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorIs(t, x.Append(10, 1000), ErrClosed)
}

func TestRenameMapped(t *testing.T) {
	x := newOffsetIndex(t, 0, 1024)
	fillOffsets(t, x, 3, 1)
	np := filepath.Join(t.TempDir(), "moved.index")
	require.NoError(t, x.Rename(np))
	require.NoError(t, x.Append(4, 400), "the writable mapping survives a rename")
	require.NoError(t, x.Close())
	require.Equal(t, int64(4*OffsetEntrySize), fileSize(t, np), "Close trims the renamed file")
}

func TestReopenAsActiveHasRoom(t *testing.T) {
	p := sealedOffsetFile(t, 3)
	x, err := OpenOffsetIndex(p, 0, Options{LogSize: 10000, MaxBytes: 1024, Writable: true})
	require.NoError(t, err)
	require.True(t, x.Mapped())
	require.Equal(t, int64(3*OffsetEntrySize), fileSize(t, p), "nothing is preallocated")
	n, err := x.Entries()
	require.NoError(t, err)
	require.Equal(t, 3, n, "entries kept")
	require.Equal(t, 128, x.MaxEntries())
	require.False(t, x.IsFull(), "KAFKA-6388: a reopened active index is not full")
	require.ErrorIs(t, x.Append(3, 400), ErrInvalidOffset, "appends continue after the old entries")
	require.NoError(t, x.Append(4, 400))
	require.NoError(t, x.Check())
	require.NoError(t, x.Close())
	require.Equal(t, int64(4*OffsetEntrySize), fileSize(t, p))
}

func TestReopenEmptyAsActive(t *testing.T) {
	// KAFKA-6388's shape: an empty, trimmed index of the active segment
	// would have no slot if it were not re-expanded.
	for name, time := range map[string]bool{"offset": false, "time": true} {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, "00000000000000000042.idx", nil)
			o := Options{MaxBytes: 120, Writable: true}
			var c *file
			if time {
				x, err := OpenTimeIndex(p, 42, o)
				require.NoError(t, err)
				require.NoError(t, x.MaybeAppend(5, 43, false))
				c = &x.file
			} else {
				x, err := OpenOffsetIndex(p, 42, o)
				require.NoError(t, err)
				require.NoError(t, x.Append(43, 50))
				c = &x.file
			}
			require.False(t, c.IsFull())
			require.Equal(t, 10*12/c.entrySize, c.MaxEntries())
			require.NoError(t, c.Close())
			require.Equal(t, int64(c.entrySize), fileSize(t, p))
		})
	}
}

func TestReopenLargerThanMaxBytes(t *testing.T) {
	// segment.index.bytes was lowered: the entries stay, the index is full.
	p := sealedOffsetFile(t, 10)
	x, err := OpenOffsetIndex(p, 0, Options{LogSize: -1, MaxBytes: 16, Writable: true})
	require.NoError(t, err)
	defer x.Close()
	require.Equal(t, 10, x.MaxEntries())
	require.True(t, x.IsFull())
	require.ErrorIs(t, x.Append(11, 1100), ErrFull)
}

func TestZeroLengthFile(t *testing.T) {
	p := writeFile(t, "00000000000000000078.index", nil)
	x, err := OpenOffsetIndex(p, 78, Options{LogSize: 0})
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Check())
	off, pos, err := x.Lookup(100)
	require.NoError(t, err)
	require.Equal(t, record.Offset(78), off)
	require.Equal(t, record.Position(0), pos)
	require.False(t, x.Mapped(), "an empty file is never mapped")
	require.Equal(t, 0, x.MaxEntries())
	require.True(t, x.IsFull())
	require.NoError(t, x.TruncateTo(0))
	require.NoError(t, x.Flush())

	q := writeFile(t, "00000000000000000078.timeindex", nil)
	y, err := OpenTimeIndex(q, 78, Options{})
	require.NoError(t, err)
	defer y.Close()
	ts, off, err := y.LastEntry()
	require.NoError(t, err)
	require.Equal(t, int64(-1), ts)
	require.Equal(t, record.Offset(78), off)
	require.False(t, y.Mapped())
}

func TestTruncateSealedIndex(t *testing.T) {
	p := sealedOffsetFile(t, 6)
	x, err := OpenOffsetIndex(p, 0, Options{LogSize: -1})
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.TruncateTo(4))
	require.Equal(t, int64(3*OffsetEntrySize), fileSize(t, p))
	off, _, err := x.LastEntry()
	require.NoError(t, err)
	require.Equal(t, record.Offset(3), off)
	require.NoError(t, x.TruncateTo(0))
	require.Equal(t, int64(0), fileSize(t, p))
	require.False(t, x.Mapped())
	require.NoError(t, x.Flush())
	require.NoError(t, x.Check())
}

func TestClosedIndex(t *testing.T) {
	x := newOffsetIndex(t, 0, 1024)
	y := newTimeIndex(t, 0, 1200)
	fillOffsets(t, x, 2, 1)
	require.NoError(t, x.Close())
	require.NoError(t, y.Close())
	for name, call := range map[string]func() error{
		"Lookup":       func() error { _, _, err := x.Lookup(1); return err },
		"Append":       func() error { return x.Append(5, 500) },
		"Entry":        func() error { _, _, err := x.Entry(0); return err },
		"LastEntry":    func() error { _, _, err := x.LastEntry(); return err },
		"Entries":      func() error { _, err := x.Entries(); return err },
		"Check":        x.Check,
		"Reset":        x.Reset,
		"TruncateTo":   func() error { return x.TruncateTo(1) },
		"Seal":         x.Seal,
		"Flush":        x.Flush,
		"time Lookup":  func() error { _, _, err := y.Lookup(1); return err },
		"MaybeAppend":  func() error { return y.MaybeAppend(1, 1, true) },
		"time Entry":   func() error { _, _, err := y.Entry(0); return err },
		"time LastEnt": func() error { _, _, err := y.LastEntry(); return err },
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, call(), ErrClosed)
		})
	}
	require.True(t, x.IsFull())
	require.Equal(t, 0, x.MaxEntries())
	require.False(t, x.Mapped())
	require.NoError(t, x.Close())
}

func TestFlush(t *testing.T) {
	x := newOffsetIndex(t, 0, 1024)
	require.NoError(t, x.Flush(), "an empty writable index")
	fillOffsets(t, x, 3, 1)
	require.NoError(t, x.Flush())
	require.NoError(t, x.Reset())
	require.NoError(t, x.Seal())
	require.False(t, x.Mapped())
	require.NoError(t, x.Flush(), "trimmed to nothing: the length is synced")

	p := sealedOffsetFile(t, 2)
	y, err := OpenOffsetIndex(p, 0, Options{LogSize: -1})
	require.NoError(t, err)
	defer y.Close()
	require.NoError(t, y.Flush(), "an index never used has nothing to flush")
	require.False(t, y.Mapped())
}

// TestNoWritableMapping: no index is ever mapped writable (VmFlags "wr"
// in /proc/self/smaps), so that no store can need a block the file
// system does not have: on a full disk that is SIGBUS, not an error.
func TestNoWritableMapping(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("no /proc/self/smaps")
	}
	dir := t.TempDir()
	off, err := CreateOffsetIndex(filepath.Join(dir, "00000000000000000000.index"), 0, Options{})
	require.NoError(t, err)
	defer off.Close()
	tim, err := CreateTimeIndex(filepath.Join(dir, "00000000000000000000.timeindex"), 0, Options{})
	require.NoError(t, err)
	defer tim.Close()
	for i := 1; i <= 2000; i++ { // several pages, some written, some pending
		require.NoError(t, off.Append(record.Offset(i), record.Position(100*i)))
		require.NoError(t, tim.MaybeAppend(int64(i), record.Offset(i), false))
	}
	for _, p := range []string{off.path, tim.path} {
		flags := vmFlags(t, p)
		require.Contains(t, flags, "rd", p)
		require.NotContains(t, flags, "wr", "%s is mapped writable", p)
	}
}

// vmFlags returns the VmFlags of the mapping of path in /proc/self/smaps.
func vmFlags(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 6 && strings.Contains(fields[0], "-"):
			in = fields[len(fields)-1] == path
		case in && len(fields) > 0 && fields[0] == "VmFlags:":
			return fields[1:]
		}
	}
	t.Fatalf("%s is not mapped", path)
	return nil
}
