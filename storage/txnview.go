package storage

import (
	"math"
	"sort"
	"sync"

	"github.com/logfs/logfs/record"
)

// This file is how a ReadCommitted View skips what read_committed does not
// show. It works on top of the view indexes, which count every data batch
// (the read_uncommitted rendering): a segment's rendering in ReadCommitted
// is that rendering cut at the LSO, less the aborted batches. Each view
// index lists the transactional batches it covers (viewTxn), and keeps
// which of them are hidden once decided (visibility); a segment without
// transactional batches below the LSO is shown exactly as in
// ReadUncommitted, with no extra work.

// viewTxn is a transactional data batch covered by a view index: where it
// starts, the rendered bytes of the segment before it, and its own.
type viewTxn struct {
	pos      record.Position
	before   int64
	rendered int64
}

// visibility holds which of a view index's txns ReadCommitted views hide:
// hidden[k] for txns[k], decided in order for the batches below the LSO,
// whose fate is final; cum[k] is the rendered bytes of the hidden ones
// among txns[:k]. GUARDED_BY(mu), taken before viewIndex.mu.
type visibility struct {
	mu     sync.Mutex
	hidden []bool
	cum    []int64

	// A memo of renderedAt, GUARDED_BY(viewIndex.mu).
	at      int64
	atPos   record.Position
	atKnown bool
}

// shown is what a ReadCommitted view shows of a segment at one moment: its
// log below end, less the hidden batches among txns (every one below end
// is decided). The zero value with end set shows everything below end.
type shown struct {
	end    record.Position
	txns   []viewTxn
	hidden []bool
	cum    []int64 // len(hidden)+1
}

// index returns how many of the decided txns start before pos.
func (sh *shown) index(pos record.Position) int {
	k := sort.Search(len(sh.hidden), func(k int) bool { return sh.txns[k].pos >= pos })
	return k
}

// hides reports whether the batch b is one that sh hides.
func (sh *shown) hides(b *record.Batch) bool {
	if len(sh.hidden) == 0 || !b.Attributes.Transactional() {
		return false
	}
	k := sh.index(b.Pos)
	return k < len(sh.hidden) && sh.txns[k].pos == b.Pos && sh.hidden[k]
}

// hiddenBefore returns the rendered bytes of the hidden batches that start
// before pos.
func (sh *shown) hiddenBefore(pos record.Position) int64 {
	if len(sh.hidden) == 0 {
		return 0
	}
	return sh.cum[sh.index(pos)]
}

// decide makes sure every transactional batch of the index below end has
// its fate decided, and returns them with their fates.
func (v *viewIndex) decide(s *segment, p *Partition, end record.Position) ([]viewTxn, []bool, []int64, error) {
	v.vis.mu.Lock()
	defer v.vis.mu.Unlock()
	v.mu.Lock()
	txns := v.txns
	v.mu.Unlock()
	vis := &v.vis
	if len(vis.cum) == 0 {
		vis.cum = append(vis.cum, 0)
	}
	size := record.Position(s.size.Load())
	for k := len(vis.hidden); k < len(txns) && txns[k].pos < end; k++ {
		hide, err := p.aborted(s, txns[k].pos, size)
		if err != nil {
			return nil, nil, nil, err
		}
		vis.hidden = append(vis.hidden, hide)
		c := vis.cum[k]
		if hide {
			c += txns[k].rendered
		}
		vis.cum = append(vis.cum, c)
	}
	return txns, vis.hidden, vis.cum, nil
}

// renderedAt returns the rendered bytes of the segment's batches before
// pos, a batch boundary the index covers: the total at its end, the count
// kept for a transactional batch there (the LSO is one), or those of the
// entry before pos plus a render of the batches up to it.
func (v *viewIndex) renderedAt(s *segment, pos record.Position) (int64, error) {
	defer keepIndexBudget(v) // after the unlock: it may have brought entries back
	v.mu.Lock()
	defer v.mu.Unlock()
	if pos >= v.covered {
		return v.total, nil
	}
	if k := sort.Search(len(v.txns), func(k int) bool { return v.txns[k].pos >= pos }); k < len(v.txns) && v.txns[k].pos == pos {
		return v.txns[k].before, nil
	}
	if v.vis.atPos == pos && v.vis.atKnown {
		return v.vis.at, nil
	}
	entries := v.entriesLocked()
	i := sort.Search(len(entries), func(i int) bool { return entries[i].pos > pos })
	e := entries[max(i-1, 0)]
	n := e.rendered
	sc := record.NewScanner(s.log, e.pos, pos, readerScan)
	for sc.Next() {
		k, err := v.batchSize(sc.Batch())
		if err != nil {
			return 0, record.WithFile(err, s.logPath())
		}
		n += k
	}
	if err := sc.Err(); err != nil {
		return 0, record.WithFile(err, s.logPath())
	}
	v.vis.at, v.vis.atPos, v.vis.atKnown = n, pos, true
	return n, nil
}

// locateShown is locate in the rendering sh shows: the entry to start
// rendering from to reach shown byte at, with its rendered count less the
// hidden bytes before it.
func (v *viewIndex) locateShown(at int64, sh *shown) viewEntry {
	entries := v.lockEntries()
	defer v.unlockEntries()
	i := sort.Search(len(entries), func(i int) bool { return entries[i].rendered-sh.hiddenBefore(entries[i].pos) > at })
	e := entries[max(i-1, 0)]
	e.rendered -= sh.hiddenBefore(e.pos)
	return e
}

// shown returns what the view shows of segs[i] now: everything its log
// holds in ReadUncommitted; in ReadCommitted the log up to the LSO, less
// the aborted batches. Segments whose answer is final keep it.
func (v *View) shown(i int) (shown, error) {
	return v.shownTo(i, math.MaxInt64)
}

// shownTo is shown for the log of segs[i] below upTo only: the fates of
// transactional batches past it are left undecided (and a bad batch past
// it unread).
func (v *View) shownTo(i int, upTo record.Position) (shown, error) {
	if v.final[i] != nil {
		return *v.final[i], nil
	}
	s := v.segs[i]
	frozen := s.frozen.Load() // before the size, so that a frozen size is final
	size := record.Position(s.size.Load())
	if v.iso == ReadUncommitted {
		v.reach[i] = max(v.reach[i], size)
		return shown{end: size}, nil
	}
	end, err := v.p.stableEnd(s, size)
	if err != nil {
		return shown{}, err
	}
	v.reach[i] = max(v.reach[i], end)
	vi := v.idx[i]
	if err := vi.extend(s, min(end, upTo), v.segmentLimit(i)); err != nil {
		return shown{}, err
	}
	sh := shown{end: end}
	if vi.txnCount() > 0 {
		if sh.txns, sh.hidden, sh.cum, err = vi.decide(s, v.p, min(end, upTo)); err != nil {
			return shown{}, err
		}
	}
	if frozen && end == size && upTo >= end {
		final := sh
		v.final[i] = &final
	}
	return sh, nil
}

// txnFree returns how much of the log the index covers, where the last
// batch it covers ends, and how many transactional batches and markers lie
// in it.
func (v *viewIndex) txnFree() (record.Position, record.Offset, int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.covered, v.next, v.txnBatches
}

// txnCount returns how many transactional data batches the index covers.
func (v *viewIndex) txnCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.txns)
}
