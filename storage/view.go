package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"

	"github.com/logfs/logfs/record"
)

// viewChunk is how much a view renders ahead for sequential reads.
const viewChunk = 256 << 10

// View is the rendering of a partition's records from a starting offset on,
// as one growing byte stream: what the mount's offset/N and time/T files
// serve and what consume prints. Its size is exact, it grows as records
// arrive, and ReadAt at any position returns the same bytes a sequential
// read would, without rendering from the start: each segment's view index
// places rendered positions in the log.
//
// Positions are counted in the rendering of whole segments: the view starts
// skip bytes into the rendering of the segment holding its start offset.
// A View is safe for concurrent use; reads on one View are serialised.
type View struct {
	p      *Partition
	format Format
	iso    Isolation
	start  record.Offset

	mu   sync.Mutex
	segs []*segment // pinned; segs[0] holds start
	// idx are the view indexes of segs, taken when each was pinned: the
	// rendered positions of a view are counted in them (a segment whose
	// index is replaced, see errIndexReplaced, keeps its old one here).
	idx    []*viewIndex
	totals []int64  // rendered size of each frozen segment, or -1
	final  []*shown // what is shown of each segment, once final (see txnview.go)
	// run is the partition's final sizes of sealed segments (viewsizes.go)
	// the view last used: it places the segments it covers without
	// looking at them.
	run *sizeRun
	// reach is how much of each segment's log the view has shown or
	// counted in a size: a followed segment cut past it can be swapped
	// for its truncated successor (follow.go).
	reach []record.Position
	skip  int64 // rendered bytes of segs[0] below start
	// pending says skip is not known yet: in ReadCommitted, start lies
	// past the last stable offset, and the view is empty until the LSO
	// reaches it.
	pending bool
	closed  bool
	// deleted says retention deleted segments after the last pinned one
	// before the view pinned them.
	deleted bool
	// stopErr is why the view ends where its last Held found it ends, when
	// that is at bad bytes (see Stopped).
	stopErr error

	// chunk caches rendered bytes [chunkAt, chunkAt+len(chunk)) of
	// segs[chunkSeg], which end at log position chunkEnd, a batch boundary;
	// chunkEnded is the least base offset the batch there may have (where
	// the batch before it ended, see Reader.ended).
	chunk      []byte
	chunkSeg   int
	chunkAt    int64
	chunkEnd   record.Position
	chunkEnded record.Offset
	// cut, when its batch is set, says the chunk ends inside that batch
	// (one with marks, see viewinner.go): chunkEnd and chunkEnded are
	// then where it ends, and its records from cut.index on are not
	// rendered yet.
	cut viewCut
	win *[]byte // the bytes of a batch read from a mark (windows), or nil

	sc       record.Scanner
	scSeg    int
	scEnd    record.Position
	scOK     bool
	scEnded  record.Offset // where the last batch sc read ended
	limit    record.Offset // see segmentLimit
	limitSeg int
	dec      record.Decoder
}

// viewCut is where a view's chunk ends inside a batch: record number
// index of ib, a batch with marks (decoded whole when they were made), at
// byte off of its records, not rendered yet. mem is the batch's records
// when the read that made the cut has them in memory still (it read the
// batch whole just now, in the scanner's buffer): ReadAt clears it before
// it returns, as the next scan may overwrite that buffer.
type viewCut struct {
	ib    *innerBatch
	index int32
	off   int
	mem   []byte
}

// NewView opens a view from offset start, which must lie between the log
// start and end offsets (the end gives an empty view that grows).
func (p *Partition) NewView(f Format, start record.Offset) (*View, error) {
	if lo, hi := p.StartOffset(), p.EndOffset(); start < lo || start > hi {
		return nil, fmt.Errorf("%s offset %d (log holds %d to %d): %w", p, start, lo, hi, ErrOffsetOutOfRange)
	}
	if err := p.refuseHole(start); err != nil {
		return nil, err
	}
	for {
		segs := p.segments()
		if lo := p.StartOffset(); start < lo {
			// Retention ran since the check above: it raises the start
			// before it publishes the shorter list.
			return nil, fmt.Errorf("%s offset %d (log starts at %d): %w", p, start, lo, ErrOffsetOutOfRange)
		}
		s := segs[max(floorSegment(segs, start), 0)]
		if !s.acquire() {
			if p.isClosed() { // every segment is gone for good
				return nil, fmt.Errorf("%s: %w", p, ErrClosed)
			}
			continue // deleted by retention under us; look again
		}
		limit := record.Offset(math.MaxInt64)
		if next := p.segmentAfter(s.base); next != nil {
			limit = next.base
		}
		v := &View{p: p, format: f, iso: p.topic.log.opts.Isolation, start: start, segs: []*segment{s}, idx: []*viewIndex{s.views.get(s, f)},
			totals: []int64{-1}, final: []*shown{nil}, reach: []record.Position{0}, pending: true, chunkSeg: -1, scSeg: -1, limitSeg: -1}
		if err := v.settle(limit); err != nil {
			s.release()
			return nil, err
		}
		return v, nil
	}
}

