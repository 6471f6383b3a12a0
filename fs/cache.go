package fs

import (
	"context"
	"sync"
)

// Record files are read through the kernel's page cache by default, and
// the kernel is asked never to drop a file's cached pages on its own
// (FUSE_EXPLICIT_INVAL_DATA; FUSE_AUTO_INVAL_DATA would drop them all each
// time the file grows). That is right because a record file's bytes never
// change: it only grows. What can go stale is the page that holds an end
// the kernel was given, past that end:
//   - a read that reaches the end of what there is now is answered short,
//     and the kernel keeps the rest of the request as zeros;
//   - a size the kernel is told (Getattr, Lookup) makes it zero the page
//     that holds it, past it, as for a file extended by truncate
//     (truncate_pagecache), though a read may have filled that page with
//     the records past it: a GETATTR reply taken before that read and
//     applied after it (nothing orders the two) did so.
// Both are harmless while the kernel thinks the file ends there; once it
// learns a larger size, those zeros would be read as if they were records.
//
// The kernel learns sizes from Getattr and Lookup (a record file's
// attributes are never cached: it asks whenever a read goes past the size
// it knows, and on every stat). So a short read notes where it ended, a
// size told inside a page is kept, and before a size beyond a noted or
// kept end is reported, the file's pages from that end on are dropped
// (NotifyContent) and the file's last bytes are stored into the kernel's
// cache (WriteCache), by the partition's notifier, outside any operation.
//
// The order of a drop matters because the kernel throws away the reply of
// a GETATTR it had sent before any notification about the same inode
// came (FUSE attribute versions): the reader that asked keeps the size it
// had, and a reader at that size reads an end of file. So the sizes such
// a reply told must reach the kernel another way, by the store, which
// moves the kernel's size to the file's end, and before the reply:
//   - the store covers the noted end, even where nothing grew past it;
//   - a drop whose render found nothing past the noted end renders again
//     after its notification, so that an append that returned before a
//     reader's GETATTR was sent is in the store;
//   - the store is the drop's last word: a store throws no reply away
//     unless it moves the kernel's size on, and then past the position of
//     any reader that asked. Its last page, inside the file's end, is
//     cached with zeros after it, so that end is kept (tailPage.kept);
//   - a kept end, a store's or a size's, becomes a note only when a larger
//     size is about to be told, and the Getattr or Lookup that tells it
//     waits for the drop, so its reply comes after the store. (Dropped at
//     once, a size's page would be dropped while the reply that tells the
//     size may be on its way, and thrown away with nothing behind it.) A
//     Getattr that waited for a drop under way checks the kept end again.
// Drops for short reads are also done as soon as the partition grows: by
// the append path through the mount before its write(2) returns, and by
// the notifier when it sees the change (an append by the storage API or
// the cluster copy), so that a Getattr rarely has to wait for one. A file
// nobody reads pays no drop for its appends.
//
// Two gates order notes and sizes. A read holds its file's gate and its
// partition's gate shared from its render until it has noted a short end.
// Getattr and Lookup take the file's gate exclusively to take a size: a
// size taken after a render that ended short sees its note, and a render
// that starts after a size was taken reaches at least that size (a file
// only grows), so its own short end lies at or beyond it. A drop takes
// the partition's gate exclusively to collect the notes, so that the
// append path, which drops after its append, also drops the notes of
// renders that were under way during it. And a drop renders the end it
// stores before it drops the pages: a read that rendered before ended at
// or short of it, and its pages are dropped; one that renders after ends
// at or past it. So the store exposes no zeros of a read noted after the
// drop collected the notes.
//
// Two windows stay open. The kernel takes the pages it copies from before
// it reads the file's size, so a reader that took a stale page just
// before a drop and reads the size just after the store would copy its
// zeros; nothing tells the server when a reader lets go of a page. And a
// drop made at once for a short read notifies while another reader's
// GETATTR reply may be on its way, and that reply is thrown away: its
// size is at most the short end (a larger one waits for the drop), but
// may be past the size that reader had, and that one read(2) returns an
// end of file; the store moves the size on right after. The stress tests
// (TestRead29WritersAndReaders, TestRead29ReadersAcrossRetention,
// TestFreshAfterAppend) have met neither on this code: 0 in 750 runs.
//
// A file that does not grow costs nothing: a reader polling its end (tail
// -f) reads the last page from the cache again and again. A growth after
// a short read, or after a size was told, costs one or two notifications,
// a store of at most a page, and a READ of that last page again.

