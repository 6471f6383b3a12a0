package fs

import (
	"context"
	"fmt"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/storage"
)

// reply does with a read result what go-fuse (v2.12.1, splice off) does
// before writing it, and returns the write, which comes later: a result
// with Slices is written from its slices and then given Done; any other is
// given Done right after Bytes, before the write. A buffer that Done
// recycles must still hold the reply when the write happens.
func reply(t *testing.T, res fuse.ReadResult, n int) (write func() []byte) {
	t.Helper()
	if v, ok := res.(interface {
		Slices() ([][]byte, fuse.Status)
	}); ok {
		return func() []byte {
			slices, st := v.Slices()
			require.True(t, st.Ok())
			var out []byte
			for _, s := range slices {
				out = append(out, s...)
			}
			res.Done()
			return out
		}
	}
	b, st := res.Bytes(make([]byte, n))
	require.True(t, st.Ok())
	res.Done()
	return func() []byte { return append([]byte(nil), b...) }
}

// readHandle reads n bytes at off through h and returns what go-fuse
// writes in reply.
func readHandle(t *testing.T, h *recordHandle, off int64, n int) []byte {
	t.Helper()
	res, errno := h.Read(context.Background(), make([]byte, n), off)
	require.Zero(t, errno)
	return reply(t, res, n)()
}

// A sequential reader gets, from its second read on, requests rendered
// ahead; they hold the same bytes as a read from scratch, a short one at
// the end is not kept over appends, and reads elsewhere are unaffected.
func TestReadAhead(t *testing.T) {
	p, _ := newTestPartition(t, nil)
	var want []byte
	appendN := func(n int) {
		recs := make([]storage.Record, n)
		for i := range recs {
			v := fmt.Sprintf("record %d of a partition read ahead", len(want))
			recs[i] = storage.Record{Value: []byte(v)}
			want = append(want, v...)
			want = append(want, '\n')
		}
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	appendN(1000)
	v, err := p.NewView(storage.Values, 0)
	require.NoError(t, err)
	h := &recordHandle{directIO: true, direct: v}
	views := 0
	h.ahead.open = func() (*storage.View, error) { views++; return p.NewView(storage.Values, 0) }
	defer h.Release(context.Background())

	// Each reply is written after the next read has started, as go-fuse
	// may do: the next read's read-ahead must not take a buffer the reply
	// still holds.
	const chunk = 4096
	var got []byte
	var pending func() []byte
	for off := 0; off+chunk <= len(want); off += chunk {
		res, errno := h.Read(context.Background(), make([]byte, chunk), int64(off))
		require.Zero(t, errno)
		write := reply(t, res, chunk)
		for _, a := range h.ahead.queue {
			<-a.done // a slow write: the read-ahead has rendered meanwhile
		}
		if pending != nil {
			got = append(got, pending()...)
		}
		pending = write
		if off > 0 {
			require.Len(t, h.ahead.queue, aheadDepth, "a second read in a row reads ahead")
		}
	}
	got = append(got, pending()...)
	require.Equal(t, want[:len(got)], got)
	require.Equal(t, aheadDepth, views, "each request read ahead has a view of its own, used again")

	// A read elsewhere drops what was read ahead and gets its own bytes.
	require.Equal(t, want[100:300], readHandle(t, h, 100, 200))
	require.Empty(t, h.ahead.queue)

	// The end: a read ahead of the last bytes comes back short, and is not
	// used once records were appended after it.
	last := int64(len(want)/chunk*chunk - chunk)
	readHandle(t, h, last-chunk, chunk)
	readHandle(t, h, last, chunk)
	require.Len(t, h.ahead.queue, aheadDepth)
	<-h.ahead.queue[0].done
	require.Less(t, h.ahead.queue[0].n, chunk, "short: the file ends there")
	appendN(500)
	require.Equal(t, want[last+chunk:last+2*chunk], readHandle(t, h, last+chunk, chunk), "bytes appended since show")
}

// Release waits for the requests still being read ahead and closes the
// views they used, whatever state the queue is in.
func TestReadAheadRelease(t *testing.T) {
	p, _ := newTestPartition(t, nil)
	recs := make([]storage.Record, 2000)
	for i := range recs {
		recs[i] = storage.Record{Value: []byte(fmt.Sprintf("record %d", i))}
	}
	_, err := p.Append(recs)
	require.NoError(t, err)
	v, err := p.NewView(storage.Values, 0)
	require.NoError(t, err)
	h := &recordHandle{directIO: true, direct: v}
	var opened []*storage.View
	h.ahead.open = func() (*storage.View, error) {
		v, err := p.NewView(storage.Values, 0)
		opened = append(opened, v)
		return v, err
	}
	readHandle(t, h, 0, 1024)
	readHandle(t, h, 1024, 1024)
	require.Len(t, h.ahead.queue, aheadDepth, "reading ahead when released")
	require.Zero(t, h.Release(context.Background()))
	require.Empty(t, h.ahead.queue)
	require.Len(t, opened, aheadDepth)
	for _, v := range append(opened, v) {
		_, err := v.ReadAt(make([]byte, 1), 0)
		require.ErrorIs(t, err, storage.ErrClosed, "every view is closed")
	}
}