// settle works out skip, the rendered bytes of segs[0] below the start,
// once they are decided: in ReadCommitted, once the last stable offset has
// reached the start (until then pending stays set). limit is the next
// segment's base offset.
func (v *View) settle(limit record.Offset) error {
	if !v.pending {
		return nil
	}
	s := v.segs[0]
	var sh shown
	if v.iso == ReadCommitted {
		if v.p.committedEnd() < v.start {
			return nil
		}
		// The fates of the batches up to the one holding the start.
		upTo, err := s.batchEndAt(v.start)
		if err != nil {
			return err
		}
		if sh, err = v.shownTo(0, upTo); err != nil {
			return err
		}
	}
	skip, err := v.idx[0].renderedBefore(s, v.start, limit, &sh)
	if errors.Is(err, errIndexReplaced) {
		// Bad bytes the index did not know of: start on a fresh one.
		v.idx[0], v.final[0] = s.views.get(s, v.format), nil
		if v.iso == ReadCommitted {
			upTo, err := s.batchEndAt(v.start)
			if err != nil {
				return err
			}
			if sh, err = v.shownTo(0, upTo); err != nil {
				return err
			}
		}
		skip, err = v.idx[0].renderedBefore(s, v.start, limit, &sh)
	}
	if err != nil {
		return err
	}
	v.skip, v.pending = skip, false
	return nil
}

// refresh pins the segments rolled since the view last looked, up to a
// gap left by retention (see segment.seq): the view then ends there, and
// a read that reaches its end gets ErrDeleted.
func (v *View) refresh() {
	if v.deleted {
		return
	}
	last := v.segs[len(v.segs)-1]
	segs := v.p.segments()
	for _, s := range segs[floorSegment(segs, last.base)+1:] {
		if s.base <= last.base {
			continue
		}
		if s.seq != last.seq+1 {
			v.deleted = true
			return
		}
		if s.acquire() {
			v.segs = append(v.segs, s)
			v.idx = append(v.idx, s.views.get(s, v.format))
			v.totals = append(v.totals, -1)
			v.final = append(v.final, nil)
			v.reach = append(v.reach, 0)
			last = s
		}
	}
}

// total returns the rendered size of segs[i] as of now.
func (v *View) total(i int) (int64, error) {
	if t := v.totals[i]; t >= 0 {
		return t, nil
	}
	s := v.segs[i]
	if s.wasCut() {
		if !v.swapCut(i) {
			return 0, s.cutErr()
		}
		s = v.segs[i]
	}
	v.p.sized.Add(1)
	frozen := s.frozen.Load() // read before the size, so a frozen size is final
	vi := v.idx[i]
	if v.iso == ReadCommitted {
		sh, err := v.shown(i)
		if err != nil {
			return 0, err
		}
		v.gapAtEnd(i)
		t, err := vi.renderedAt(s, sh.end)
		if err != nil {
			return 0, err
		}
		t -= sh.hiddenBefore(sh.end)
		if v.final[i] != nil {
			v.totals[i] = t
		}
		return t, nil
	}
	size := record.Position(s.size.Load())
	if err := vi.extend(s, size, v.segmentLimit(i)); err != nil {
		return 0, err
	}
	v.gapAtEnd(i)
	_, t := vi.snapshot()
	v.reach[i] = max(v.reach[i], size)
	if frozen {
		v.totals[i] = t
	}
	return t, nil
}

// whole reports whether the rendering of segs[i] that total returned last
// is all of it there will be, so that the next segment's rendering may be
// placed after it. Always so in ReadUncommitted once a segment rolled (it
// is sealed before the next one is made). In ReadCommitted a sealed
// segment still grows while a transaction in it is open, and nothing after
// it is shown until the transaction ends (the last stable offset lies in
// it): a view that went on to the next segment then placed that one's
// records where the rest of this one belongs, once the transaction ended
// under it (TestView23FollowedTxnsWhileReading). It goes on only once the
// segment is sealed and every transaction in it decided (v.final).
func (v *View) whole(i int) bool {
	return v.iso != ReadCommitted || v.final[i] != nil
}

// gapAtEnd lets the index of segs[i], a sealed segment of a gapless
// partition, learn a hole at its end: offsets missing before the segment
// that follows it (viewIndex.gapAtEnd). A segment that follows it past
// segments retention deleted is no hole: the view ends there with
// ErrDeleted (refresh).
func (v *View) gapAtEnd(i int) {
	s := v.segs[i]
	if !s.gapless() || !s.frozen.Load() {
		return
	}
	if next := v.p.segmentAfter(s.base); next != nil && next.seq == s.seq+1 {
		v.idx[i].gapAtEnd(s, next.base)
	}
}

// sized returns how many of the view's first segments the partition's
// final sizes (Partition.sizes) cover, taking a newer run of them into
// v.run when there is one; gen is the topic's holes count now. A followed
// broker's segments are never covered: they can be swapped for others
// (swapCut).
func (v *View) sized(gen uint64) int {
	if v.p.topic.log.opts.Follow {
		return 0
	}
	seq0, n := v.segs[0].seq, uint64(len(v.segs))
	r := v.run
	if d, ok := runAt(r, seq0); r == nil || r.gen != gen || !ok || uint64(r.count())-d < n {
		if nr := v.p.sizes.run(v.format, gen, v.segs[0].layout); nr != nil && covers(nr, seq0) && (r == nil || r.gen != gen || nr.count() > r.count()) {
			r = nr
		} else if r != nil && r.gen != gen {
			r = nil
		}
		v.run = r
	}
	d, ok := runAt(r, seq0)
	if r == nil || !ok || d == uint64(r.count()) {
		return 0
	}
	return int(min(n, uint64(r.count())-d))
}

// runAt is r.at(seq), false for no run.
func runAt(r *sizeRun, seq uint64) (uint64, bool) {
	if r == nil {
		return 0, false
	}
	return r.at(seq)
}