// pageSize is the kernel's page size (a drop is rounded down to it; large
// folios are dropped whole).
const pageSize = 4096

// tailPage is the state of a record file's pages cached with zeros past
// an end: the lowest end noted since the last drop, the lowest end kept
// for a larger size, and the drop under way.
type tailPage struct {
	// gate is held shared by a read from its render until it has noted
	// a short end, and exclusively while a size is taken.
	gate sync.RWMutex

	mu    sync.Mutex
	noted bool  // a short read was served, or a kept end became due, since the last drop; GUARDED_BY(mu)
	end   int64 // the lowest such end, if noted; GUARDED_BY(mu)
	// kept is the lowest end the kernel holds a page of with zeros past
	// it, other than a short read's: the end of the last drop's store, or
	// a size told since, where it lies inside a page; else 0. It becomes
	// a note only when a larger size is about to be told, so that a file
	// nobody reads pays no drop for its appends. GUARDED_BY(mu)
	kept    int64
	waiting chan struct{} // closed when the next drop is done; nil if nobody waits; GUARDED_BY(mu)
	drop    chan struct{} // closed when the drop under way is done; nil if none; GUARDED_BY(mu)
}

// noteShort records a read served short, ending at end. It is called with
// gate held shared, and reports whether the file had no note before.
func (t *tailPage) noteShort(end int64) (first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	first = !t.noted
	if first || end < t.end {
		t.noted, t.end = true, end
	}
	return first
}

// beforeSize is called with gate held exclusively, with the size about to
// be reported, and again after waiting. It returns a channel to wait on
// before reporting it (closed when the drop it needs, or the one under
// way, is done), or nil; kick says the notifier must be asked for a drop.
// A kept end short of size becomes the note.
func (t *tailPage) beforeSize(size int64) (wait <-chan struct{}, kick bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kept > 0 && size > t.kept {
		if !t.noted || t.kept < t.end {
			t.noted, t.end = true, t.kept
		}
		t.kept = 0
	}
	if t.noted && size > t.end {
		if t.waiting == nil {
			t.waiting = make(chan struct{})
		}
		return t.waiting, true
	}
	return t.drop, false
}

// startDrop takes the note, if there is one, and a kept end short of it,
// for a drop of the pages from the page holding the lower on.
func (t *tailPage) startDrop() (end int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.noted {
		return 0, false
	}
	// A kept end's page goes too: this drop's store may move the
	// kernel's size past it.
	end = t.end
	if t.kept > 0 {
		end, t.kept = min(end, t.kept), 0
	}
	t.noted = false
	t.drop, t.waiting = t.waiting, nil
	if t.drop == nil {
		t.drop = make(chan struct{})
	}
	return end, true
}

// noteSize records a size about to be told: the kernel zeroes the page
// that holds it, past it. Like a store's end, it becomes a note only when
// a larger size is about to be told: a drop taken for it at once would
// notify the kernel while the GETATTR reply that tells it may be on its
// way, and the kernel would throw that reply away.
func (t *tailPage) noteSize(size int64) {
	t.mu.Lock()
	t.keepEnd(size)
	t.mu.Unlock()
}

// keepEnd keeps end, if inside a page, as the lowest end to note when a
// larger size is about to be told. Called with mu held.
func (t *tailPage) keepEnd(end int64) {
	if end%pageSize != 0 && (t.kept == 0 || end < t.kept) {
		t.kept = end
	}
}

// dropped ends the drop startDrop began; stored is where its store ended
// (0 if it stored nothing).
func (t *tailPage) dropped(stored int64) {
	t.mu.Lock()
	t.keepEnd(stored)
	close(t.drop)
	t.drop = nil
	t.mu.Unlock()
}

// forget drops the note: the kernel forgot the file, and its pages.
func (t *tailPage) forget() {
	t.mu.Lock()
	t.noted, t.kept = false, 0
	if t.waiting != nil {
		close(t.waiting)
		t.waiting = nil
	}
	t.mu.Unlock()
}

// waitFor waits for ch, if not nil, or for ctx.
func waitFor(ctx context.Context, ch <-chan struct{}) error {
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
