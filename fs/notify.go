package fs

import (
	"errors"
	"strconv"
	"sync"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// partState is what the nodes of one partition share: the partition, the
// record nodes the kernel holds, and the notifier that keeps the kernel's
// caches of the partition's files right.
//
// The notifier is a goroutine with two jobs. After every change of the
// partition (an append through the mount or any other, a roll, a
// retention deletion) it lets a burst of appends settle for
// NotifyInterval and invalidates the cached attributes of the files
// whose attributes the kernel got since they were last invalidated (the
// info files; record files' attributes are never cached), so that
// st_size and mtime are fresh on the next stat. And before the kernel
// learns that a record file read short has grown, it drops the file's
// pages from the end of that read on (see cache.go). It runs outside every FUSE operation, as go-fuse
// requires of Notify calls (a notify from inside an operation on the same
// inode can deadlock the kernel), and it never holds mu while notifying,
// so no operation ever waits for it except Getattr and Lookup of a record
// file whose drop it does, which must.
type partState struct {
	f     *logFS
	p     *storage.Partition
	topic string
	id    int

	stop     chan struct{} // closed to stop the notifier
	stopOnce sync.Once
	done     chan struct{}   // closed when the notifier has returned
	kick     chan struct{}   // wakes the notifier for shorts; buffered
	changed  <-chan struct{} // the first change the notifier waits for

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
	// shorts are the record files with a read served short noted, whose
	// pages from that end on are to be dropped before the kernel learns
	// a larger size (see cache.go).
	shorts map[*recordNode]struct{} // GUARDED_BY(mu)

	// gate is held shared by reads of the partition's record files from
	// their render until they noted a short end, and exclusively by
	// dropShort while it collects the notes; dropMu makes one dropShort
	// at a time. Lock order: dropMu, gate, then mu.
	gate   sync.RWMutex
	dropMu sync.Mutex
}

func newPartState(f *logFS, p *storage.Partition) *partState {
	return &partState{
		f:     f,
		p:     p,
		topic: p.Topic().Name(),
		id:    p.ID(),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		kick:  make(chan struct{}, 1),
		// Taken now, not when the notifier starts running: a change
		// meanwhile would be missed.
		changed: p.Changed(),
		records: make(map[uint64]*recordNode),
		fresh:   make(map[*gofs.Inode]struct{}),
		shorts:  make(map[*recordNode]struct{}),
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

// recordHandedOut notes that the kernel is about to get a record file's
// attributes: the file becomes the partition's node for its inode number
// again if the kernel had forgotten it while a lookup returned it. Its
// attributes are not cached, so they need no invalidation.
func (ps *partState) recordHandedOut(n *recordNode) {
	ps.mu.Lock()
	if ps.records[n.ino] == nil {
		ps.records[n.ino] = n
	}
	ps.mu.Unlock()
}

// noted adds n to the files with an end noted (see cache.go): by a read,
// with gate held shared, so that a drop collects the notes of the renders
// under way; by a size about to be told, once a kept end became its note.
func (ps *partState) noted(n *recordNode) {
	ps.mu.Lock()
	ps.shorts[n] = struct{}{}
	ps.mu.Unlock()
}

// kickDrop has the notifier drop the pages served short (dropShort).
func (ps *partState) kickDrop() {
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// dropShort drops, of every record file with an end noted, the kernel's
// pages from that end on, and stores the file's last bytes as they are
// now, which moves the kernel's size to its end (see cache.go). It
// returns when they and any drop another caller had under way are done.
// Renders under way when it starts are waited for, so that their notes
// are dropped too.
func (ps *partState) dropShort() {
	ps.dropMu.Lock()
	defer ps.dropMu.Unlock()
	ps.mu.Lock()
	none := len(ps.shorts) == 0
	ps.mu.Unlock()
	if none {
		return
	}
	type drop struct {
		n   *recordNode
		end int64
	}
	var drops []drop
	ps.gate.Lock()
	ps.mu.Lock()
	for n := range ps.shorts {
		if end, ok := n.tail.startDrop(); ok {
			drops = append(drops, drop{n, end})
		}
	}
	clear(ps.shorts)
	ps.mu.Unlock()
	ps.gate.Unlock()
	if len(drops) == 0 {
		return
	}
	// The end of each file as it is now, rendered before the stale pages
	// are dropped: a read that rendered before this render ended short of
	// this end, and its pages, in the kernel's cache before the request
	// was sent, are dropped below; one that renders after it ends at or
	// past it. So the size the store tells the kernel exposes no page a
	// short read filled with zeros, noted or not.
	type store struct {
		at  int64
		buf []byte // from the read buffers' pool: a drop per append of a file read to its end
		k   int
	}
	stores := make([]store, len(drops))
	defer func() {
		for _, st := range stores {
			putReadBuf(st.buf)
		}
	}()
	for i, d := range drops {
		st := &stores[i]
		st.buf = getReadBuf(storeLen)
		st.at, st.k = ps.renderEnd(d.n, st.buf, d.end)
	}
	if dropHook != nil {
		dropHook("rendered")
	}
	// The stale pages; ENOENT means the kernel dropped the inode, pages
	// and all.
	for _, d := range drops {
		d.n.NotifyContent(d.end&^(pageSize-1), 0)
	}
	// A notification makes the kernel throw away the reply of any GETATTR
	// it had sent for the file before (FUSE attribute versions), so the
	// sizes those replies told must reach the kernel by the store: the
	// size whose note this drop takes, and what was appended before the
	// notification, or a reader whose read began after the append
	// returned would see the old end. Where nothing had grown past the
	// note at the render, the end is rendered again now, into a buffer of
	// its own, and its pages dropped again, as before a store. The first
	// render is kept unless the second ends further: at a gap retention
	// just left, the second can end shorter, from elsewhere.
	var again []byte
	defer func() {
		if again != nil {
			putReadBuf(again)
		}
	}()
	for i, d := range drops {
		st := &stores[i]
		if st.at+int64(st.k) > d.end {
			continue
		}
		if again == nil {
			again = getReadBuf(storeLen)
		}
		if at, k := ps.renderEnd(d.n, again, d.end); at+int64(k) > st.at+int64(st.k) {
			st.at, st.k = at, k
			st.buf, again = again, st.buf
			d.n.NotifyContent(d.end&^(pageSize-1), 0)
		}
	}
	if dropHook != nil {
		dropHook("storing")
	}
	// Then the store, which moves the kernel's size on. It is the drop's
	// last word to the kernel: a store tells the kernel nothing it throws
	// a GETATTR reply away for unless it moves the size on, past the
	// position of any reader that asked. Its last page, inside the file's
	// end, is cached with zeros after it; that end is kept (dropped), to
	// be noted when a larger size is about to be told.
	for i, d := range drops {
		var end int64
		if st := stores[i]; st.k > 0 {
			end = st.at + int64(st.k)
			d.n.report(end)
			d.n.WriteCache(st.at, st.buf[:st.k])
		}
		d.n.tail.dropped(end)
	}
}

// dropHook, when set (by a test, before mounting), is called by a drop
// that has files to drop at two steps: "rendered", after it rendered
// their ends and before it notifies the kernel, and "storing", before it
// stores them. A test lands an append there.
var dropHook func(step string)

// storeLen is the most a drop stores: the last bytes of the file, which
// move the kernel's size to its end. The pages before them that were
// dropped the kernel reads when a reader asks.
const storeLen = pageSize

// renderEnd reads into b the last bytes n holds now, as many as b holds
// and none before the page that holds from (the first page dropped), and
// returns where they start and how many there are; 0 on any error (the
// drop then stores nothing, and the kernel keeps the old end for the
// GETATTR the drop overtook). Where the end is that page's start, they
// are the whole page before it: a store writes a page it covers whole
// over whatever the kernel held, and one it covers in part only past its
// start, so no page outside the dropped ones keeps zeros the store moves
// the size past. When retention deleted n's start, no new view of it
// opens, but the views of its open handles still hold the segments they
// pinned, which is where its readers read.
func (ps *partState) renderEnd(n *recordNode, b []byte, from int64) (int64, int) {
	lo := from &^ (pageSize - 1)
	end := func(v *storage.View) (int64, int) {
		size, err := v.Held() // up to a gap retention left, if any
		if err != nil && !errors.Is(err, storage.ErrDeleted) || size <= 0 {
			return 0, 0
		}
		at := max(lo, size-int64(len(b)))
		if at >= size {
			at = max(0, size-int64(len(b)))
		}
		k, _ := v.ReadAt(b[:size-at], at)
		return at, k
	}
	v, err := ps.p.NewView(n.format, n.start)
	if err == nil {
		defer v.Close()
		return end(v)
	}
	for _, h := range n.openHandles() {
		iv, err := h.takeView(-1)
		if err != nil {
			continue
		}
		at, k := end(iv.v)
		h.putView(iv)
		if k > 0 {
			return at, k
		}
	}
	return 0, 0
}

// forget drops n from the notifier's sets; the kernel has forgotten it.
func (ps *partState) forget(n *gofs.Inode) {
	ps.mu.Lock()
	delete(ps.fresh, n)
	if r, ok := n.Operations().(*recordNode); ok {
		if ps.records[r.ino] == r {
			delete(ps.records, r.ino)
		}
		// The kernel dropped its pages with it.
		delete(ps.shorts, r)
		r.tail.forget()
	}
	ps.mu.Unlock()
}

// run is the notifier. At a change of the partition it drops the pages
// served short at once (an append grew the files), then lets a burst of
// appends settle for NotifyInterval and invalidates (which drops again);
// when kicked by a Getattr it drops. The channel is taken before
// invalidating, so a change meanwhile wakes the next round; a drop asked
// for during the burst comes by kick.
func (ps *partState) run() {
	defer close(ps.done)
	ch := ps.changed
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var settled <-chan time.Time
	for {
		select {
		case <-ch:
			ch = nil
			ps.dropShort()
			timer.Reset(ps.f.opts.NotifyInterval)
			settled = timer.C
		case <-settled:
			settled = nil
			ch = ps.p.Changed()
			ps.invalidate()
		case <-ps.kick:
			ps.dropShort()
		case <-ps.stop:
			return
		}
	}
}

// invalidate drops the pages of record files served short (dropShort)
// and the kernel's cached attributes of the partition's files that it may
// hold fresh: st_size and mtime are then asked for again on the next
// stat. It is called by the notifier and, synchronously, after an append
// through the mount, so that a reader that reads after the write(2)
// returned sees its records. Both run outside any operation on these
// inodes.
func (ps *partState) invalidate() {
	ps.dropShort()
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
