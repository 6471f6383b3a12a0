package index

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// TestGrowingLogAdv35: a reader sees the first 250 bytes of a log, up to
// offset 3, and a writer in another process has appended since and
// written the index entries of its batches (Options.Growing). The entries
// for what the reader sees are used, those for the rest left out, but only
// if the log really is longer now and every position is inside it: else
// the file breaks the position rule as it always did.
func TestGrowingLogAdv35(t *testing.T) {
	const logSize, logEnd = 250, 3
	offData := offsetBytes(oe{1, 100}, oe{2, 200}, oe{3, 300}, oe{4, 400})
	timeData := timeBytes(te{10, 1}, te{20, 2}, te{30, 3}, te{40, 4})
	for name, c := range map[string]struct {
		growing  bool
		now      record.Position
		offRule  string // the rule the offset index breaks, or ""
		offSeen  int    // its entries, when it breaks none
		timeSeen int    // the time index's entries
	}{
		"grown past every entry":      {growing: true, now: 500, offSeen: 2, timeSeen: 2},
		"not grown":                   {growing: true, now: logSize, offRule: rulePosLog, timeSeen: 4},
		"grown, not past the entries": {growing: true, now: 350, offRule: rulePosLog, timeSeen: 2},
		"shorter now":                 {growing: true, now: 100, offRule: rulePosLog, timeSeen: 4},
		"no writer":                   {offRule: rulePosLog, timeSeen: 4},
	} {
		t.Run(name, func(t *testing.T) {
			opts := Options{LogSize: logSize}
			if c.growing {
				opts.Growing, opts.LogEnd = func() (record.Position, error) { return c.now, nil }, logEnd
			}
			for _, peek := range []bool{true, false} { // the last entry read before the file is mapped, or after
				op := writeFile(t, "00000000000000000000.index", offData)
				x, err := OpenOffsetIndex(op, 0, opts)
				require.NoError(t, err)
				if !peek {
					_, err := x.Entries()
					requireRule(t, err, c.offRule, op)
				}
				off, pos, err := x.LastEntry()
				switch {
				case c.offRule != "":
					if c.growing || !peek { // without Growing, a last entry read unmapped is not judged by LogSize
						requireRule(t, err, c.offRule, op)
					}
					_, err = x.Entries()
					requireRule(t, err, c.offRule, op)
				default:
					require.NoError(t, err)
					require.Equal(t, record.Offset(c.offSeen), off)
					require.Equal(t, record.Position(100*c.offSeen), pos)
					n, err := x.Entries()
					require.NoError(t, err)
					require.Equal(t, c.offSeen, n)
					_, pos, err = x.Lookup(10)
					require.NoError(t, err)
					require.Equal(t, record.Position(100*c.offSeen), pos, "a lookup past what the reader sees")
					require.NoError(t, x.Check())
				}
				require.NoError(t, x.Close())

				tp := writeFile(t, "00000000000000000000.timeindex", timeData)
				y, err := OpenTimeIndex(tp, 0, opts)
				require.NoError(t, err)
				if !peek {
					_, err := y.Entries()
					require.NoError(t, err)
				}
				ts, off, err := y.LastEntry()
				require.NoError(t, err)
				require.Equal(t, int64(10*c.timeSeen), ts)
				require.Equal(t, record.Offset(c.timeSeen), off)
				n, err := y.Entries()
				require.NoError(t, err)
				require.Equal(t, c.timeSeen, n)
				require.NoError(t, y.Check())
				require.NoError(t, y.Close())
			}
		})
	}
}

// TestSeenAdv35 is Seen over decoded entries, as storage's Check uses it.
func TestSeenAdv35(t *testing.T) {
	off, err := DecodeOffsetEntries("x.index", offsetBytes(oe{1, 100}, oe{2, 200}, oe{3, 300}), 10, 500)
	require.NoError(t, err)
	tim, err := DecodeTimeEntries("x.timeindex", timeBytes(te{10, 1}, te{20, 2}, te{30, 3}), 10, off)
	require.NoError(t, err)
	seenOff, seenTim := Seen(off, tim, 250, 13)
	require.Equal(t, off[:2], seenOff)
	require.Equal(t, tim[:2], seenTim)
	seenOff, seenTim = Seen(off, tim, 500, 20)
	require.Equal(t, off, seenOff)
	require.Equal(t, tim, seenTim)
}

// TestGrowingLogMidWriteAdv35 maps the index of a growing log while its
// writer is part way through writing a page of entries: the file ends
// inside an entry, or holds an entry half written (its position still
// zero). Neither is corruption: the part entry is left out as the
// writer's, and a half-written one is judged again once the writer is
// done. An entry that stays wrong is still corrupt.
func TestGrowingLogMidWriteAdv35(t *testing.T) {
	whole := offsetBytes(oe{1, 100}, oe{2, 200}, oe{3, 300})
	grown := func() (record.Position, error) { return 1000, nil }

	t.Run("ends inside an entry", func(t *testing.T) {
		p := writeFile(t, "00000000000000000000.index", append(whole, 0, 0, 0, 4, 0))
		x, err := OpenOffsetIndex(p, 0, Options{LogSize: 1000, Growing: grown, LogEnd: 4})
		require.NoError(t, err)
		defer x.Close()
		n, err := x.Entries()
		require.NoError(t, err)
		require.Equal(t, 3, n)
		off, pos, err := x.LastEntry()
		require.NoError(t, err)
		require.Equal(t, record.Offset(3), off)
		require.Equal(t, record.Position(300), pos)
	})

	for _, done := range []bool{true, false} {
		name := map[bool]string{true: "an entry half written, then whole", false: "an entry that stays half written"}[done]
		t.Run(name, func(t *testing.T) {
			torn := append(offsetBytes(oe{1, 100}, oe{2, 0}), offsetBytes(oe{3, 300})...) // position 0 breaks a rule
			p := writeFile(t, "00000000000000000000.index", torn)
			calls := 0
			growing := func() (record.Position, error) {
				calls++
				if calls == 2 && done { // the writer finishes between the two looks
					f, err := os.OpenFile(p, os.O_WRONLY, 0)
					require.NoError(t, err)
					_, err = f.WriteAt(whole, 0)
					require.NoError(t, err)
					require.NoError(t, f.Close())
				}
				return 1000, nil
			}
			x, err := OpenOffsetIndex(p, 0, Options{LogSize: 1000, Growing: growing, LogEnd: 4})
			require.NoError(t, err)
			defer x.Close()
			n, err := x.Entries()
			require.Equal(t, 2, calls, "judged twice")
			if !done {
				requireRule(t, err, rulePosZero, p)
				return
			}
			require.NoError(t, err)
			require.Equal(t, 3, n)
		})
	}
}
