package storage

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// AppendValues must write what Append writes for the same values, byte for
// byte: the same batches, split at the same records by max.message.bytes,
// rolled at the same places by segment.bytes, with null and empty values
// kept apart; and refuse what Append refuses, appending nothing.
func TestAppendValuesWritesWhatAppendWrites(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	l := openLog(t, dir, Options{Now: clk.Now})
	cfg := small("segment.bytes=20000", "max.message.bytes=3000", "index.interval.bytes=500")
	byRecords, err := l.CreateTopic("records", 1, cfg)
	require.NoError(t, err)
	byValues, err := l.CreateTopic("values", 1, cfg)
	require.NoError(t, err)
	pr, err := byRecords.Partition(0)
	require.NoError(t, err)
	pv, err := byValues.Partition(0)
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(26, 26))
	var model [][]byte // every value appended, by offset
	for step := 0; step < 200; step++ {
		n := 1 + rng.IntN(60)
		vals := make([][]byte, n)
		recs := make([]Record, n)
		for i := range vals {
			switch rng.IntN(10) {
			case 0: // null
			case 1:
				vals[i] = []byte{}
			default:
				vals[i] = bytes.Repeat([]byte{byte('a' + step%26)}, rng.IntN(400))
			}
			recs[i] = Record{Value: vals[i]}
		}
		if step%17 == 16 {
			// One value too big for a batch of its own: both refuse the
			// whole call, with the same error, and append nothing.
			big := rng.IntN(n)
			vals[big] = make([]byte, 3000)
			recs[big].Value = vals[big]
			endR, endV := pr.EndOffset(), pv.EndOffset()
			_, errR := pr.Append(recs)
			_, errV := pv.AppendValues(vals)
			require.ErrorIs(t, errR, ErrRecordTooLarge)
			require.ErrorIs(t, errV, ErrRecordTooLarge)
			require.Equal(t, errR.Error(), errV.Error())
			require.Equal(t, endR, pr.EndOffset())
			require.Equal(t, endV, pv.EndOffset())
			continue
		}
		model = append(model, vals...)
		offR, err := pr.Append(recs)
		require.NoError(t, err)
		offV, err := pv.AppendValues(vals)
		require.NoError(t, err)
		require.Equal(t, offR, offV, "step %d", step)
		clk.Advance(37) // timestamps move between appends, as they do
	}
	require.NoError(t, l.Sync())

	logs := func(p *Partition) map[string][]byte {
		files, err := filepath.Glob(filepath.Join(p.Dir(), "*.log"))
		require.NoError(t, err)
		out := map[string][]byte{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			out[filepath.Base(f)] = b
		}
		return out
	}
	got, want := logs(pv), logs(pr)
	require.Greater(t, len(want), 3, "the appends should have rolled several segments")
	require.Equal(t, len(want), len(got))
	for name, w := range want {
		require.True(t, bytes.Equal(w, got[name]), "%s differs", name)
	}
	// And they read back as written: nulls as nulls.
	r, err := pv.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	for i, want := range model {
		got, err := r.Next()
		require.NoError(t, err, "offset %d", i)
		require.Equal(t, record.Offset(i), got.Offset)
		require.Equal(t, want == nil, got.Value == nil, "offset %d: null", i)
		require.Equal(t, string(want), string(got.Value), "offset %d", i)
	}
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)
}

// An empty AppendValues appends nothing and answers the log end, as Append.
func TestAppendValuesNone(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	_, err = p.AppendValues([][]byte{[]byte("a"), []byte("b")})
	require.NoError(t, err)
	off, err := p.AppendValues(nil)
	require.NoError(t, err)
	require.Equal(t, record.Offset(2), off)
	require.Equal(t, []string{"0:a", "1:b"}, readAll(t, p, 0))
}

// A batch is filled up to max.message.bytes, not to a guess of it: every
// batch of an append but its last holds so much that the next record would
// not have fitted, with that record's framing at its largest. (Adding the
// largest framing of every record to the batch's size, as Append did until
// stop 29, closed batches of 100-byte values an eighth early.) None is
// over the limit.
func TestAppendFillsBatchesToTheLimit(t *testing.T) {
	for _, limit := range []int{600, 3000, 20000} {
		l := openLog(t, t.TempDir(), Options{})
		top, err := l.CreateTopic("t", 1, small(fmt.Sprintf("max.message.bytes=%d", limit)))
		require.NoError(t, err)
		p, err := top.Partition(0)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(29, uint64(limit)))
		vals := make([][]byte, 3*limit/100)
		biggest := 0
		for i := range vals {
			vals[i] = bytes.Repeat([]byte{'v'}, 80+rng.IntN(40))
			biggest = max(biggest, len(vals[i]))
		}
		_, err = p.AppendValues(vals)
		require.NoError(t, err)
		bs := batchesOf(t, p.active(), false)
		require.Greater(t, len(bs), 2, "limit %d", limit)
		for i, b := range bs {
			require.LessOrEqual(t, b.Size(), int64(limit), "limit %d, batch %d", limit, i)
			if i < len(bs)-1 {
				require.Greater(t, b.Size()+int64(biggest+maxFraming+varintSlack), int64(limit), "limit %d, batch %d of %d closed early", limit, i, len(bs))
			}
		}
		require.Len(t, readAll(t, p, 0), len(vals))
	}
}
