package index

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// randomSizes are index sizes around the warm-section boundaries, where
// the search changes branches, plus random ones.
func randomSizes(r *rand.Rand, warm int) []int {
	sizes := []int{0, 1, 2, 3, warm - 1, warm, warm + 1, warm + 2, warm + 3, 2 * warm, 2*warm + 1}
	for range 20 {
		sizes = append(sizes, r.IntN(4*warm))
	}
	return sizes
}

// targets returns lookup targets for sorted keys: keys and their
// neighbours (the first and last ones, and a random sample), values below
// the first and above the last, and random ones.
func targets(r *rand.Rand, keys []int64, lo, hi int64) []int64 {
	ts := []int64{lo, hi, math.MinInt64, math.MaxInt64}
	for i, k := range keys {
		if i < 3 || i >= len(keys)-3 || r.IntN(len(keys)) < 200 {
			ts = append(ts, k-1, k, k+1)
		}
	}
	if len(keys) > 0 {
		first, last := keys[0], keys[len(keys)-1]
		for range 200 {
			ts = append(ts, first-1-r.Int64N(1000), last+1+r.Int64N(1000), first+r.Int64N(last-first+1))
		}
	}
	return ts
}

// bruteForce returns the index of the last key <= t, or -1.
func bruteForce(keys []int64, t int64) int {
	i := -1
	for j, k := range keys {
		if k <= t {
			i = j
		}
	}
	return i
}

func TestOffsetLookupMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range randomSizes(r, offsetWarmEntries) {
		base := record.Offset(r.Int64N(1 << 40))
		x := newOffsetIndex(t, base, int64(n*OffsetEntrySize))
		keys := make([]int64, n)
		poss := make([]record.Position, n)
		key, pos := int64(base), record.Position(0)
		for i := range n {
			key += 1 + r.Int64N(int64(1+r.IntN(1000)))
			pos += 1 + record.Position(r.IntN(20000))
			keys[i], poss[i] = key, pos
			require.NoError(t, x.Append(record.Offset(key), pos))
		}
		require.Equal(t, n > 0, x.IsFull(), "MaxBytes 0 is the default size")
		for _, sealed := range []bool{false, true} {
			if sealed {
				require.NoError(t, x.Seal())
			}
			for _, tg := range targets(r, keys, int64(base)-1, int64(base)) {
				off, p, err := x.Lookup(record.Offset(tg))
				require.NoError(t, err)
				i := bruteForce(keys, tg)
				if i < 0 || tg < int64(base) {
					require.Equal(t, base, off, "n=%d target=%d", n, tg)
					require.Equal(t, record.Position(0), p)
					continue
				}
				require.Equal(t, record.Offset(keys[i]), off, "n=%d target=%d", n, tg)
				require.Equal(t, poss[i], p, "n=%d target=%d", n, tg)
			}
		}
	}
}

func TestTimeLookupMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range randomSizes(r, timeWarmEntries) {
		base := record.Offset(r.Int64N(1 << 40))
		// n+1 slots: the last is reserved.
		x := newTimeIndex(t, base, int64((n+1)*TimeEntrySize))
		keys := make([]int64, n)
		offs := make([]record.Offset, n)
		ts, off := r.Int64N(1<<41), base
		for i := range n {
			ts += 1 + r.Int64N(int64(1+r.IntN(100000)))
			off += record.Offset(r.IntN(3))
			keys[i], offs[i] = ts, off
			require.NoError(t, x.MaybeAppend(ts, off, false))
		}
		require.True(t, x.IsFull())
		for _, sealed := range []bool{false, true} {
			if sealed {
				require.NoError(t, x.Seal())
			}
			for _, tg := range targets(r, keys, -1, 0) {
				gotTs, gotOff, err := x.Lookup(tg)
				require.NoError(t, err)
				i := bruteForce(keys, tg)
				if i < 0 {
					require.Equal(t, int64(-1), gotTs, "n=%d target=%d", n, tg)
					require.Equal(t, base, gotOff)
					continue
				}
				require.Equal(t, keys[i], gotTs, "n=%d target=%d", n, tg)
				require.Equal(t, offs[i], gotOff, "n=%d target=%d", n, tg)
			}
		}
	}
}

// TestWarmSectionBranches pins which part of the index each lookup
// searches, with Kafka's firstHot = max(0, entries-1-N).
func TestWarmSectionBranches(t *testing.T) {
	const n = 3000
	data := make([]byte, 0, n*OffsetEntrySize)
	for i := 1; i <= n; i++ {
		data = append(data, offsetBytes(oe{uint32(10 * i), uint32(i)})...)
	}
	hot := n - 1 - offsetWarmEntries // slot 1975, key 19760
	for name, tc := range map[string]struct {
		target uint32
		want   int
	}{
		"below the first":          {9, -1},
		"the first":                {10, 0},
		"cold section":             {15000, 1499},
		"first hot entry itself":   {19760, hot},
		"just above the first hot": {19761, hot},
		"inside the warm section":  {25005, 2499},
		"the last":                 {30000, n - 1},
		"above the last":           {math.MaxUint32, n - 1},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, offsetSlot(data, n, tc.target))
		})
	}
}