// covers reports whether r holds the size of segment number seq.
func covers(r *sizeRun, seq uint64) bool {
	d, ok := r.at(seq)
	return ok && d < uint64(r.count())
}

// runStart returns the rendered bytes of segs[:k], whose sizes v.run
// holds (k at most what sized returned; 0 for k == 0).
func (v *View) runStart(k int) int64 {
	if k == 0 {
		return 0
	}
	d := v.segs[0].seq - v.run.first
	return v.run.cum[d+uint64(k)] - v.run.cum[d]
}

// seek returns the first segment that ReadAt needs to look at for
// rendered byte at (counted from segs[0]'s start), and where its
// rendering starts: past the segments whose sizes v.run holds that end
// at or before at, found by binary search.
func (v *View) seek(at int64) (int, int64) {
	m := v.sized(v.segs[0].holesLearned())
	if m == 0 {
		return 0, 0
	}
	// The first of segs[:m] that ends past at, or m.
	k := sort.Search(m, func(k int) bool { return v.runStart(k+1) > at })
	k = min(k, len(v.segs)-1) // the last one pinned: ReadAt looks for more
	return k, v.runStart(k)
}

// finalSize reports whether the size of segs[i] that total returned is
// final and may be published for other views: sealed, every transaction
// in it decided, no bad bytes known in it, and counted in the segment's
// current index.
func (v *View) finalSize(i int) bool {
	if v.totals[i] < 0 || v.p.topic.log.opts.Follow {
		return false
	}
	vi := v.idx[i]
	return !vi.hasHoles() && v.segs[i].views.current(vi)
}

// publishSizes hands the final sizes of segs[m:m+len(done)], worked out
// in holes count gen, to the partition, for the next views to take.
func (v *View) publishSizes(gen uint64, m int, done []int64) {
	if len(done) == 0 {
		return
	}
	s0 := v.segs[m]
	oldest := s0.seq // the sizes of segments numbered below go
	if segs := v.p.segments(); len(segs) > 0 && segs[0].layout == v.segs[0].layout {
		oldest = segs[0].seq
	}
	v.p.sizes.publish(v.format, gen, v.segs[0].layout, oldest, s0.seq, done)
}

// ViewSize returns the current size of a view of format f from offset
// start, as NewView(f, start) and Size would, and whether that view stops
// at bad bytes (View.Stopped), for a caller that reads nothing (a stat).
// Once views have summed the sealed segments (Partition.sizes), it looks
// only at the first segment and the newest: the segments in between are
// neither pinned nor read, however many there are.
func (p *Partition) ViewSize(f Format, start record.Offset) (int64, bool, error) {
	v, err := p.NewView(f, start)
	if err != nil {
		return 0, false, err
	}
	defer v.Close()
	if n, stopped, ok, err := v.sizeAcross(); ok || err != nil {
		return n, stopped, err
	}
	n, err := v.Size()
	return n, err == nil && v.Stopped() != nil, err
}

// sizeAcross is ViewSize from the partition's cached sizes: the rendering
// of v's first segment past its start, the sizes of the sealed segments
// after it up to the newest, and the size of a view from the newest
// segment's base. ok is false when the cached sizes do not cover those
// segments (or retention left a gap among them): the caller then sums
// them with Size, which caches them for next time.
func (v *View) sizeAcross() (n int64, stopped, ok bool, err error) {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return 0, false, false, ErrClosed
	}
	if err := v.settle(v.segmentLimit(0)); err != nil || v.pending || v.p.topic.log.opts.Follow {
		v.mu.Unlock()
		return 0, false, false, err
	}
	s0, skip := v.segs[0], v.skip
	v.mu.Unlock()
	segs := v.p.segments()
	j := floorSegment(segs, s0.base)
	if j < 0 || segs[j] != s0 || j == len(segs)-1 {
		return 0, false, false, nil
	}
	last := segs[len(segs)-1]
	if last.seq-s0.seq != uint64(len(segs)-1-j) {
		return 0, false, false, nil // a gap retention left
	}
	r := v.p.sizes.run(v.format, s0.holesLearned(), s0.layout)
	if r == nil {
		return 0, false, false, nil
	}
	d0, ok := r.at(s0.seq)
	dl := d0 + (last.seq - s0.seq)
	if !ok || dl > uint64(r.count()) {
		return 0, false, false, nil
	}
	between := r.cum[dl] - r.cum[d0]
	lv, err := v.p.NewView(v.format, last.base)
	if err != nil {
		return 0, false, false, nil // retention got there first: sum them
	}
	defer lv.Close()
	t, err := lv.Size()
	if err != nil {
		return 0, false, true, err
	}
	return between - skip + t, lv.Stopped() != nil, true, nil
}

// Size returns the view's current length in bytes.
func (v *View) Size() (int64, error) {
	n, err := v.Held()
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Held returns the length of what the view holds: its size, or, when
// retention deleted records after the segments the view pinned (Size then
// fails), the length up to that gap with ErrDeleted. A reader that can only
// ask for the size before it reads (the kernel's page cache) reads up to
// there, and fails after.
func (v *View) Held() (int64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return 0, ErrClosed
	}
	if err := v.settle(v.segmentLimit(0)); err != nil || v.pending {
		return 0, err
	}
	v.refresh()
	gen := v.segs[0].holesLearned() // before the sizes it vouches for
	m := v.sized(gen)
	n := -v.skip + v.runStart(m)
	var done []int64 // final sizes of segs[m:], to publish
	for i := m; i < len(v.segs); i++ {
		t, err := v.total(i)
		if err != nil {
			return 0, err
		}
		if at, cause, ok, err := v.stop(i); err != nil {
			return 0, err
		} else if ok {
			// The view ends where its records meet bad bytes (at once
			// when it starts among the records they held).
			v.stopErr = cause
			v.publishSizes(gen, m, done)
			return max(n+at, 0), nil
		}
		if len(done) == i-m && v.finalSize(i) {
			done = append(done, t)
		}
		n += t
		if !v.whole(i) {
			break // what follows is not shown yet (see whole)
		}
	}
	v.publishSizes(gen, m, done)
	v.stopErr = nil
	if v.deleted {
		// The size would stop at the gap, and a reader that polls it
		// (tail -f) would wait there for ever without an error.
		return n, v.atEnd()
	}
	return n, nil
}

