package index

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/record"
)

// fuzzMaxBytes keeps the preallocation of writable opens small.
const fuzzMaxBytes = 512

// seedFixtures adds every fixture file with the given suffix, with its
// segment's base offset and log size. Without the fixtures the target still
// runs on its generated seeds.
func seedFixtures(f *testing.F, suffix string, add func(data []byte, base, logSize int64)) {
	probe := &seedTB{TB: f}
	fixtures.Dir(probe)
	if probe.missing {
		return
	}
	for _, p := range fixtures.Files(f, suffix) {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		base, size, _ := scanLog(f, p)
		add(data, int64(base), int64(size))
	}
}

// seedTB records a skip instead of skipping the whole fuzz target.
type seedTB struct {
	testing.TB
	missing bool
}

func (s *seedTB) Skipf(string, ...any) { s.missing = true }

// fuzzTargets are lookup targets for a fuzzed index.
func fuzzTargets(base, target int64) []int64 {
	return []int64{math.MinInt64, -1, 0, base - 1, base, base + 1, target, base + target, base + math.MaxUint32, math.MaxInt64}
}

func FuzzOpenOffsetIndex(f *testing.F) {
	seedFixtures(f, ".index", func(data []byte, base, logSize int64) { f.Add(data, base, logSize, base+10) })
	for _, tc := range offsetCheckCases() {
		f.Add(tc.data, int64(100), int64(tc.logSize), int64(105))
	}
	var many []oe
	for i := range 3000 {
		many = append(many, oe{uint32(3 * (i + 1)), uint32(4096 * (i + 1))})
	}
	f.Add(offsetBytes(many...), int64(0), int64(-1), int64(4000))
	f.Add(offsetBytes(many...), int64(1<<40), int64(4096*3000), int64(1<<40+8000))

	f.Fuzz(func(t *testing.T, data []byte, base, logSize, target int64) {
		base = max(base, 0)
		p := filepath.Join(t.TempDir(), "00000000000000000000.index")
		require.NoError(t, os.WriteFile(p, data, 0o644))

		x, err := OpenOffsetIndex(p, record.Offset(base), Options{LogSize: record.Position(logSize)})
		require.NoError(t, err)
		checkErr := x.Check()
		if checkErr != nil {
			require.ErrorIs(t, checkErr, ErrCorrupt)
		}
		n, err := x.Entries()
		require.Equal(t, checkErr, err)
		for _, tg := range fuzzTargets(base, target) {
			off, pos, err := x.Lookup(record.Offset(tg))
			if checkErr != nil {
				require.ErrorIs(t, err, ErrCorrupt)
				continue
			}
			require.NoError(t, err)
			// Against a linear scan of the entries.
			wantOff, wantPos := record.Offset(base), record.Position(0)
			for i := range n {
				o, p, err := x.Entry(i)
				require.NoError(t, err)
				if o <= record.Offset(tg) {
					wantOff, wantPos = o, p
				}
			}
			require.Equal(t, wantOff, off, "target %d", tg)
			require.Equal(t, wantPos, pos, "target %d", tg)
		}
		require.NoError(t, x.Close())

		// Writable: same verdict, and whatever the index writes validates.
		w, err := OpenOffsetIndex(p, record.Offset(base), Options{LogSize: record.Position(logSize), MaxBytes: fuzzMaxBytes, Writable: true})
		if checkErr != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.NoError(t, err)
		lastOff, lastPos, err := w.LastEntry()
		require.NoError(t, err)
		if err := w.Append(lastOff+1, lastPos+1); err != nil {
			require.True(t, errors.Is(err, ErrFull) || errors.Is(err, ErrOffsetOverflow) || errors.Is(err, ErrInvalidPosition), "%v", err)
		}
		require.NoError(t, w.TruncateTo(record.Offset(target)))
		require.NoError(t, w.Check())
		require.NoError(t, w.Seal())
		require.NoError(t, w.Close())
		r, err := OpenOffsetIndex(p, record.Offset(base), Options{LogSize: -1})
		require.NoError(t, err)
		require.NoError(t, r.Check())
		require.NoError(t, r.Close())
	})
}

func FuzzOpenTimeIndex(f *testing.F) {
	seedFixtures(f, ".timeindex", func(data []byte, base, _ int64) { f.Add(data, base, int64(1728561000000)) })
	for _, tc := range timeCheckCases() {
		f.Add(tc.data, int64(100), int64(1600000000600))
	}
	var many []te
	for i := range 2000 {
		many = append(many, te{1600000000000 + int64(7*i), uint32(i / 2)})
	}
	f.Add(timeBytes(many...), int64(0), int64(1600000001000))
	f.Add(timeBytes(many...), int64(1<<40), int64(-1))

	f.Fuzz(func(t *testing.T, data []byte, base, target int64) {
		base = max(base, 0)
		p := filepath.Join(t.TempDir(), "00000000000000000000.timeindex")
		require.NoError(t, os.WriteFile(p, data, 0o644))

		x, err := OpenTimeIndex(p, record.Offset(base), Options{})
		require.NoError(t, err)
		checkErr := x.Check()
		if checkErr != nil {
			require.ErrorIs(t, checkErr, ErrCorrupt)
		}
		n, err := x.Entries()
		require.Equal(t, checkErr, err)
		for _, tg := range fuzzTargets(base, target) {
			ts, off, err := x.Lookup(tg)
			if checkErr != nil {
				require.ErrorIs(t, err, ErrCorrupt)
				continue
			}
			require.NoError(t, err)
			wantTs, wantOff := int64(-1), record.Offset(base)
			for i := range n {
				et, eo, err := x.Entry(i)
				require.NoError(t, err)
				if et <= tg {
					wantTs, wantOff = et, eo
				}
			}
			require.Equal(t, wantTs, ts, "target %d", tg)
			require.Equal(t, wantOff, off, "target %d", tg)
		}
		require.NoError(t, x.Close())

		w, err := OpenTimeIndex(p, record.Offset(base), Options{MaxBytes: fuzzMaxBytes, Writable: true})
		if checkErr != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.NoError(t, err)
		lastTs, lastOff, err := w.LastEntry()
		require.NoError(t, err)
		if err := w.MaybeAppend(lastTs+1, lastOff+1, false); err != nil {
			require.True(t, errors.Is(err, ErrFull) || errors.Is(err, ErrOffsetOverflow) || errors.Is(err, ErrInvalidTimestamp), "%v", err)
		}
		if err := w.MaybeAppend(target, lastOff+2, true); err != nil {
			require.True(t, errors.Is(err, ErrFull) || errors.Is(err, ErrOffsetOverflow) || errors.Is(err, ErrInvalidTimestamp), "%v", err)
		}
		require.NoError(t, w.TruncateTo(record.Offset(target)))
		require.NoError(t, w.Check())
		require.NoError(t, w.Seal())
		require.NoError(t, w.Close())
		r, err := OpenTimeIndex(p, record.Offset(base), Options{})
		require.NoError(t, err)
		require.NoError(t, r.Check())
		require.NoError(t, r.Close())
	})
}
