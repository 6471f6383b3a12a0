package fs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// A sequential reader of a record file (cat, grep, tail -f catching up)
// waits, for each request, for the server to render it and then for the
// reply to be written, in which the kernel copies it to the reader. The two
// are serial for one request but need not be across requests: while the
// reply of one is written, the next can be rendered on the other CPU.
// aheadRead is that next request, rendered in the background once a handle
// has read twice in a row from where it left off, into a buffer that the
// reply then uses as it is (no copy), and that comes back to the pool when
// go-fuse has written it (ReadResult.Done).
//
// Only a full chunk is ever used: a record file's bytes never change once
// there, so a full chunk is still right when the request comes, whereas a
// short one stopped at an end that appends may have moved since. Anything
// else (a short chunk, an error, a read somewhere else) drops it, and the
// request is rendered in the foreground as if nothing had been read ahead.
type aheadRead struct {
	off  int64
	buf  []byte
	n    int
	err  error
	done chan struct{}
}

// aheadBufs recycles read-ahead buffers, which are a request's size (1 MiB
// by default).
var aheadBufs sync.Pool

func getAheadBuf(n int) []byte {
	if b, ok := aheadBufs.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

func putAheadBuf(b []byte) { aheadBufs.Put(&b) }

// readAhead starts rendering n bytes at off in the background.
func readAhead(v interface {
	ReadAt([]byte, int64) (int, error)
}, off int64, n int) *aheadRead {
	a := &aheadRead{off: off, buf: getAheadBuf(n), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.n, a.err = v.ReadAt(a.buf, off)
	}()
	return a
}

// take waits for a and reports whether it holds the full n bytes at off.
// If not, its buffer goes back to the pool.
func (a *aheadRead) take(off int64, n int) bool {
	<-a.done
	if a.off == off && a.n == n && a.err == nil {
		return true
	}
	putAheadBuf(a.buf)
	return false
}

// Read results that hand an aheadRead's buffer to go-fuse.
func (a *aheadRead) Bytes([]byte) ([]byte, fuse.Status) { return a.buf[:a.n], fuse.OK }
func (a *aheadRead) Size() int                          { return a.n }
func (a *aheadRead) Done()                              { putAheadBuf(a.buf) }