// Stopped returns, when the view's records met bad bytes by the last Size
// or Held, the error a read at its end gets (the size is where they
// start), else nil. A reader that reads only below the size it was told
// (the kernel's page cache) must ask for one byte more to be told.
func (v *View) Stopped() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.stopErr
}

// stop returns where in the rendering of segs[i] the view stops because
// its records meet bad bytes there (a viewHole: the rendering before it is
// served, a read that reaches it fails with why, and nothing after it is
// part of the view: its records cannot be placed), with ok; ok is false
// when the view goes on through segs[i].
func (v *View) stop(i int) (at int64, cause error, ok bool, err error) {
	h, ok := v.idx[i].holeFor(i == 0, v.start, v.skip)
	if !ok {
		return 0, nil, false, nil
	}
	if v.iso == ReadCommitted {
		sh, err := v.shown(i)
		if err != nil {
			return 0, nil, false, err
		}
		if h.pos > sh.end || h.pos == sh.end && !h.gap {
			// Past what the view shows yet (a hole of missing offsets
			// where the shown part ends is reached: nothing comes after
			// it but the records past the hole).
			return 0, nil, false, nil
		}
		return h.rendered - sh.hiddenBefore(h.pos), h.err, true, nil
	}
	return h.rendered, h.err, true, nil
}

// ReadAt reads rendered bytes at off. It returns io.EOF when off is at or
// beyond the current end (ErrDeleted when retention deleted records after
// the view's end before it could pin them); a short read means the end was
// reached.
func (v *View) ReadAt(b []byte, off int64) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	defer func() { v.cut.mem = nil }()
	if v.closed {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	if err := v.settle(v.segmentLimit(0)); err != nil {
		return 0, err
	} else if v.pending {
		return 0, io.EOF
	}
	at := off + v.skip // in the rendering of segs[0], segs[1], … from segs[0]'s start
	i, segStart := v.seek(at)
	for {
		t, err := v.total(i)
		if err != nil {
			return 0, err
		}
		if stopAt, cause, ok, err := v.stop(i); err != nil {
			return 0, err
		} else if ok && at >= segStart+stopAt {
			return 0, cause // the read that reaches the bad bytes
		}
		if at < segStart+t {
			break
		}
		if i == len(v.segs)-1 {
			v.refresh()
			if i == len(v.segs)-1 {
				return 0, v.atEnd()
			}
			// segs[i] rolled: its size is final now, and it may have
			// grown since t was taken.
			if t, err = v.total(i); err != nil {
				return 0, err
			}
			if at < segStart+t {
				break
			}
		}
		if !v.whole(i) {
			return 0, v.atEnd() // nothing after segs[i] is shown yet
		}
		segStart += t
		i++
	}
	n := 0
	local := at - segStart
	grew := int64(-1) // where segs[i] was last rendered again for what it gained
	for n < len(b) {
		// Never past where the view stops (bad bytes): the rendering
		// after them is not the view's.
		stopAt, cause, stops, err := v.stop(i)
		if err != nil {
			return n, err
		} else if stops && local >= stopAt {
			return readSoFar(n, cause)
		}
		if v.format == Values {
			// Values go straight into b, one copy fewer than through the
			// chunk: on from where the last read stopped, or from the mark
			// before local in a batch with marks.
			dst := b[n:]
			if stops && int64(len(dst)) > stopAt-local {
				dst = dst[:stopAt-local] // see the chunk's clamp below
			}
			k, done, err := v.renderValuesAt(i, local, dst)
			if err != nil {
				return n, err
			}
			n += k
			local += int64(k)
			if done {
				continue
			}
		}
		chunk, err := v.renderAt(i, local, len(b)-n)
		if err != nil {
			return n, err
		}
		if len(chunk) == 0 {
			if i == len(v.segs)-1 {
				v.refresh()
				if i == len(v.segs)-1 {
					break
				}
			}
			// Before moving on, render what segs[i] gained between the
			// size renderAt saw and now: appends before its roll, and in
			// ReadCommitted transactions decided, as often as that
			// finds more.
			if t, err := v.total(i); err != nil {
				return n, err
			} else if local < t && grew != local {
				grew = local
				continue
			}
			// A hole at the segment's end (offsets missing before the
			// next one, in a gapless partition) ends the view.
			if stopAt, cause, stops, err := v.stop(i); err != nil {
				return n, err
			} else if stops && local >= stopAt {
				return readSoFar(n, cause)
			}
			if !v.whole(i) {
				break // nothing after segs[i] is shown yet
			}
			i, local, grew = i+1, 0, -1
			// The next segment's index learns its holes before a byte of
			// it is rendered (the next read would: see the loop above).
			if _, err := v.total(i); err != nil {
				return readSoFar(n, err)
			}
			continue
		}
		if stops && local+int64(len(chunk)) > stopAt {
			// Rendered before the bad bytes were found (a chunk kept from
			// an earlier read): the view ends at them all the same.
			chunk = chunk[:stopAt-local]
		}
		c := copy(b[n:], chunk)
		n += c
		local += int64(c)
	}
	if n == 0 {
		return 0, v.atEnd()
	}
	return n, nil
}

