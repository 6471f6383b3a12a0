package index

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

func TestOffsetAppendRules(t *testing.T) {
	const base = 1000
	type app struct {
		off record.Offset
		pos record.Position
	}
	for name, tc := range map[string]struct {
		before []app // appended first, must succeed
		append app
		want   error
	}{
		"first entry":                      {append: app{1000, 1}},
		"first entry above base":           {append: app{1005, 4096}},
		"greater offset and position":      {before: []app{{1005, 100}}, append: app{1006, 101}},
		"offset equal to the last":         {before: []app{{1005, 100}}, append: app{1005, 200}, want: ErrInvalidOffset},
		"offset below the last":            {before: []app{{1005, 100}}, append: app{1004, 200}, want: ErrInvalidOffset},
		"offset below the base":            {append: app{999, 100}, want: ErrOffsetOverflow},
		"relative offset MaxInt32":         {append: app{base + math.MaxInt32, 100}},
		"relative offset past MaxInt32":    {append: app{base + math.MaxInt32 + 1, 100}, want: ErrOffsetOverflow},
		"position 0 (first batch)":         {append: app{1005, 0}, want: ErrInvalidPosition},
		"negative position":                {append: app{1005, -1}, want: ErrInvalidPosition},
		"position equal to the last":       {before: []app{{1005, 100}}, append: app{1006, 100}, want: ErrInvalidPosition},
		"position below the last":          {before: []app{{1005, 100}}, append: app{1006, 99}, want: ErrInvalidPosition},
		"position MaxUint32":               {append: app{1005, math.MaxUint32}},
		"position past uint32":             {append: app{1005, math.MaxUint32 + 1}, want: ErrInvalidPosition},
		"order checked before overflow":    {before: []app{{1005, 100}}, append: app{999, 200}, want: ErrInvalidOffset},
		"position checked after the key":   {before: []app{{1005, 100}}, append: app{1005, 50}, want: ErrInvalidOffset},
		"overflow checked before position": {append: app{999, 0}, want: ErrOffsetOverflow},
	} {
		t.Run(name, func(t *testing.T) {
			x := newOffsetIndex(t, base, 1024)
			for _, a := range tc.before {
				require.NoError(t, x.Append(a.off, a.pos))
			}
			err := x.Append(tc.append.off, tc.append.pos)
			n, nerr := x.Entries()
			require.NoError(t, nerr)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				require.Equal(t, len(tc.before), n, "a refused append adds nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, len(tc.before)+1, n)
			off, pos, err := x.LastEntry()
			require.NoError(t, err)
			require.Equal(t, tc.append.off, off)
			require.Equal(t, tc.append.pos, pos)
		})
	}
}

func TestOffsetLookup(t *testing.T) {
	x := newOffsetIndex(t, 50, 0)
	off, pos, err := x.Lookup(60)
	require.NoError(t, err)
	require.Equal(t, record.Offset(50), off, "empty index answers the base")
	require.Equal(t, record.Position(0), pos)

	for _, e := range []struct {
		off record.Offset
		pos record.Position
	}{{55, 4100}, {60, 8300}, {70, 12500}} {
		require.NoError(t, x.Append(e.off, e.pos))
	}
	for name, tc := range map[string]struct {
		target  record.Offset
		wantOff record.Offset
		wantPos record.Position
	}{
		"far below the base": {math.MinInt64, 50, 0},
		"below the base":     {10, 50, 0},
		"the base":           {50, 50, 0},
		"below the first":    {54, 50, 0},
		"the first":          {55, 55, 4100},
		"between":            {59, 55, 4100},
		"exact middle":       {60, 60, 8300},
		"the last":           {70, 70, 12500},
		"above the last":     {71, 70, 12500},
		"far above":          {math.MaxInt64, 70, 12500},
		"above uint32":       {50 + math.MaxUint32 + 7, 70, 12500},
	} {
		t.Run(name, func(t *testing.T) {
			off, pos, err := x.Lookup(tc.target)
			require.NoError(t, err)
			require.Equal(t, tc.wantOff, off)
			require.Equal(t, tc.wantPos, pos)
		})
	}
}

func TestOffsetFull(t *testing.T) {
	x := newOffsetIndex(t, 0, 70) // rounded down to 64 bytes: 8 entries
	require.Equal(t, 8, x.MaxEntries())
	require.Equal(t, int64(0), fileSize(t, x.Path()), "capacity is not preallocated")
	for i := 1; i <= 8; i++ {
		require.False(t, x.IsFull())
		require.NoError(t, x.Append(record.Offset(i), record.Position(i*10)))
	}
	require.True(t, x.IsFull())
	require.ErrorIs(t, x.Append(9, 90), ErrFull)
	n, err := x.Entries()
	require.NoError(t, err)
	require.Equal(t, 8, n)
}

func TestOffsetTinyMaxBytes(t *testing.T) {
	// segment.index.bytes smaller than an entry: no slot at all, and no
	// mapping of an empty file.
	x := newOffsetIndex(t, 0, 4)
	require.Equal(t, 0, x.MaxEntries())
	require.True(t, x.IsFull())
	require.False(t, x.Mapped())
	require.ErrorIs(t, x.Append(1, 10), ErrFull)
	require.NoError(t, x.Seal())
	require.NoError(t, x.Flush())
}

func TestOffsetTruncateTo(t *testing.T) {
	// Entries 110, 120, 130, 140 over base 100.
	for name, tc := range map[string]struct {
		to   record.Offset
		keep int
	}{
		"below the base":         {5, 0},
		"the base":               {100, 0},
		"below the first entry":  {105, 0},
		"exactly the first":      {110, 0},
		"between":                {125, 2},
		"exactly the third":      {130, 2},
		"exactly the last":       {140, 3},
		"above the last":         {141, 4},
		"far above":              {math.MaxInt64, 4},
		"above a relative int32": {100 + math.MaxUint32 + 1, 4},
	} {
		for _, sealed := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/writable", true: "/sealed"}[sealed], func(t *testing.T) {
				x := newOffsetIndex(t, 100, 1024)
				fillOffsets(t, x, 4, 10)
				if sealed {
					require.NoError(t, x.Seal())
				}
				require.NoError(t, x.TruncateTo(tc.to))
				n, err := x.Entries()
				require.NoError(t, err)
				require.Equal(t, tc.keep, n)
				if sealed {
					require.Equal(t, int64(tc.keep*OffsetEntrySize), fileSize(t, x.Path()))
				} else {
					require.NoError(t, x.Flush())
					require.Equal(t, int64(tc.keep*OffsetEntrySize), fileSize(t, x.Path()), "the file holds the kept entries")
					// Appends continue after the kept entries.
					require.NoError(t, x.Append(100+record.Offset(10*tc.keep)+1, record.Position(100*tc.keep+50)))
				}
			})
		}
	}
}

