package storage

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/logfs/logfs/record"
)

// A view index keeps an entry every viewInterval rendered bytes: about
// 2-5 MB for each GB a mount has shown (BenchmarkViewIndexMemory). Kept
// until the segment goes, that grew without bound with what a mount served
// (2-5 GB for a whole 1 TB data directory read once). So the entries of
// all view indexes share a budget, indexBudget. Past it, indexes of
// sealed segments are thinned (thin): an entry every 16 times as many
// rendered bytes, a sixteenth of the memory, the densest indexes first
// and of those the least recently used (makeIndexRoom), and again if that
// is not enough. Fewer entries are as right, as an entry is only a batch
// start and the rendered bytes before it; a random read in a thinned
// segment renders more before it reaches its first byte (up to 128 KiB
// after one thinning: a 4 KiB read took 25-31 µs instead of 12 in
// BenchmarkViewIndexBudget). An index of the values format whose segment
// has a sidecar gets its entries back from it on a lookup (denseLocked),
// if the sidecar holds the very entries the index had and they fit in the
// budget without thinning others: bringing back 64 MiB's entries takes
// longer than 10 random reads in a thinned index, so when the budget is
// full it is not worth it. The others stay thinned, and a thinned index
// is never written as a sidecar.
//
// Only indexes that cannot change are thinned: those of sealed segments,
// that cover their whole log and know no bad bytes (the entries that
// start after a hole must stay). The active segment of each partition
// keeps its index whole, as do the rare ones with holes. Everything else
// an index knows stays: its size, its transactional batches, its marks
// (which have their own budget, innerBudget).

// indexBudget is the memory the entries of all view indexes may take, about
// (a variable for tests: -logfs.index-budget). 64 MiB holds the entries of
// 15-35 GB shown.
var indexBudget int64 = 64 << 20

var (
	indexBytes     atomic.Int64 // memory the entries of registered view indexes take now
	indexClock     atomic.Int64 // ticks of lookups, for least recently used
	indexThins     atomic.Int64 // indexes thinned, ever (for tests and benchmarks)
	indexReloads   atomic.Int64 // thinned indexes made whole from their sidecar, ever
	indexRooms     atomic.Int64 // makeIndexRoom's passes over all indexes, ever
	indexRoomMaker sync.Mutex   // one makeIndexRoom at a time
	// indexRoomFloor is indexBytes after the last makeIndexRoom that could
	// not reach its goal (the indexes that may not be thinned take that
	// much), or 0: another is no use before indexBytes grows past it.
	indexRoomFloor atomic.Int64
)

// thinFactor is how much sparser each thinning makes an index.
const thinFactor = 16

// indexed is every view index whose entries count in indexBytes: those a
// segment holds (viewIndexes), not the ones replaced or of closed
// segments. Lock order: never with a viewIndex's mu held.
var indexed = newIndexSet()

// indexSet is a set of view indexes, safe for concurrent use.
type indexSet struct {
	mu  sync.Mutex
	set map[*viewIndex]struct{}
}

func newIndexSet() *indexSet { return &indexSet{set: make(map[*viewIndex]struct{})} }

func (is *indexSet) add(v *viewIndex) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.set[v] = struct{}{}
}

func (is *indexSet) remove(v *viewIndex) {
	is.mu.Lock()
	defer is.mu.Unlock()
	delete(is.set, v)
}

func (is *indexSet) len() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return len(is.set)
}

// others returns the indexes of the set but keep, in no particular order.
func (is *indexSet) others(keep *viewIndex) []*viewIndex {
	is.mu.Lock()
	defer is.mu.Unlock()
	out := make([]*viewIndex, 0, len(is.set))
	for v := range is.set {
		if v != keep {
			out = append(out, v)
		}
	}
	return out
}

const viewEntryBytes = int64(unsafe.Sizeof(viewEntry{}))

// register counts v, the index of segment s, in the budget.
func (v *viewIndex) register(s *segment) {
	v.mu.Lock()
	v.seg = s
	v.chargeLocked()
	v.mu.Unlock()
	indexed.add(v)
}

// unregister takes v out of the budget: its segment dropped it (replace)
// or closed. Views that still hold it use it as it is.
func (v *viewIndex) unregister() {
	indexed.remove(v)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gone = true
	indexBytes.Add(-v.charged)
	v.charged = 0
}

// chargeLocked counts the entries' memory as it is now. The caller holds mu.
func (v *viewIndex) chargeLocked() {
	if v.seg == nil || v.gone {
		return
	}
	n := int64(cap(v.entries)) * viewEntryBytes
	indexBytes.Add(n - v.charged)
	v.charged = n
}

// entriesLocked returns the entries, made whole first from the sidecar if
// they were thinned, it can, and the budget has room for them (not for an
// index out of the budget: its memory would not count), and marks v used.
// The caller holds mu, and calls keepIndexBudget once it let go of it.
func (v *viewIndex) entriesLocked() []viewEntry {
	v.used.Store(indexClock.Add(1))
	if v.spacing > viewInterval && v.sidecar && !v.gone && indexBytes.Load()+v.denseBytes <= indexBudget-indexBudget/8 {
		v.denseLocked()
	}
	return v.entries
}

