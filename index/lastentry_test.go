package index

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// The last entry of a sealed index is read without mapping it, so listing
// the max timestamps of thousands of segments maps nothing; what one entry
// cannot vouch for goes through the full rules.
func TestLastEntryWithoutMapping(t *testing.T) {
	dir := t.TempDir()
	off, err := CreateOffsetIndex(filepath.Join(dir, "a.index"), 100, Options{MaxBytes: 4096, Writable: true})
	require.NoError(t, err)
	ti, err := CreateTimeIndex(filepath.Join(dir, "a.timeindex"), 100, Options{MaxBytes: 4096, Writable: true})
	require.NoError(t, err)
	for i := 1; i <= 5; i++ {
		require.NoError(t, off.Append(record.Offset(100+10*i), record.Position(1000*i)))
		require.NoError(t, ti.MaybeAppend(int64(5000+i), record.Offset(100+10*i), false))
	}
	require.NoError(t, off.Close())
	require.NoError(t, ti.Close())

	lazyOff, err := OpenOffsetIndex(off.Path(), 100, Options{LogSize: 10000})
	require.NoError(t, err)
	defer lazyOff.Close()
	k, pos, err := lazyOff.LastEntry()
	require.NoError(t, err)
	require.Equal(t, record.Offset(150), k)
	require.Equal(t, record.Position(5000), pos)
	require.False(t, lazyOff.Mapped())

	lazyTime, err := OpenTimeIndex(ti.Path(), 100, Options{})
	require.NoError(t, err)
	defer lazyTime.Close()
	ts, o, err := lazyTime.LastEntry()
	require.NoError(t, err)
	require.Equal(t, int64(5005), ts)
	require.Equal(t, record.Offset(150), o)
	require.False(t, lazyTime.Mapped())

	// Zero padding left by a crash goes through the full rules, which end
	// the entries at it: the last entry is the one before the zeros.
	f, err := os.OpenFile(ti.Path(), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 3*TimeEntrySize))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	padded, err := OpenTimeIndex(ti.Path(), 100, Options{})
	require.NoError(t, err)
	defer padded.Close()
	ts, o, err = padded.LastEntry()
	require.NoError(t, err)
	require.Equal(t, int64(5005), ts)
	require.Equal(t, record.Offset(150), o)
	require.True(t, padded.Mapped(), "a zero tail is read by the full rules")

	empty := filepath.Join(dir, "b.timeindex")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	e, err := OpenTimeIndex(empty, 7, Options{})
	require.NoError(t, err)
	defer e.Close()
	ts, o, err = e.LastEntry()
	require.NoError(t, err)
	require.Equal(t, int64(-1), ts)
	require.Equal(t, record.Offset(7), o)
}

func TestLookupSpan(t *testing.T) {
	x, err := CreateOffsetIndex(filepath.Join(t.TempDir(), "s.index"), 10, Options{MaxBytes: 4096, Writable: true})
	require.NoError(t, err)
	defer x.Close()
	sp, err := x.LookupSpan(50)
	require.NoError(t, err)
	require.Equal(t, Span{Off: 10, Pos: 0, From: 10, NextPos: -1}, sp, "empty")
	for i := 1; i <= 3; i++ {
		require.NoError(t, x.Append(record.Offset(10+10*i), record.Position(100*i)))
	}
	cases := []struct {
		target record.Offset
		want   Span
	}{
		{5, Span{Off: 10, Pos: 0, From: 10, NextOff: 20, NextPos: 100}},
		{15, Span{Off: 10, Pos: 0, From: 10, NextOff: 20, NextPos: 100}},
		{20, Span{Off: 20, Pos: 100, From: 10, NextOff: 30, NextPos: 200}},
		{29, Span{Off: 20, Pos: 100, From: 10, NextOff: 30, NextPos: 200}},
		{30, Span{Off: 30, Pos: 200, From: 21, NextOff: 40, NextPos: 300}},
		{40, Span{Off: 40, Pos: 300, From: 31, NextPos: -1}},
		{99, Span{Off: 40, Pos: 300, From: 31, NextPos: -1}},
	}
	for _, c := range cases {
		sp, err := x.LookupSpan(c.target)
		require.NoError(t, err)
		require.Equal(t, c.want, sp, "target %d", c.target)
	}
}