// readSoFar is how ReadAt ends at err after rendering n bytes: those
// bytes, the next read getting err; or err, when there are none.
func readSoFar(n int, err error) (int, error) {
	if n > 0 {
		return n, nil
	}
	return 0, err
}

// atEnd is what a read at the end of the view returns: io.EOF, or
// ErrDeleted when retention deleted what came next before the view got to
// it (see refresh).
func (v *View) atEnd() error {
	if v.deleted {
		return fmt.Errorf("%s: %w", v.p, ErrDeleted)
	}
	return io.EOF
}

// renderAt returns rendered bytes of segs[i] from local on (at least want of
// them when the segment has them), or none at the segment's current end. A
// bad batch fails the render only if nothing before it reaches local: what
// does is returned, and the chunk ends at the bad batch, for the read that
// reaches it to fail.
func (v *View) renderAt(i int, local int64, want int) (_ []byte, err error) {
	if v.chunkSeg == i && local >= v.chunkAt && local < v.chunkAt+int64(len(v.chunk)) {
		return v.chunk[local-v.chunkAt:], nil
	}
	defer v.dropChunkOnError(&err)
	s := v.segs[i]
	sh, err := v.shown(i)
	if err != nil {
		return nil, err
	}
	sequential := v.chunkSeg == i && local == v.chunkAt+int64(len(v.chunk))
	vi := v.idx[i]
	var from record.Position
	var at int64
	var ended record.Offset // the least base offset the batch at from may have
	if sequential {
		if c := v.cut; c.ib != nil {
			// The chunk ended inside a batch with marks: carry on in it.
			return v.renderInner(i, c.ib, c.index, c.off, local, local, max(want, viewChunk), nil)
		}
		from, at, ended = v.chunkEnd, local, v.chunkEnded // carry on after the chunk
	} else {
		e, m, ok := v.locate(i, local, &sh)
		if ok {
			// A batch with marks: read from the one before local.
			return v.renderInner(i, m.ib, m.index, int(m.off), m.at, local, want, nil)
		}
		from, at, ended = e.pos, e.rendered, e.base
	}
	v.chunk, v.chunkSeg, v.cut = v.chunk[:0], i, viewCut{}
	size := sh.end
	if v.scSeg != i || !v.scOK || v.sc.Pos() != from || v.scEnd != size {
		// A read elsewhere than where the last one ended (head, tail, a
		// pread) reads, at first, the batches up to the view index entry
		// after the wanted bytes, which hold them (up to what a
		// streaming read grows to): one pread where 8 KiB and then the
		// rest of a batch took two. Without such an entry, 8 KiB; then
		// reads grow as the scan goes on.
		opts := readerScan
		if !sequential {
			if end, ok := vi.startAfter(local + int64(want) + sh.hiddenBefore(from)); ok && end > from {
				opts.ReadAhead = int(min(end-from, readerMaxReadAhead))
			}
		}
		v.sc.Reset(s.log, from, size, opts) // pread: see mappedReadMax
		v.scSeg, v.scEnd, v.scOK, v.scEnded = i, size, true, ended
	}
	// Render ahead only for a reader that reads on: a random read renders
	// what it asked for, and a Values one only up to the batch that holds
	// its first byte, as ReadAt renders the rest straight into its buffer
	// (renderInto) instead of through the chunk.
	limit := want
	switch {
	case sequential:
		limit = max(want, viewChunk)
	case v.format == Values:
		limit = 1
	}
	for {
		before, atBefore, kept := v.scEnded, at, len(v.chunk)
		var pos record.Position
		if !v.sc.Next() {
			v.scOK = false
			if err = v.sc.Err(); err == nil {
				break
			}
			pos = v.sc.Pos() // where the bad bytes begin
		} else {
			var b *record.Batch
			pos = v.sc.Batch().Pos
			if b, err = v.scanned(i); err == nil && !b.Attributes.Control() && !sh.hides(b) {
				vi.markBatch(b, atBefore+int64(kept)+sh.hiddenBefore(b.Pos), &v.dec)
				if kept == 0 && !sequential {
					if m, ok := markBefore(vi.innerAt(b.Pos), local, &sh); ok {
						// local is in a batch that has marks now: render
						// from the one before it, not the whole batch,
						// which is in memory still. Values render only
						// the record that holds local here: ReadAt
						// renders the rest straight into its buffer from
						// the batch in memory (the cut's mem), not
						// through the chunk.
						w := want
						if v.format == Values {
							w = 1
						}
						return v.renderInner(i, m.ib, m.index, int(m.off), m.at, local, w, b.Bytes[record.HeaderSize:])
					}
				}
				err = v.renderBatch(b, local, &at)
			}
		}
		if err != nil {
			at, v.chunk = atBefore, v.chunk[:kept] // nothing of the bad batch
			v.scOK = false
			v.idx[i].noteHole(s, pos, at+int64(len(v.chunk))+sh.hiddenBefore(pos), record.WithFile(err, s.logPath()))
			if at+int64(len(v.chunk)) > local {
				v.chunkAt, v.chunkEnd, v.chunkEnded = at, pos, before
				return v.chunk[local-at:], nil
			}
			return nil, record.WithFile(err, s.logPath())
		}
		if at+int64(len(v.chunk)) <= local {
			// Still before the wanted byte: drop this batch's rendering.
			at += int64(len(v.chunk))
			v.chunk = v.chunk[:0]
			continue
		}
		if at+int64(len(v.chunk))-local >= int64(limit) {
			break
		}
	}
	v.chunkAt, v.chunkEnd, v.chunkEnded = at, v.sc.Pos(), v.scEnded
	if local < v.chunkAt || local >= v.chunkAt+int64(len(v.chunk)) {
		return nil, nil
	}
	return v.chunk[local-v.chunkAt:], nil
}

