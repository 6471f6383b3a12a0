package index

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

func TestTimeMaybeAppendRules(t *testing.T) {
	const base = 500
	type app struct {
		ts  int64
		off record.Offset
	}
	for name, tc := range map[string]struct {
		before  []app // appended first, must succeed
		append  app
		want    error
		written bool // the entry was added
	}{
		"first entry":                           {append: app{1000, 510}, written: true},
		"first entry at timestamp 0":            {append: app{0, 500}, written: true},
		"no timestamp on an empty index":        {append: app{-1, 510}},
		"below -1 on an empty index is skipped": {append: app{-7, 510}},
		"offset below the base":                 {append: app{1000, 499}, want: ErrOffsetOverflow},
		"offset below the base, skipped":        {append: app{-1, 499}},
		"relative offset MaxInt32":              {append: app{1000, base + math.MaxInt32}, written: true},
		"relative offset past MaxInt32":         {append: app{1000, base + math.MaxInt32 + 1}, want: ErrOffsetOverflow},
		"greater timestamp and offset":          {before: []app{{1000, 510}}, append: app{1001, 511}, written: true},
		"greater timestamp, same offset":        {before: []app{{1000, 510}}, append: app{1001, 510}, written: true},
		"equal entry is a no-op":                {before: []app{{1000, 510}}, append: app{1000, 510}},
		"equal timestamp, later offset skipped": {before: []app{{1000, 510}}, append: app{1000, 520}},
		"timestamp below the last":              {before: []app{{1000, 510}}, append: app{999, 520}, want: ErrInvalidTimestamp},
		"offset below the last":                 {before: []app{{1000, 510}}, append: app{1001, 509}, want: ErrInvalidOffset},
		"offset checked before timestamp":       {before: []app{{1000, 510}}, append: app{999, 509}, want: ErrInvalidOffset},
	} {
		t.Run(name, func(t *testing.T) {
			x := newTimeIndex(t, base, 1200)
			for _, a := range tc.before {
				require.NoError(t, x.MaybeAppend(a.ts, a.off, false))
			}
			err := x.MaybeAppend(tc.append.ts, tc.append.off, false)
			n, nerr := x.Entries()
			require.NoError(t, nerr)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			} else {
				require.NoError(t, err)
			}
			if !tc.written {
				require.Equal(t, len(tc.before), n)
				return
			}
			require.Equal(t, len(tc.before)+1, n)
			ts, off, err := x.LastEntry()
			require.NoError(t, err)
			require.Equal(t, tc.append.ts, ts)
			require.Equal(t, tc.append.off, off)
		})
	}
}

func TestTimeReservedSlot(t *testing.T) {
	x := newTimeIndex(t, 0, 50) // rounded down to 48 bytes: 4 slots
	require.Equal(t, 4, x.MaxEntries())
	require.Equal(t, int64(0), fileSize(t, x.Path()), "capacity is not preallocated")
	for i := 1; i <= 3; i++ {
		require.False(t, x.IsFull())
		require.NoError(t, x.MaybeAppend(int64(i*10), record.Offset(i), false))
	}
	require.True(t, x.IsFull(), "the last slot is reserved")
	require.ErrorIs(t, x.MaybeAppend(40, 4, false), ErrFull)
	// Roll and close may use it.
	require.NoError(t, x.MaybeAppend(40, 4, true))
	require.NoError(t, x.MaybeAppend(40, 4, true), "the final entry twice is a no-op")
	// Beyond it there is nothing: KAFKA-19200's overrun is an error here.
	require.ErrorIs(t, x.MaybeAppend(50, 5, true), ErrFull)
	n, err := x.Entries()
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.NoError(t, x.Seal())
	require.Equal(t, int64(4*TimeEntrySize), fileSize(t, x.Path()))
}

func TestTimeLookup(t *testing.T) {
	x := newTimeIndex(t, 50, 0)
	ts, off, err := x.Lookup(1000)
	require.NoError(t, err)
	require.Equal(t, int64(-1), ts, "empty index answers -1")
	require.Equal(t, record.Offset(50), off)

	for _, e := range []struct {
		ts  int64
		off record.Offset
	}{{1000, 55}, {2000, 60}, {3000, 60}, {4000, 70}} {
		require.NoError(t, x.MaybeAppend(e.ts, e.off, false))
	}
	for name, tc := range map[string]struct {
		target  int64
		wantTs  int64
		wantOff record.Offset
	}{
		"far below":      {math.MinInt64, -1, 50},
		"negative":       {-1, -1, 50},
		"below first":    {999, -1, 50},
		"the first":      {1000, 1000, 55},
		"between":        {2500, 2000, 60},
		"equal offsets":  {3000, 3000, 60},
		"the last":       {4000, 4000, 70},
		"above the last": {math.MaxInt64, 4000, 70},
	} {
		t.Run(name, func(t *testing.T) {
			ts, off, err := x.Lookup(tc.target)
			require.NoError(t, err)
			require.Equal(t, tc.wantTs, ts)
			require.Equal(t, tc.wantOff, off)
		})
	}
}

func TestTimeTruncateTo(t *testing.T) {
	// Entries (10, 105), (20, 110), (30, 110), (40, 120) over base 100:
	// truncation goes by offset, and drops every entry at or above it.
	for name, tc := range map[string]struct {
		to   record.Offset
		keep int
	}{
		"the base":          {100, 0},
		"below the first":   {104, 0},
		"the first":         {105, 0},
		"between":           {107, 1},
		"a repeated offset": {110, 1},
		"above it":          {111, 3},
		"the last":          {120, 3},
		"above the last":    {121, 4},
	} {
		t.Run(name, func(t *testing.T) {
			x := newTimeIndex(t, 100, 1200)
			for _, e := range []te{{10, 5}, {20, 10}, {30, 10}, {40, 20}} {
				require.NoError(t, x.MaybeAppend(e.ts, 100+record.Offset(e.rel), false))
			}
			require.NoError(t, x.TruncateTo(tc.to))
			n, err := x.Entries()
			require.NoError(t, err)
			require.Equal(t, tc.keep, n)
		})
	}
}

func TestTimeEntry(t *testing.T) {
	x := newTimeIndex(t, 7, 1200)
	require.NoError(t, x.MaybeAppend(100, 9, false))
	require.NoError(t, x.MaybeAppend(200, 12, false))
	ts, off, err := x.Entry(1)
	require.NoError(t, err)
	require.Equal(t, int64(200), ts)
	require.Equal(t, record.Offset(12), off)
	_, _, err = x.Entry(2)
	require.ErrorIs(t, err, ErrOutOfRange)
	require.NoError(t, x.Reset())
	ts, off, err = x.LastEntry()
	require.NoError(t, err)
	require.Equal(t, int64(-1), ts)
	require.Equal(t, record.Offset(7), off)
}