// lockEntries locks v and returns its entries (entriesLocked), for a
// lookup; unlockEntries lets go of v, then keeps the budget, which
// bringing them back may have passed.
func (v *viewIndex) lockEntries() []viewEntry {
	v.mu.Lock()
	return v.entriesLocked()
}

func (v *viewIndex) unlockEntries() {
	v.mu.Unlock()
	keepIndexBudget(v)
}

// keepIndexBudget thins indexes other than keep while the budget is
// exceeded, unless the last try could not reach its goal and indexBytes
// has not grown by a sixteenth of the budget since: when the indexes that
// may not be thinned (active segments', those with holes) take more than
// the budget, every lookup would otherwise go through every index. It is
// called with no view index's lock held.
func keepIndexBudget(keep *viewIndex) {
	if n := indexBytes.Load(); n > indexBudget && n > indexRoomFloor.Load()+indexBudget/16 {
		makeIndexRoom(keep)
	}
}

// makeIndexRoom thins indexes, keep aside, until the budget has an eighth
// of itself free or none can be thinned more: the densest first, so that
// every index is thinned once before one is thinned twice (a random read
// in one thinned many times would render much of its segment), and of
// those, the ones used least recently. A call while another makes room
// returns at once: that one frees enough for both, about.
func makeIndexRoom(keep *viewIndex) {
	if !indexRoomMaker.TryLock() {
		return
	}
	defer indexRoomMaker.Unlock()
	indexRooms.Add(1)
	type candidate struct {
		v             *viewIndex
		spacing, used int64
	}
	var cands []candidate
	for _, v := range indexed.others(keep) {
		cands = append(cands, candidate{v: v})
	}
	goal := indexBudget - indexBudget/8
	for thinned := true; thinned; {
		for i := range cands {
			c := &cands[i]
			c.spacing, c.used = math.MaxInt64, 0 // busy: last
			if c.v.mu.TryLock() {
				c.spacing, c.used = max(c.v.spacing, viewInterval), c.v.used.Load()
				c.v.mu.Unlock()
			}
		}
		sort.Slice(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			return a.spacing < b.spacing || a.spacing == b.spacing && a.used < b.used
		})
		thinned = false
		for _, c := range cands {
			if indexBytes.Load() <= goal {
				indexRoomFloor.Store(0)
				return
			}
			thinned = c.v.thin() || thinned
		}
	}
	indexRoomFloor.Store(indexBytes.Load())
}

// thin keeps an entry of v every thinFactor times as many rendered bytes
// as it has now, if it is the index of a sealed segment, covers its whole
// log, knows no bad bytes in it and has entries to spare. It reports
// whether it did. An index busy (a reader indexing its log, or one reading
// its sidecar) is passed over: whoever needs room, an appender sealing a
// segment among them, does not wait for it.
func (v *viewIndex) thin() bool {
	if !v.mu.TryLock() {
		return false
	}
	defer v.mu.Unlock()
	s := v.seg
	if v.gone || v.retired || len(v.holes) > 0 || len(v.entries) <= 1 ||
		!s.frozen.Load() || s.wasCut() || v.covered != record.Position(s.size.Load()) {
		return false
	}
	if v.spacing <= viewInterval {
		v.denseBytes, v.denseSum = v.charged, entriesSum(v.entries)
	}
	v.spacing = max(v.spacing, viewInterval) * thinFactor
	kept := []viewEntry{v.entries[0]}
	for _, e := range v.entries[1:] {
		if e.rendered-kept[len(kept)-1].rendered >= v.spacing {
			kept = append(kept, e)
		}
	}
	v.entries = slices.Clip(kept)
	v.chargeLocked()
	indexThins.Add(1)
	return true
}

// denseLocked makes a thinned index whole again from its segment's
// sidecar, if that says what v does (the same log covered, rendered to the
// same total, and the very entries v had before it was thinned: the file
// at the sidecar's path may be another segment's of the same base by now,
// as after ResetFetched, whose last batch, size and total may match while
// its entries do not). If it cannot, v stays thinned and does not try
// again. The caller holds mu.
func (v *viewIndex) denseLocked() {
	got, err := readViewIndex(v.seg)
	if err != nil || got.covered != v.covered || got.total != v.total || got.lastBatchCRC != v.lastBatchCRC || entriesSum(got.entries) != v.denseSum {
		v.sidecar = false
		return
	}
	v.entries, v.spacing = got.entries, viewInterval
	v.chargeLocked()
	indexReloads.Add(1)
}

// entriesSum is a checksum of entries, to recognise them in a sidecar.
func entriesSum(entries []viewEntry) uint32 {
	var b [24]byte
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for _, e := range entries {
		binary.BigEndian.PutUint64(b[0:], uint64(e.pos))
		binary.BigEndian.PutUint64(b[8:], uint64(e.base))
		binary.BigEndian.PutUint64(b[16:], uint64(e.rendered))
		h.Write(b[:])
	}
	return h.Sum32()
}