// locate returns the view index entry of segs[i] to render rendered byte
// local from, and, when local lies in a batch with marks, the mark to
// render it from instead (ok).
func (v *View) locate(i int, local int64, sh *shown) (viewEntry, innerStart, bool) {
	vi := v.idx[i]
	var e viewEntry
	if len(sh.hidden) > 0 {
		e = vi.locateShown(local, sh)
	} else {
		e = vi.locate(local)
	}
	m, ok := markBefore(vi.innerAt(e.pos), local, sh)
	return e, m, ok
}

// renderValuesAt renders the values of segs[i] from local on straight into
// dst, when it can: on from where the chunk ends (renderInto, or the rest
// of a batch the chunk ends inside), or, for a read elsewhere, from the
// mark before local. done is false when it did not, and the chunk is to
// be used (renderAt); when it is true, the bytes it rendered are n, and n
// is 0 only at the segment's end or when the record at local went to the
// chunk (too long for dst).
func (v *View) renderValuesAt(i int, local int64, dst []byte) (n int, done bool, err error) {
	switch {
	case v.chunkSeg == i && local == v.chunkAt+int64(len(v.chunk)):
		if c := v.cut; c.ib != nil {
			n, err = v.renderMarkInto(i, innerStart{innerMark{index: c.index, off: int32(c.off), at: local}, c.ib}, local, dst, c.mem)
			return n, true, err
		}
		n, err = v.renderInto(i, local, dst)
		return n, err != nil || n > 0 || len(v.chunk) > 0, err
	case v.chunkSeg == i && local >= v.chunkAt && local < v.chunkAt+int64(len(v.chunk)):
		return 0, false, nil // the chunk has it
	}
	sh, err := v.shown(i)
	if err != nil {
		return 0, true, err
	}
	if _, m, ok := v.locate(i, local, &sh); ok {
		n, err = v.renderMarkInto(i, m, local, dst, nil)
		return n, true, err
	}
	return 0, false, nil
}

// renderMarkInto renders the values of batch m.ib of segs[i] from mark m
// on straight into dst, skipping the records that end at or before local,
// while whole records fit. The record that does not goes to the chunk,
// which then ends inside the batch (v.cut) or at its end, as renderInner
// leaves it. mem is the batch's records when this read has them in memory
// (see viewCut), or nil: they are read from the log.
func (v *View) renderMarkInto(i int, m innerStart, local int64, dst []byte, mem []byte) (_ int, err error) {
	defer v.dropChunkOnError(&err)
	v.chunk, v.chunkSeg, v.cut = v.chunk[:0], i, viewCut{}
	if v.win == nil {
		v.win = getWindow()
	}
	ib, at, n := m.ib, m.at, 0 // at: where the next record's rendering starts
	src := walkSource{mem: mem, win: v.win, need: ib.span(int(m.off), m.at, local+int64(len(dst)))}
	index, off, err := ib.walk(v.segs[i], src, m.index, int(m.off), func(r *record.Record) bool {
		size := int64(len(r.Value)) + 1
		if at+size <= local {
			at += size // wholly before local (only while n is 0)
			return true
		}
		from := max(local-at, 0) // inside the first record only
		if int64(n)+size-from > int64(len(dst)) {
			v.chunk = Values.Append(v.chunk, r)
			return false
		}
		if from < size-1 {
			n += copy(dst[n:], r.Value[from:])
		}
		dst[n] = '\n'
		n++
		at += size
		return n < len(dst)
	}, func(it *record.RecordIter) bool {
		if at < local {
			return true // the record at local is rendered from inside it by fn
		}
		k := it.AppendValues(dst, n) // the records that fit, in one loop
		at += int64(k - n)
		n = k
		return n < len(dst)
	})
	if err != nil {
		return 0, err
	}
	// The chunk holds the record that did not fit, from at, or nothing, and
	// ends where the batch or the rendering into dst stopped.
	v.chunkAt, v.chunkEnd, v.chunkEnded = at, ib.end(), ib.h.NextOffset()
	if index < ib.h.RecordCount {
		v.cut = viewCut{ib: ib, index: index, off: off}
	}
	return n, nil
}

// innerStart is where a read of a batch with marks starts: mark m of ib,
// at rendered byte m.at as the view counts (without hidden batches).
type innerStart struct {
	innerMark
	ib *innerBatch
}

// markBefore returns where to render rendered byte local of segs[i] from,
// when it lies in ib, a batch with marks (nil for none) that the view shows
// as it is (sh): the last mark at or before it.
func markBefore(ib *innerBatch, local int64, sh *shown) (innerStart, bool) {
	if ib == nil || ib.end() > sh.end || ib.h.Attributes.Transactional() && len(sh.hidden) > 0 {
		return innerStart{}, false
	}
	adj := sh.hiddenBefore(ib.pos) // marks count every batch
	if local < ib.from()-adj || local >= ib.to-adj {
		return innerStart{}, false
	}
	m := ib.markAt(local + adj)
	m.at -= adj
	return innerStart{innerMark: m, ib: ib}, true
}

