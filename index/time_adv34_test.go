package index

import (
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// TestTimeLookupOracleAdv34 checks TimeIndex.Lookup against a brute force
// reading of Kafka's rule (the entry with the largest timestamp <= ts, or
// (-1, base)) on indexes large enough to have a cold section ahead of the
// 682 warm entries, as written by appends and as a file opened read-only,
// for every timestamp in them, +-1, and beyond both ends.
func TestTimeLookupOracleAdv34(t *testing.T) {
	rng := rand.New(rand.NewSource(34))
	for _, n := range []int{0, 1, 2, 681, 682, 683, 684, 1500, 5000} {
		dir := t.TempDir()
		base := record.Offset(1000)
		path := filepath.Join(dir, "00000000000000001000.timeindex")
		x, err := CreateTimeIndex(path, base, Options{MaxBytes: int64(12 * (n + 2))})
		require.NoError(t, err)
		type entry struct {
			ts  int64
			off record.Offset
		}
		var es []entry
		ts, off := int64(rng.Intn(3)), base
		for i := 0; i < n; i++ {
			ts += 1 + int64(rng.Intn(1000))
			off += record.Offset(rng.Intn(5))
			require.NoError(t, x.MaybeAppend(ts, off, false))
			es = append(es, entry{ts, off})
		}
		want := func(q int64) (int64, record.Offset) {
			found, at := int64(-1), base
			for _, e := range es {
				if e.ts <= q {
					found, at = e.ts, e.off
				}
			}
			return found, at
		}
		probes := []int64{-1 << 63, -1, 0, 1<<63 - 1}
		for _, e := range es {
			probes = append(probes, e.ts-1, e.ts, e.ts+1)
		}
		check := func(x *TimeIndex, what string) {
			for _, q := range probes {
				gotTS, gotOff, err := x.Lookup(q)
				require.NoError(t, err)
				wantTS, wantOff := want(q)
				require.Equal(t, wantTS, gotTS, "%s n=%d Lookup(%d) timestamp", what, n, q)
				require.Equal(t, wantOff, gotOff, "%s n=%d Lookup(%d) offset", what, n, q)
			}
		}
		check(x, "active")
		require.NoError(t, x.Seal())
		require.NoError(t, x.Close())
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Len(t, b, 12*n, "trimmed")
		if n > 0 {
			require.Equal(t, uint64(es[n-1].ts), binary.BigEndian.Uint64(b[12*(n-1):]))
		}
		y, err := OpenTimeIndex(path, base, Options{})
		require.NoError(t, err)
		check(y, "reopened")
		require.NoError(t, y.Close())
	}
}
