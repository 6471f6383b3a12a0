package fs

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/storage"
)

// Replies rendered into pooled buffers (direct I/O, read ahead or not),
// of many sizes that share size classes, at positions sequential and not,
// over big batches: each reply is written only after several later reads
// took buffers, and still holds its own bytes.
func TestReadBufAdvPooledRepliesLate(t *testing.T) {
	p, _ := newTestPartition(t, nil)
	rng := rand.New(rand.NewSource(1))
	var want []byte
	for i := 0; i < 12; i++ {
		recs := make([]storage.Record, 100+rng.Intn(400))
		for j := range recs {
			v := fmt.Sprintf("%d/%d %s", i, j, bytes.Repeat([]byte{byte('a' + (i+j)%26)}, rng.Intn(700)))
			recs[j] = storage.Record{Value: []byte(v)}
			want = append(want, v...)
			want = append(want, '\n')
		}
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	v, err := p.NewView(storage.Values, 0)
	require.NoError(t, err)
	h := &recordHandle{directIO: true, direct: v}
	h.ahead.open = func() (*storage.View, error) { return p.NewView(storage.Values, 0) }
	defer h.Release(context.Background())

	type late struct {
		write   func() []byte
		off, n  int64
		request int
	}
	var pending []late
	flush := func(keep int) {
		for len(pending) > keep {
			l := pending[0]
			pending = pending[1:]
			got := l.write()
			end := min(l.off+int64(l.request), int64(len(want)))
			require.Equal(t, string(want[l.off:end]), string(got), "reply to a read of %d at %d", l.request, l.off)
		}
	}
	off := int64(0)
	for k := 0; k < 3000; k++ {
		size := []int{4096, 5000, 8192, 3000, 128 << 10, 100000}[rng.Intn(6)]
		if rng.Intn(5) == 0 || off >= int64(len(want)) {
			off = rng.Int63n(int64(len(want)))
		}
		res, errno := h.Read(context.Background(), make([]byte, size), off)
		require.Zero(t, errno)
		pending = append(pending, late{write: reply(t, res, size), off: off, request: size})
		off += int64(res.Size())
		flush(3)
	}
	flush(0)
}