// renderInner renders batch ib of segs[i] into the chunk from its record
// number index on, which begins at byte off of its records and at
// rendered byte at, until the chunk holds want bytes from local on or the
// batch ends; the chunk then ends inside the batch (v.cut) or at its end.
// Values records that end before local are skipped on their length. mem
// is the batch's records when a read of it just now has them (see
// walkSource), or nil.
func (v *View) renderInner(i int, ib *innerBatch, index int32, off int, at, local int64, want int, mem []byte) (_ []byte, err error) {
	defer v.dropChunkOnError(&err)
	v.chunk, v.chunkSeg, v.cut = v.chunk[:0], i, viewCut{}
	chunkAt := at
	if v.win == nil {
		v.win = getWindow()
	}
	src := walkSource{mem: mem, win: v.win, need: ib.span(off, at, local+int64(want))}
	index, off, err = ib.walk(v.segs[i], src, index, off, func(r *record.Record) bool {
		if len(v.chunk) == 0 && v.format == Values && chunkAt+int64(len(r.Value))+1 <= local {
			chunkAt += int64(len(r.Value)) + 1
			return true
		}
		v.chunk = v.format.Append(v.chunk, r)
		return chunkAt+int64(len(v.chunk))-local < int64(want)
	}, nil)
	if err != nil {
		return nil, err
	}
	v.chunkAt, v.chunkEnd, v.chunkEnded = chunkAt, ib.end(), ib.h.NextOffset()
	if index < ib.h.RecordCount {
		v.cut = viewCut{ib: ib, index: index, off: off, mem: mem}
	}
	if local < v.chunkAt || local >= v.chunkAt+int64(len(v.chunk)) {
		return nil, nil
	}
	return v.chunk[local-v.chunkAt:], nil
}

// renderBatch appends the rendering of b's records to the chunk. While the
// chunk is empty, a Values record that ends before local is skipped on its
// length alone, and *at moves past it.
func (v *View) renderBatch(b *record.Batch, local int64, at *int64) error {
	it, err := v.dec.Records(b)
	if err != nil {
		return err
	}
	for it.Next() {
		r := it.Record()
		if len(v.chunk) == 0 && v.format == Values && *at+int64(len(r.Value))+1 <= local {
			// Wholly before the wanted byte, and its size is known
			// without rendering it: skip it.
			*at += int64(len(r.Value)) + 1
			continue
		}
		v.chunk = v.format.Append(v.chunk, r)
	}
	return it.Err()
}

// renderInto renders the values of segs[i] from local on, which is where
// the chunk ends, straight into dst, while whole records fit; the record
// that does not and the rest of its batch go to the chunk for the next
// read. It returns how many bytes it rendered into dst; 0 with an empty
// chunk means the segment's end. Like renderAt, it fails at a bad batch
// only if it rendered nothing before it.
func (v *View) renderInto(i int, local int64, dst []byte) (_ int, err error) {
	defer v.dropChunkOnError(&err)
	s := v.segs[i]
	sh, err := v.shown(i)
	if err != nil {
		return 0, err
	}
	size := sh.end
	if v.scSeg != i || !v.scOK || v.sc.Pos() != v.chunkEnd {
		v.sc.Reset(s.log, v.chunkEnd, size, readerScan)
		v.scSeg, v.scOK, v.scEnded = i, true, v.chunkEnded
	}
	v.sc.Extend(size)
	v.scEnd = size
	v.chunk = v.chunk[:0]
	n, spilled := 0, false
	for !spilled && n < len(dst) {
		if m, ok := markBefore(v.idx[i].innerAt(v.sc.Pos()), local+int64(n), &sh); ok && m.index == 0 && m.at == local+int64(n) {
			// Another view read the next batch whole and marked it (the
			// kernel's read-ahead has requests in flight on views of
			// their own, and a 1 MiB batch straddles each boundary):
			// render it from its first mark, reading what dst takes of
			// it, not the whole batch again with its CRC.
			if n > 0 {
				break // the next call starts there
			}
			return v.renderMarkInto(i, m, local, dst, nil)
		}
		before, nBefore := v.scEnded, n
		var pos record.Position
		if !v.sc.Next() {
			v.scOK = false
			if err = v.sc.Err(); err == nil {
				break
			}
			pos = v.sc.Pos()
		} else {
			var b *record.Batch
			pos = v.sc.Batch().Pos
			if b, err = v.scanned(i); err == nil && !b.Attributes.Control() && !sh.hides(b) {
				n, spilled, err = v.renderValues(b, v.idx[i], local+int64(n)+sh.hiddenBefore(b.Pos), dst, n)
			}
		}
		if err != nil {
			n, v.chunk = nBefore, v.chunk[:0] // nothing of the bad batch
			v.scOK = false
			v.idx[i].noteHole(s, pos, local+int64(n)+sh.hiddenBefore(pos), record.WithFile(err, s.logPath()))
			if n > 0 {
				v.chunkAt, v.chunkEnd, v.chunkEnded = local+int64(n), pos, before
				return n, nil
			}
			return 0, record.WithFile(err, s.logPath())
		}
	}
	v.chunkAt, v.chunkEnd, v.chunkEnded = local+int64(n), v.sc.Pos(), v.scEnded
	return n, nil
}

