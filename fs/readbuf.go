package fs

import (
	"math/bits"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The buffer go-fuse hands Read comes from a pool of its own for each
// request size in pages, and a size it has none of is a new allocation,
// whose pages the kernel faults in one by one as the reply is rendered
// into it. Sequential reads ask 1 MiB at a time and keep reusing one, but
// the kernel's read-ahead asks whatever lies between pages it already
// holds: after a few hundred random 4 KiB reads of a file, a read of the
// whole of it comes as requests of a few hundred sizes, and the mount
// faulted in 70 MiB of fresh pages for 128 MiB served (perf stat), which
// took more CPU than rendering it. So record files are rendered into
// buffers of their own, recycled by size class (powers of two), and the
// reply takes them as they are.
const (
	minReadBuf     = 4 << 10
	readBufClasses = 12 // up to 8 MiB; larger ones are not recycled
)

var readBufs [readBufClasses]sync.Pool

// readBufClass returns the size class of a buffer of n bytes: the least c
// with minReadBuf<<c >= n.
func readBufClass(n int) int {
	if n <= minReadBuf {
		return 0
	}
	return bits.Len(uint((n - 1) / minReadBuf))
}

// getReadBuf returns a buffer of n bytes, from the pool where it can.
func getReadBuf(n int) []byte {
	c := readBufClass(n)
	if c >= readBufClasses {
		return make([]byte, n)
	}
	if b, ok := readBufs[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, minReadBuf<<c)
}

// putReadBuf gives b, from getReadBuf, back to the pool.
func putReadBuf(b []byte) {
	c := readBufClass(cap(b))
	if c >= readBufClasses || cap(b) != minReadBuf<<c {
		return
	}
	b = b[:cap(b)]
	readBufs[c].Put(&b)
}

// pooledRead is a reply rendered into a buffer from getReadBuf, which Done
// gives back. go-fuse calls Done right after Bytes, before the reply is
// written, for a result without a Slices method (when splice is off, as
// here); for one with it (its unexported withSlice) it writes the slices
// with writev and calls Done after that, on every path. Hence Slices:
// without it the buffer could go to another request while its reply is
// still being written. TestReadAhead models that order; recheck it when
// go.mod moves go-fuse.
type pooledRead struct {
	buf []byte
	n   int
}

func (r *pooledRead) Slices() ([][]byte, fuse.Status)    { return [][]byte{r.buf[:r.n]}, fuse.OK }
func (r *pooledRead) Bytes([]byte) ([]byte, fuse.Status) { return r.buf[:r.n], fuse.OK }
func (r *pooledRead) Size() int                          { return r.n }
func (r *pooledRead) Done()                              { putReadBuf(r.buf) }
