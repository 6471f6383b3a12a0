package fs

import (
	"strconv"
	"sync"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// partState is what the nodes of one partition share: the partition, the
// record nodes the kernel holds, and the notifier that tells the kernel
// when the partition's files grew.
//
// The notifier is a goroutine that sleeps on Partition.Changed and, after
// every change (an append through the mount or any other, a roll, a
// retention deletion), invalidates the cached attributes of the
// partition's files whose attributes the kernel got since they were last
// invalidated, so that st_size and mtime are fresh on the next stat: that
// is what tail -f polls. It runs outside every FUSE operation, as go-fuse
// requires of Notify calls (a notify from inside an operation on the same
// inode can deadlock the kernel), and it never holds mu while notifying,
// so no operation ever waits for it.
type partState struct {
	f     *logFS
	p     *storage.Partition
	topic string
	id    int

	stop     chan struct{} // closed to stop the notifier
	stopOnce sync.Once
	done     chan struct{} // closed when the notifier has returned

	// Lock order: partState.mu before nothing; it is never held while
	// calling the kernel or storage.
	mu sync.Mutex
	// records are the record files the kernel may hold, by inode number:
	// a lookup of a file it already has returns the same node, so go-fuse
	// never has two nodes for one file to choose between. A node leaves
	// when the kernel forgets it.
	records map[uint64]*recordNode // GUARDED_BY(mu)
	// fresh are the inodes whose attributes the kernel may have cached
	// since they were last invalidated: the next change of the partition
	// invalidates them (and only them).
	fresh map[*gofs.Inode]struct{} // GUARDED_BY(mu)
}

func newPartState(f *logFS, p *storage.Partition) *partState {
	return &partState{
		f:       f,
		p:       p,
		topic:   p.Topic().Name(),
		id:      p.ID(),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		records: make(map[uint64]*recordNode),
		fresh:   make(map[*gofs.Inode]struct{}),
	}
}

// ino returns the inode number of a node of this partition.
func (ps *partState) ino(k kind, off record.Offset) uint64 { return ino(ps.topic, ps.id, k, off) }

// path names a file of the partition in log messages.
func (ps *partState) path(name string) string {
	return ps.topic + "/" + strconv.Itoa(ps.id) + "/" + name
}

// handedOut records that the kernel is about to cache n's attributes. It
// is called before the attributes are computed: an invalidation that
// comes after it and before the reply makes the kernel drop the reply
// (FUSE attribute versions), so no size is ever cached stale for long.
func (ps *partState) handedOut(n *gofs.Inode) {
	ps.mu.Lock()
	ps.fresh[n] = struct{}{}
	ps.mu.Unlock()
}

// recordHandedOut is handedOut for a record file, which also becomes the
// partition's node for its inode number again if the kernel had forgotten
// it while a lookup returned it.
func (ps *partState) recordHandedOut(n *recordNode) {
	ps.mu.Lock()
	ps.fresh[&n.Inode] = struct{}{}
	if ps.records[n.ino] == nil {
		ps.records[n.ino] = n
	}
	ps.mu.Unlock()
}

// forget drops n from the notifier's sets; the kernel has forgotten it.
func (ps *partState) forget(n *gofs.Inode) {
	ps.mu.Lock()
	delete(ps.fresh, n)
	if r, ok := n.Operations().(*recordNode); ok && ps.records[r.ino] == r {
		delete(ps.records, r.ino)
	}
	ps.mu.Unlock()
}

// run is the notifier: it waits for a change of the partition, lets a
// burst of appends settle for NotifyInterval, and invalidates. The channel
// is taken before invalidating, so a change during the invalidation wakes
// the next round.
func (ps *partState) run() {
	defer close(ps.done)
	ch := ps.p.Changed()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		select {
		case <-ch:
		case <-ps.stop:
			return
		}
		timer.Reset(ps.f.opts.NotifyInterval)
		select {
		case <-timer.C:
		case <-ps.stop:
			return
		}
		ch = ps.p.Changed()
		ps.invalidate()
	}
}

// invalidate drops the kernel's cached attributes of the partition's
// files that it may hold fresh: st_size and mtime are then asked for
// again on the next stat, and a changed size or mtime makes the kernel
// drop the file's cached pages too (go-fuse negotiates
// FUSE_AUTO_INVAL_DATA), so no reader is served a stale last page. It is
// called by the notifier and, synchronously, after an append through the
// mount, so that a writer that reads back after write(2) returned sees
// its records. Both run outside any operation on these inodes.
func (ps *partState) invalidate() {
	ps.mu.Lock()
	if len(ps.fresh) == 0 {
		ps.mu.Unlock()
		return
	}
	nodes := make([]*gofs.Inode, 0, len(ps.fresh))
	for n := range ps.fresh {
		nodes = append(nodes, n)
	}
	clear(ps.fresh)
	ps.mu.Unlock()
	for _, n := range nodes {
		// ENOENT means the kernel dropped the inode meanwhile; its FORGET
		// is on its way.
		n.NotifyContent(-1, 0)
	}
}

// close stops the notifier and waits for it.
func (ps *partState) close() {
	ps.stopOnce.Do(func() { close(ps.stop) })
	<-ps.done
}