// renderValues copies the values of b's records into dst from n on, each
// followed by '\n', while they fit; the first that does not and the rest
// go to the chunk, and spilled says so. A big batch with marks
// (viewinner.go) stops at the first that does not fit instead: the chunk
// holds that record alone and ends inside the batch (v.cut), and a read
// that carries on renders the rest from there, while one elsewhere (the
// kernel's next request, served by another view) never renders it. A big
// batch without marks gets them here, with vi, the view index, as its
// rendering starts at rendered byte from: once read whole, every record
// of it decoded, as a batch must be before a read stops inside it; the
// chunk then ends at the record that did not fit, inside the batch, the
// same way.
func (v *View) renderValues(b *record.Batch, vi *viewIndex, from int64, dst []byte, n int) (_ int, spilled bool, _ error) {
	it, err := v.dec.Records(b)
	if err != nil {
		return n, false, err
	}
	var ib *innerBatch // its marks
	var m marker       // making them, when it has none
	marking := false
	if markable(b) {
		if ib = vi.innerAt(b.Pos); ib == nil {
			m, marking = newMarker(b, from), true
		}
	}
	cut := viewCut{index: -1} // where a batch being marked is cut
	for {
		switch {
		case marking && cut.index >= 0:
			m.skip(it.SkipValues(m.unmarked())) // counted only, as below
		case spilled: // the rest go to the chunk, below
		case !marking:
			n = it.AppendValues(dst, n) // the records that fit, in one loop
		default:
			// The same, up to the next record that gets a mark, which
			// Next and note below take.
			lim := min(int64(len(dst)), int64(n)+m.unmarked())
			k := it.AppendValues(dst[:lim], n)
			m.skip(int64(k - n))
			n = k
		}
		off, index := it.Off(), it.Index()
		if !it.Next() {
			break
		}
		r := it.Record()
		if marking {
			m.note(off, index, r.Offset, int64(len(r.Value))+1)
			if cut.index >= 0 {
				continue // counted for the marks only: see below
			}
		}
		if spilled || n+len(r.Value)+1 > len(dst) {
			spilled = true
			v.chunk = Values.Append(v.chunk, r)
			if it.Index() < b.RecordCount {
				switch {
				case ib != nil:
					v.cut = viewCut{ib: ib, index: it.Index(), off: it.Off()}
					return n, true, nil
				case marking:
					cut.index, cut.off = it.Index(), it.Off()
				}
			}
			continue
		}
		n += copy(dst[n:], r.Value)
		dst[n] = '\n'
		n++
	}
	if err := it.Err(); err != nil {
		return n, spilled, err
	}
	if marking {
		// The rest of the batch after the record that did not fit is not
		// rendered: the chunk ends inside the batch, at its new marks, as
		// for a batch that had them. Rendering it would be wasted when the
		// kernel's next request goes to another view, as it does when
		// read-ahead keeps two in flight.
		cut.ib = m.done()
		vi.addInner(cut.ib)
		if cut.index >= 0 {
			v.cut = cut
		}
	}
	return n, spilled, nil
}

// dropChunkOnError forgets the chunk when a render fails, so that a read
// after the error renders again (and fails again) instead of finding a
// chunk whose bytes, chunkAt and chunkEnd no longer go together.
func (v *View) dropChunkOnError(err *error) {
	if *err != nil {
		v.chunk, v.chunkSeg, v.cut = v.chunk[:0], -1, viewCut{}
	}
}

// scanned returns the batch v.sc just read from segs[i], checked to follow
// the one before it (record.Batch.CheckFollows) and to end below the next
// segment's base offset. Holes of a gapless partition are not looked for
// here: the view index knows them (viewIndex.gapLocked) and has an entry
// at each, so a render from an entry never crosses one.
func (v *View) scanned(i int) (*record.Batch, error) {
	s, b := v.segs[i], v.sc.Batch()
	if err := b.CheckFollows(s.base, v.scEnded, v.segmentLimit(i)); err != nil {
		return nil, err
	}
	v.scEnded = b.NextOffset()
	return b, nil
}

// segmentLimit returns the base offset of the segment after segs[i], or
// math.MaxInt64 while segs[i] is the newest (looked up again then, as it
// may have rolled). The view's own next segment when it pinned one: once
// segs[i] is evicted, the partition's segment after its base may be one
// a follower copy prepended since, below the one that followed it.
func (v *View) segmentLimit(i int) record.Offset {
	if v.limitSeg != i || v.limit == math.MaxInt64 {
		v.limitSeg, v.limit = i, math.MaxInt64
		if i+1 < len(v.segs) {
			v.limit = v.segs[i+1].base
		} else if next := v.p.segmentAfter(v.segs[i].base); next != nil {
			v.limit = next.base
		}
	}
	return v.limit
}

// Close releases the view's segments.
func (v *View) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	for _, s := range v.segs {
		s.release()
	}
	if v.win != nil {
		putWindow(v.win)
		v.win = nil
	}
	v.segs = nil
	return nil
}

// refuseHole returns ErrHole when offset start of a gapless partition is
// missing (damage cut it out: see package recovery), so that a view from it
// does not silently begin at a later offset. It costs a seek and the read
// of one batch header, only in a gapless partition and below the log end.
// A view that runs into a hole further on stops there as at bad bytes: its
// view index knows the hole (viewIndex.gapLocked, gapAtEnd).
func (p *Partition) refuseHole(start record.Offset) error {
	if !p.gapless() || start >= p.EndOffset() {
		return nil
	}
	r, err := p.newReader(start, headerScan)
	if err != nil {
		return nil // the view meets the same error itself
	}
	defer r.Close()
	if _, err := r.nextBatch(); errors.Is(err, ErrHole) {
		return err
	}
	return nil
}
