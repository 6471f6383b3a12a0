package bench

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSubjects: both subjects give back what was appended, by offset, by
// time (logfs only) and in order, also after a reopen.
func TestSubjects(t *testing.T) {
	const size, batch, n = 100, 7, 50
	p := newPayload(size, 1)
	for _, subj := range []string{SubjectLogfs, SubjectRaw} {
		t.Run(subj, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), subj)
			l, err := openSubject(subj, dir, 4<<10) // logfs: a few segments
			require.NoError(t, err)
			bv := newBatchValues(size, batch)
			for off := int64(0); off < n; off += batch {
				vals, recs := bv.prepare(p, off, int(min(batch, n-off)))
				require.NoError(t, l.append(vals, recs))
			}
			require.NoError(t, l.sync())
			for pass := range 2 {
				for _, off := range []int64{0, 1, batch, n / 2, n - 1, 3} {
					v, err := l.lookup(off)
					require.NoError(t, err)
					require.NoError(t, p.check(v, off), "pass %d", pass)
					got, err := l.lookupTime(timestampOf(off) - 1)
					if subj == SubjectRaw {
						require.ErrorIs(t, err, errNoTimeLookup)
					} else {
						require.NoError(t, err)
						require.Equal(t, off, got, "the first record at or after a time between two")
					}
				}
				var next int64
				got, err := l.readAll(func(v []byte) {
					require.True(t, p.quick(v, next))
					next++
				})
				require.NoError(t, err)
				require.EqualValues(t, n, got)
				require.EqualValues(t, n, next)

				require.NoError(t, l.close())
				l, err = openSubject(subj, dir, 4<<10) // the read phases reopen
				require.NoError(t, err)
			}
			require.NoError(t, l.close())
		})
	}
}
