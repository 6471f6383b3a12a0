package fs

import (
	"container/list"
	"sync"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// The kernel keeps every name it looked up, and the node behind it, until
// memory pressure evicts them; go-fuse keeps a node for each until the
// kernel forgets it. Record files have a name for every offset and every
// timestamp, so 100,000 `stat offset/N` for different N would hold 100,000
// nodes, 190 MB of the mount, for as long as the kernel likes; with
// --allow-other any user could push the mount out of memory.
//
// nodeCache bounds that. It remembers the names of record files (offset/N,
// earliest, latest, time/T, each with .jsonl) the kernel was handed, most
// recent first; past Options.MaxRecordNames, a goroutine of its own tells
// the kernel to drop the oldest ones (NotifyEntry, never from inside an
// operation: see go-fuse's "Deadlocks"). A node whose last name is dropped
// and that no open file holds is then forgotten by the kernel (FORGET) and
// freed here; one that a reader holds open stays until it is closed. A
// dropped name is looked up again when used, as after any eviction.
type nodeCache struct {
	max int

	mu    sync.Mutex
	names *list.List               // of dentry, the most recent first; GUARDED_BY(mu)
	at    map[dentry]*list.Element // GUARDED_BY(mu)

	wake chan struct{} // a send asks the evictor to look
	stop chan struct{}
	done chan struct{}
}

// dentry is a name in a directory of the tree.
type dentry struct {
	parent *gofs.Inode
	name   string
}

// DefaultMaxRecordNames is the default of Options.MaxRecordNames: a few
// MiB of nodes.
const DefaultMaxRecordNames = 4096

// evictBatch is how many names the evictor drops at a time: it drops down
// to max-evictBatch, so that a flood wakes it once per batch.
const evictBatch = 256

func newNodeCache(max int) *nodeCache {
	c := &nodeCache{max: max, names: list.New(), at: map[dentry]*list.Element{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// handedOut records that the kernel was given name in parent.
func (c *nodeCache) handedOut(parent *gofs.Inode, name string) {
	d := dentry{parent, name}
	c.mu.Lock()
	if e, ok := c.at[d]; ok {
		c.names.MoveToFront(e)
	} else {
		c.at[d] = c.names.PushFront(d)
	}
	over := c.names.Len() > c.max
	c.mu.Unlock()
	if over {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// run is the evictor.
func (c *nodeCache) run() {
	defer close(c.done)
	batch := make([]dentry, 0, evictBatch)
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		for {
			batch = batch[:0]
			c.mu.Lock()
			for c.names.Len() > max(c.max-evictBatch, 0) && len(batch) < evictBatch {
				d := c.names.Remove(c.names.Back()).(dentry)
				delete(c.at, d)
				batch = append(batch, d)
			}
			c.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, d := range batch {
				// Nothing to drop when the kernel forgot the name already
				// (go-fuse then has no such child), or its directory,
				// whose node id go-fuse may have given to another since.
				if d.parent.Forgotten() || d.parent.GetChild(d.name) == nil {
					continue
				}
				d.parent.NotifyEntry(d.name) // ENOENT: dropped meanwhile
			}
			select {
			case <-c.stop:
				return
			default:
			}
		}
	}
}

// close stops the evictor.
func (c *nodeCache) close() {
	close(c.stop)
	<-c.done
}

// len returns how many names the cache holds.
func (c *nodeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names.Len()
}
