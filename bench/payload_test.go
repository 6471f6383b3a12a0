package bench

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPayload(t *testing.T) {
	for _, size := range []int{MinSize, 100, 1024} {
		p := newPayload(size, 1)
		v := make([]byte, size)
		for _, off := range []int64{0, 1, 7, 1 << 20, 1<<40 + 3} {
			p.fill(v, off)
			require.NoError(t, p.check(v, off), "size %d offset %d", size, off)
			require.True(t, p.quick(v, off))
			require.Error(t, p.check(v, off+1), "the value of another offset")
			require.False(t, p.quick(v, off+1))
			require.NotContains(t, string(v), "\n", "values are lines of the Values rendering")
			require.Equal(t, append(bytes.Clone(v), '\n'), p.appendLine(nil, off))

			w := bytes.Clone(v)
			w[size-1] ^= 1
			require.Error(t, p.check(w, off))
			require.False(t, p.quick(w, off), "quick sees the last bytes")
			require.Error(t, p.check(v[:size-1], off))
			require.False(t, p.quick(v[:size-1], off))
		}
		require.NotEqual(t, newPayload(size, 2).appendLine(nil, 5), p.appendLine(nil, 5), "the seed changes the values")
	}
}

func TestBatchValues(t *testing.T) {
	p := newPayload(100, 1)
	b := newBatchValues(100, 8)
	vals, recs := b.prepare(p, 16, 5)
	require.Len(t, vals, 5)
	require.Len(t, recs, 5)
	for i := range vals {
		off := int64(16 + i)
		require.NoError(t, p.check(vals[i], off))
		require.Equal(t, vals[i], recs[i].Value)
		require.Equal(t, timestampOf(off), recs[i].Timestamp)
	}
}

// rendering is the Values rendering of [from, to).
func rendering(p *payload, from, to int64) []byte {
	var b []byte
	for off := from; off < to; off++ {
		b = p.appendLine(b, off)
	}
	return b
}

// writeChunks writes b to w in pieces of n bytes, as a pipe would.
func writeChunks(w interface{ Write([]byte) (int, error) }, b []byte, n int) {
	for len(b) > 0 {
		k := min(n, len(b))
		_, _ = w.Write(b[:k])
		b = b[k:]
	}
}

func TestExpectWriter(t *testing.T) {
	p := newPayload(100, 1)
	const from, to = 3, 2000 // more than one 64 KiB buffer of expectations
	good := rendering(p, from, to)
	cases := map[string]struct {
		out     func() []byte
		wantErr string
	}{
		"same":       {out: func() []byte { return good }},
		"byte 150":   {out: func() []byte { b := bytes.Clone(good); b[150] ^= 1; return b }, wantErr: "byte 150 differs"},
		"short":      {out: func() []byte { return good[:len(good)-1] }, wantErr: "output ends after"},
		"longer":     {out: func() []byte { return append(bytes.Clone(good), 'x') }, wantErr: "1 bytes more than"},
		"other recs": {out: func() []byte { return rendering(p, from+1, to+1) }, wantErr: "byte 15 differs"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, chunk := range []int{1 << 20, 4096, 7} {
				w := newExpectWriter(p, from, to)
				writeChunks(w, tc.out(), chunk)
				if tc.wantErr == "" {
					require.NoError(t, w.done())
				} else {
					require.ErrorContains(t, w.done(), tc.wantErr)
				}
			}
		})
	}
}

func TestRepeatWriter(t *testing.T) {
	p := newPayload(100, 1)
	const n = 50
	one := rendering(p, 0, n)
	cases := map[string]struct {
		copies  int
		wantErr string
	}{
		"all three":    {copies: 3},
		"two of three": {copies: 2, wantErr: "1 of 3 copies missing"},
		"four":         {copies: 4, wantErr: "more than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newRepeatWriter(p, n, 3)
			writeChunks(w, bytes.Repeat(one, tc.copies), 333)
			if tc.wantErr == "" {
				require.NoError(t, w.done())
			} else {
				require.ErrorContains(t, w.done(), tc.wantErr)
			}
		})
	}
}
