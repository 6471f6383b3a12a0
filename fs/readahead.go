package fs

import (
	"fmt"
	"os"
	"strconv"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/storage"
)

// A sequential reader of a record file (cat, grep, tail -f catching up)
// waits, for each request, for the server to render it and then for the
// reply to be written, in which the kernel copies it to the reader. The
// server's two CPUs need not take turns: once a handle has read twice in a
// row from where it left off, the next aheadDepth requests are rendered in
// the background, each on a view of its own, while the reply to this one is
// written. Each is rendered into a buffer that its reply then uses as it
// is (no copy), and that comes back to the pool when go-fuse has written it
// (ReadResult.Done).
//
// Only a full request is ever used: a record file's bytes never change
// once there, so a full one is still right when the request comes, whereas
// a short one stopped at an end that appends may have moved since.
// Anything else (a short one, an error, a read somewhere else) drops the
// queue, and the request is rendered in the foreground as if nothing had
// been read ahead.
const aheadDepth = 2

// readAheads is a handle's queue of requests rendered ahead. It is used
// under the handle's lock.
type readAheads struct {
	open  func() (*storage.View, error) // another view of the handle's file
	idle  []*storage.View               // views not rendering anything
	queue []*aheadRead                  // in file order
}

// aheadRead is one request rendered ahead: n bytes at off, into buf, on v.
// It is the fuse.ReadResult of the request it was read ahead for, and its
// Done gives buf back, after the reply was written (see pooledRead).
type aheadRead struct {
	pooledRead // buf, and n bytes rendered into it: the reply (see pooledRead)
	v          *storage.View
	off        int64
	err        error
	done       chan struct{}
}

// take returns the request read ahead for the size bytes at off, if the
// queue starts with it, rendered in full. Otherwise it drops the queue and
// returns nil.
func (q *readAheads) take(off int64, size int) *aheadRead {
	if len(q.queue) == 0 {
		return nil
	}
	a := q.queue[0]
	<-a.done
	q.idle = append(q.idle, a.v)
	if a.off == off && a.n == size && a.err == nil {
		q.queue = q.queue[1:]
		return a
	}
	putReadBuf(a.buf)
	q.queue = q.queue[1:]
	q.drop()
	return nil
}

// fill starts rendering requests of size bytes from off on, or from the end
// of the last one queued, until aheadDepth are queued. It stops early,
// quietly, if another view cannot be opened (say, retention deleted the
// start): the reader is then served in the foreground.
func (q *readAheads) fill(off int64, size int) {
	for len(q.queue) < aheadDepth {
		if n := len(q.queue); n > 0 {
			off = q.queue[n-1].off + int64(size)
		}
		if len(q.idle) == 0 {
			v, err := q.open()
			if err != nil {
				return
			}
			q.idle = append(q.idle, v)
		}
		v := q.idle[len(q.idle)-1]
		q.idle = q.idle[:len(q.idle)-1]
		a := &aheadRead{pooledRead: pooledRead{buf: getReadBuf(size)}, v: v, off: off, done: make(chan struct{})}
		go func() {
			defer close(a.done)
			a.n, a.err = v.ReadAt(a.buf, a.off)
		}()
		q.queue = append(q.queue, a)
	}
}

// drop waits for every queued request and discards it.
func (q *readAheads) drop() {
	for _, a := range q.queue {
		<-a.done
		putReadBuf(a.buf)
		q.idle = append(q.idle, a.v)
	}
	q.queue = q.queue[:0]
}

// close drops the queue and closes the views.
func (q *readAheads) close() {
	q.drop()
	for _, v := range q.idle {
		v.Close()
	}
	q.idle = nil
}

// ReadAheadKB is the read-ahead window a mount asks of the kernel, in KiB:
// the read_ahead_kb of the mount's backing device, which is 128 KiB by
// default and which the FUSE INIT reply can only lower. A first read
// through the page cache then arrives as requests of up to MaxWrite, the
// next ones already on their way while the reader copies the last.
//
// At 2 MiB, twice the largest request, the kernel has two requests of a
// reader that reads 1 MiB at a time on their way at once, and the server
// renders them on both CPUs: a first read of 256 MiB of 100 B records
// with 1 MiB read(2)s went from 0.9-1.2 to 1.2-1.6 GB/s (1 KiB records:
// 1.5-2.1 to 2.0-2.5). cat, which asks for sequential read-ahead (twice
// the window), gained nothing from it, nor did anything from 4 MiB, which
// keeps more requests rendering at once and took the mount's RSS 10-15
// MiB higher.
const ReadAheadKB = 2048

// RaiseReadAhead sets the read-ahead window of the file system mounted at
// mountpoint to ReadAheadKB, where this process may (root may; others get
// EACCES from sysfs, and the kernel's 128 KiB stays). It returns what it
// could not do, which costs speed, never correctness.
func RaiseReadAhead(mountpoint string) error {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return err
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(path, []byte(strconv.Itoa(ReadAheadKB)), 0)
}

// FUSEMountOptions returns o with the settings of the read and write path
// that logfs mounts with, so that the benchmarks' floor (package
// internal/floorfs) is mounted the same way.
func FUSEMountOptions(o fuse.MountOptions) fuse.MountOptions {
	o.MaxWrite = DefaultMaxWrite
	// Reads are answered from rendered bytes in memory, never from a
	// file descriptor; without this go-fuse would still prepare a pipe
	// for every reply before falling back to writev.
	o.DisableSplice = true
	// The kernel must not drop a file's cached pages when its size or
	// mtime changes (a record file only grows); the server drops the one
	// page that can go stale (cache.go).
	o.ExplicitDataCacheControl = true
	return o
}