func TestOffsetReset(t *testing.T) {
	x := newOffsetIndex(t, 0, 1024)
	fillOffsets(t, x, 10, 1)
	require.NoError(t, x.Reset())
	n, err := x.Entries()
	require.NoError(t, err)
	require.Equal(t, 0, n)
	require.Equal(t, int64(0), fileSize(t, x.Path()), "Reset empties the file")
	require.Equal(t, 128, x.MaxEntries())
	off, pos, err := x.LastEntry()
	require.NoError(t, err)
	require.Equal(t, record.Offset(0), off)
	require.Equal(t, record.Position(0), pos)
	// Rebuild with different entries, as recovery does.
	require.NoError(t, x.Append(3, 50))
	require.NoError(t, x.Seal())
	require.Equal(t, int64(OffsetEntrySize), fileSize(t, x.Path()))
	require.ErrorIs(t, x.Reset(), ErrReadOnly)
}

func TestOffsetEntry(t *testing.T) {
	x := newOffsetIndex(t, 7, 1024)
	fillOffsets(t, x, 3, 2)
	for i, want := range []record.Offset{9, 11, 13} {
		off, pos, err := x.Entry(i)
		require.NoError(t, err)
		require.Equal(t, want, off)
		require.Equal(t, record.Position(100*(i+1)), pos)
	}
	for _, i := range []int{-1, 3, math.MaxInt} {
		_, _, err := x.Entry(i)
		require.ErrorIs(t, err, ErrOutOfRange)
	}
}

func TestInvalidArguments(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		base record.Offset
		o    Options
	}{
		"negative base":     {-1, Options{}},
		"negative MaxBytes": {0, Options{MaxBytes: -8}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := CreateOffsetIndex(dir+"/a.index", tc.base, tc.o)
			require.ErrorIs(t, err, ErrInvalidArgument)
			_, err = CreateTimeIndex(dir+"/a.timeindex", tc.base, tc.o)
			require.ErrorIs(t, err, ErrInvalidArgument)
			_, err = OpenOffsetIndex(dir+"/a.index", tc.base, tc.o)
			require.ErrorIs(t, err, ErrInvalidArgument)
			_, err = OpenTimeIndex(dir+"/a.timeindex", tc.base, tc.o)
			require.ErrorIs(t, err, ErrInvalidArgument)
		})
	}
}
