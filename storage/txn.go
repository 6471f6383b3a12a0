package storage

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/txn"
	"github.com/logfs/logfs/vfs"
)

// This file is what read_committed needs to know about transactions: which
// transactional batches were aborted, and the last stable offset (LSO),
// below which every transaction is decided. A View in ReadCommitted hides
// the aborted batches and ends at the LSO, as a Kafka consumer with
// isolation.level=read_committed sees the partition.
//
// A transactional batch of producer P is aborted when P's next transaction
// marker after it is an ABORT, or when a segment's .txnindex lists it
// (Kafka's own record of aborts, which it consults instead of the markers;
// a segment whose .txnindex is missing or was lost still has its markers).
// The LSO is the first offset of the earliest transaction still open: it
// comes from a replay of producer state, as Kafka's ProducerStateManager
// does it: from the latest producer snapshot (.snapshot) at or below the
// log end, or from the log start when there is none, forwards over the
// transactional batches and markers.
//
// Both read per-segment summaries (segTxn): one scan of a segment's batch
// headers, made the first time it is needed, listing its transactional
// batches and markers. Data without transactions costs nothing beyond the
// replay's scan of the segments after the latest snapshot.

// Isolation is which records a View shows, as Kafka's isolation.level.
type Isolation uint8

const (
	// ReadCommitted shows non-transactional records and those of committed
	// transactions, up to the last stable offset: what a read_committed
	// consumer sees, and kcat's default. Aborted records and records at or
	// past the first offset of a transaction still open are not shown.
	ReadCommitted Isolation = iota
	// ReadUncommitted shows every data record up to the log end, aborted
	// and open transactions included.
	ReadUncommitted
)

// ParseIsolation reads Kafka's names, read_committed and read_uncommitted.
func ParseIsolation(s string) (Isolation, error) {
	switch s {
	case "read_committed", "":
		return ReadCommitted, nil
	case "read_uncommitted":
		return ReadUncommitted, nil
	}
	return 0, fmt.Errorf("isolation level %q: want read_committed or read_uncommitted", s)
}

func (i Isolation) String() string {
	if i == ReadUncommitted {
		return "read_uncommitted"
	}
	return "read_committed"
}

// txnEvent is one entry of a segment's summary: a transactional data batch
// or a transaction marker (ABORT or COMMIT) of a producer.
type txnEvent struct {
	pid        int64
	base, last record.Offset
	pos        record.Position
	marker     record.ControlType // ControlAbort or ControlCommit; ControlUnknown for a data batch
	// next is, for a data batch, the index of the producer's next marker
	// in this segment, or -1 when it is not in the segment (yet).
	next int32
}

func (e *txnEvent) isData() bool { return e.marker == record.ControlUnknown }

// segTxn is a segment's transaction summary: its transactional batches and
// markers in log order, learned by a scan of its batch headers that is
// extended as the segment grows. GUARDED_BY(mu).
type segTxn struct {
	mu      sync.Mutex
	started bool
	events  []txnEvent
	scanned record.Position // log bytes summarised
	ended   record.Offset   // where the last batch scanned ended (record.Batch.CheckFollows)
	err     error           // the bad batch that stopped the scan, at scanned
	// waiting are the data events whose producer's next marker is not in
	// the summary yet, by producer.
	waiting map[int64][]int32
	// first is the index of each producer's first marker in the segment.
	first map[int64]int32
	dec   record.Decoder
	buf   []byte
}

// summary extends the segment's summary to size (limit is the next
// segment's base offset) and returns its events, valid up to the returned
// position: size, or where a bad batch stopped the scan (err then says
// why; the summary stays stopped there).
func (s *segment) summary(size record.Position, limit record.Offset) ([]txnEvent, record.Position, error) {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started {
		t.started, t.ended = true, s.base
		t.waiting, t.first = map[int64][]int32{}, map[int64]int32{}
	}
	if t.err != nil || t.scanned >= size {
		return t.events, t.scanned, t.err
	}
	if covered, next, n := s.views.get(s, Values).txnFree(); n == 0 && covered > t.scanned && covered <= size {
		// The values view index covers this much with no transactional
		// batch or marker in it (the appender's, or the sidecar's):
		// nothing to scan there.
		t.scanned, t.ended = covered, next
		if t.scanned >= size {
			return t.events, t.scanned, nil
		}
	}
	sc := record.NewScanner(s.log, t.scanned, size, record.ScanOptions{HeadersOnly: true, ReadAhead: lookupReadAhead, MaxReadAhead: readerMaxReadAhead})
	for sc.Next() {
		b := sc.Batch()
		if err := b.CheckFollows(s.base, t.ended, limit); err != nil {
			t.err = record.WithFile(err, s.logPath())
			break
		}
		if b.ProducerID >= 0 && (b.Attributes.Control() || b.Attributes.Transactional()) {
			if err := t.add(s, b); err != nil {
				t.err = record.WithFile(err, s.logPath())
				break
			}
		}
		t.ended, t.scanned = b.NextOffset(), sc.Pos()
	}
	if t.err == nil && sc.Err() != nil {
		t.err = record.WithFile(sc.Err(), s.logPath())
	}
	return t.events, t.scanned, t.err
}

// add records batch b, read headers-only: a marker is read whole for its
// type; control batches that are not markers are left out.
func (t *segTxn) add(s *segment, b *record.Batch) error {
	e := txnEvent{pid: b.ProducerID, base: b.BaseOffset, last: b.LastOffset(), pos: b.Pos, marker: record.ControlUnknown, next: -1}
	if b.Attributes.Control() {
		t.buf = grow(t.buf, int(b.Size()))
		if _, err := s.log.ReadAt(t.buf, int64(b.Pos)); err != nil {
			return err
		}
		whole, err := record.ParseBatch(t.buf, b.Pos)
		if err != nil {
			return err
		}
		typ, err := t.dec.ControlType(&whole)
		if err != nil {
			return err
		}
		if typ != record.ControlAbort && typ != record.ControlCommit {
			return nil
		}
		e.marker = typ
	}
	i := int32(len(t.events))
	t.events = append(t.events, e)
	if e.isData() {
		t.waiting[e.pid] = append(t.waiting[e.pid], i)
		return nil
	}
	for _, w := range t.waiting[e.pid] {
		t.events[w].next = i
	}
	delete(t.waiting, e.pid)
	if _, ok := t.first[e.pid]; !ok {
		t.first[e.pid] = i
	}
	return nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// firstMarker returns the producer's first marker in the summary so far.
func (t *segTxn) firstMarker(pid int64) (record.ControlType, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.first[pid]; ok {
		return t.events[i].marker, true
	}
	return record.ControlUnknown, false
}

// dataEvent returns the data event at pos and, when the summary holds
// it, the type of the producer's next marker.
func (t *segTxn) dataEvent(pos record.Position) (pid int64, base record.Offset, marker record.ControlType, found, known bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := sort.Search(len(t.events), func(i int) bool { return t.events[i].pos >= pos })
	if i == len(t.events) || t.events[i].pos != pos || !t.events[i].isData() {
		return 0, 0, record.ControlUnknown, false, false
	}
	e := &t.events[i]
	if e.next < 0 {
		return e.pid, e.base, record.ControlUnknown, true, false
	}
	return e.pid, e.base, t.events[e.next].marker, true, true
}

// openTxn is a transaction the replay found open: its first offset, and
// where its first batch is once known.
type openTxn struct {
	first record.Offset
	base  record.Offset // the segment holding first, when pos is known
	pos   record.Position
	known bool
}

// txnState is a partition's replay of producer state, kept to what
// read_committed needs: the transactions open at the replay's cursor.
// GUARDED_BY(mu).
type txnState struct {
	mu     sync.Mutex
	loaded bool
	from   record.Offset      // the replay started here: the snapshot's offset or the log start
	open   map[int64]*openTxn // by producer
	// The cursor: the replay has applied the events of segment curBase
	// (sequence curSeq) before index curIdx, which cover its log up to
	// curPos.
	curBase record.Offset
	curSeq  uint64
	curIdx  int
	curPos  record.Position
	// txnIndexes are the bases of the segments that had a .txnindex when
	// the folder was listed, and indexes the entries read from them.
	txnIndexes map[record.Offset]bool
	indexes    map[record.Offset][]txn.AbortedTxn
	warned     bool
}

// load finds where the replay starts, as Kafka's rebuildProducerState
// (UnifiedLog.scala, 3.7.1): the latest producer snapshot that is
// readable, at or above the log start and at or below the log end
// (ProducerStateManager.truncateAndReload); with none, the log end after a
// clean shutdown (Kafka then takes the producer state as empty rather than
// scan the log), else the log start.
func (t *txnState) load(p *Partition) {
	t.loaded = true
	t.indexes = map[record.Offset][]txn.AbortedTxn{}
	segs := p.segments()
	end := p.EndOffset() // no later than where the folder is listed
	// The topic deleted, its folder is renamed away once drop is stored:
	// what would be listed or read by its name may be gone, or a topic's
	// created again under the name, so it is not looked into, and what was
	// looked into as drop was stored is not used. The replay is then from
	// the log start with no .txnindex, as when the folder cannot be
	// listed: the markers say what they would.
	var found, listed bool
	if !p.dropped.Load() {
		found, listed = t.loadFolder(p, segs)
	}
	if p.dropped.Load() {
		found, listed = false, false
		t.txnIndexes = map[record.Offset]bool{}
	}
	if !found {
		t.open = map[int64]*openTxn{}
		t.from = p.StartOffset()
		t.curBase, t.curSeq = segs[0].base, segs[0].seq
		if listed && p.topic.log.cleanOpen {
			last := segs[len(segs)-1]
			t.from, t.curBase, t.curSeq = end, last.base, last.seq
		}
	}
}

// loadFolder is load's look into the partition's folder: it notes the
// segments that have a .txnindex and takes the latest usable producer
// snapshot. It reports whether it found one, and whether the folder could
// be listed at all.
func (t *txnState) loadFolder(p *Partition, segs []*segment) (found, listed bool) {
	t.open = map[int64]*openTxn{}
	t.txnIndexes = map[record.Offset]bool{}
	fs := p.topic.log.fs
	entries, err := fs.ReadDir(p.dir)
	if err != nil {
		if !p.dropped.Load() { // else the delete renamed it away: nothing is wrong
			p.topic.log.logger.Warn("reading producer snapshots", "partition", p.String(), "err", err)
		}
		return false, false
	}
	var snaps []record.Offset
	for _, e := range entries {
		off, suffix, ok := layout.ParseSegmentFileName(e.Name())
		switch {
		case !ok:
		case suffix == layout.SnapshotSuffix:
			snaps = append(snaps, off)
		case suffix == layout.TxnIndexSuffix:
			t.txnIndexes[off] = true
		}
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i] > snaps[j] })
	start, end := p.StartOffset(), p.EndOffset()
	for _, off := range snaps {
		if off < start || off > end {
			continue // Kafka deletes these: they describe no log it has
		}
		data, err := vfs.ReadFile(fs, layout.SegmentPath(p.dir, off, layout.SnapshotSuffix))
		var entries []txn.ProducerEntry
		if err == nil {
			entries, err = txn.ParseSnapshot(data)
		}
		if err != nil {
			if !p.dropped.Load() {
				p.topic.log.logger.Warn("ignoring producer snapshot", "partition", p.String(), "offset", off, "err", err)
			}
			continue
		}
		t.from = off
		for _, e := range entries {
			if e.CurrentTxnFirstOffset >= 0 {
				t.open[e.ProducerID] = &openTxn{first: e.CurrentTxnFirstOffset}
			}
		}
		i := max(floorSegment(segs, off), 0)
		t.curBase, t.curSeq = segs[i].base, segs[i].seq
		return true, true
	}
	return false, true
}

// stable replays producer state to the current end of the log and
// returns the last stable offset, or ok false when no transaction is open
// (everything replayed is stable).
func (p *Partition) stable() (lso record.Offset, ok bool) {
	t := &p.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded {
		t.load(p)
	}
	segs := p.segments()
	i := floorSegment(segs, t.curBase)
	if i < 0 || segs[i].base != t.curBase || segs[i].seq != t.curSeq {
		// The cursor's segment is gone: retention deleted the whole log
		// before it, or it was replaced. Go on from the oldest left; the
		// transactions it knew open stay so until their markers.
		i = 0
		t.curBase, t.curSeq, t.curIdx, t.curPos = segs[0].base, segs[0].seq, 0, 0
	}
	for ; i < len(segs); i++ {
		s := segs[i]
		if !s.acquire() {
			continue
		}
		last := i == len(segs)-1
		size := record.Position(s.size.Load())
		limit := record.Offset(math.MaxInt64)
		if !last {
			limit = segs[i+1].base
		}
		if t.curPos < size {
			events, upTo, err := s.summary(size, limit)
			t.apply(s, events[t.curIdx:])
			t.curIdx, t.curPos = len(events), upTo
			if err != nil && !t.warned {
				t.warned = true
				p.topic.log.logger.Warn("transactions after a bad batch are not known; read_committed treats its segment as ending there", "partition", p.String(), "err", err)
			}
		}
		s.release()
		if !last {
			t.curBase, t.curSeq, t.curIdx, t.curPos = segs[i+1].base, segs[i+1].seq, 0, 0
		}
	}
	lso, ok = math.MaxInt64, false
	for _, o := range t.open {
		if o.first < lso {
			lso, ok = o.first, true
		}
	}
	return lso, ok
}

func (t *txnState) apply(s *segment, events []txnEvent) {
	for k := range events {
		e := &events[k]
		if e.last < t.from {
			continue // already in the snapshot's state
		}
		if !e.isData() {
			delete(t.open, e.pid)
			continue
		}
		if o := t.open[e.pid]; o == nil {
			t.open[e.pid] = &openTxn{first: e.base, base: s.base, pos: e.pos, known: true}
		} else if !o.known && o.first == e.base {
			o.base, o.pos, o.known = s.base, e.pos, true
		}
	}
}

// LastStableOffset returns the offset below which every transaction is
// decided: the first offset of the earliest transaction still open, or the
// log end offset when none is. Read_committed views end there, and it is
// where a read_committed consumer's "latest" is. A transaction open since
// before the log start (retention or DeleteRecords took its first batches)
// holds it at the log start, as Kafka's
// UnifiedLog.maybeIncrementFirstUnstableOffset raises it there.
func (p *Partition) LastStableOffset() record.Offset {
	return max(p.stableOffset(), p.StartOffset())
}

// stableOffset is LastStableOffset not raised to the log start: views
// compare it with offsets of the log to know what is decided, and nothing
// at or past an open transaction's first offset is, even when that lies
// below the log start.
func (p *Partition) stableOffset() record.Offset {
	if lso, ok := p.stable(); ok {
		return min(lso, p.EndOffset())
	}
	return p.EndOffset()
}

// LatestOffset is the end of the partition for the log's Views: the last
// stable offset in ReadCommitted, the log end offset in ReadUncommitted.
// It is a consumer's "latest", and where a view from the start ends.
func (p *Partition) LatestOffset() record.Offset {
	if p.topic.log.opts.Isolation == ReadUncommitted {
		return p.EndOffset()
	}
	return max(p.committedEnd(), p.StartOffset())
}

// committedEnd is the end of what ReadCommitted views show: the last
// stable offset, and a followed broker's high watermark if it is lower.
func (p *Partition) committedEnd() record.Offset {
	end := p.stableOffset()
	if hw, ok := p.followLimit(); ok {
		end = min(end, hw)
	}
	return end
}

// stableEnd returns how much of s, whose log holds size bytes, a
// ReadCommitted view shows: the position of the batch at the last stable
// offset when it lies in s, nothing when it lies before s, else size.
func (p *Partition) stableEnd(s *segment, size record.Position) (record.Position, error) {
	lso, ok := p.stable()
	if hw, following := p.followLimit(); following && (!ok || hw < lso) {
		return s.hwEnd(p, hw, size)
	}
	if !ok || lso >= p.segmentLimitOf(s) {
		return size, nil
	}
	if lso < s.base {
		return 0, nil
	}
	t := &p.txn
	t.mu.Lock()
	var known *openTxn
	for _, o := range t.open {
		if o.first == lso && o.known && o.base == s.base {
			known = o
		}
	}
	t.mu.Unlock()
	if known != nil {
		return min(known.pos, size), nil
	}
	// An open transaction the snapshot named: find its first batch.
	pos, err := s.positionOf(lso, size)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	for _, o := range t.open {
		if o.first == lso && !o.known {
			o.base, o.pos, o.known = s.base, pos, true
		}
	}
	t.mu.Unlock()
	return pos, nil
}

// segmentLimitOf returns the base offset of the segment after s, or
// math.MaxInt64 when s is the newest.
func (p *Partition) segmentLimitOf(s *segment) record.Offset {
	if next := p.segmentAfter(s.base); next != nil {
		return next.base
	}
	return math.MaxInt64
}

// batchEndAt returns where the batch of s holding offset off (or the first
// after it) ends, or the segment's size when there is none.
func (s *segment) batchEndAt(off record.Offset) (record.Position, error) {
	st := lookupStates.Get().(*lookupState)
	defer lookupStates.Put(st)
	found, _, err := s.seek(&st.sc, off, record.ScanOptions{HeadersOnly: true})
	if err != nil {
		return 0, err
	}
	if !found || !st.sc.Next() {
		return record.Position(s.size.Load()), nil
	}
	return st.sc.Pos(), nil
}

// positionOf returns the position of the first batch of s whose last
// offset is at or above off, or size when there is none below size.
func (s *segment) positionOf(off record.Offset, size record.Position) (record.Position, error) {
	st := lookupStates.Get().(*lookupState)
	defer lookupStates.Put(st)
	found, _, err := s.seek(&st.sc, off, record.ScanOptions{HeadersOnly: true})
	if err != nil {
		return 0, err
	}
	if !found || !st.sc.Next() {
		return size, nil
	}
	return min(st.sc.Batch().Pos, size), nil
}

// aborted reports whether the transactional batch at pos in s was
// aborted: the producer's next marker after it is an ABORT, or a
// .txnindex of its segment or a later one, up to that marker, lists it.
// A batch whose marker is not in the log yet (an open transaction: it lies
// at or past the LSO, or the snapshot did not know the transaction) is
// reported aborted too, so that nothing undecided is shown.
func (p *Partition) aborted(s *segment, pos record.Position, size record.Position) (bool, error) {
	s.summary(size, p.segmentLimitOf(s))
	pid, base, marker, found, known := s.txn.dataEvent(pos)
	if !found {
		return false, fmt.Errorf("%s: no transactional batch at position %d in the summary", s.logPath(), pos)
	}
	if p.listedAborted(s, pid, base) {
		return true, nil
	}
	if known {
		return marker == record.ControlAbort, nil
	}
	segs := p.segments()
	for j := floorSegment(segs, s.base) + 1; j < len(segs); j++ {
		n := segs[j]
		if !n.acquire() {
			continue
		}
		if p.listedAborted(n, pid, base) {
			n.release()
			return true, nil
		}
		n.summary(record.Position(n.size.Load()), p.segmentLimitOf(n))
		marker, found := n.txn.firstMarker(pid)
		n.release()
		if found {
			return marker == record.ControlAbort, nil
		}
	}
	return true, nil
}

// listedAborted reports whether s's .txnindex lists an aborted
// transaction of producer pid holding offset off.
func (p *Partition) listedAborted(s *segment, pid int64, off record.Offset) bool {
	t := &p.txn
	t.mu.Lock()
	if !t.loaded {
		t.load(p)
	}
	has := t.txnIndexes[s.base]
	entries, read := t.indexes[s.base]
	t.mu.Unlock()
	if !has {
		return false
	}
	if !read {
		entries = p.readTxnIndex(s)
		t.mu.Lock()
		t.indexes[s.base] = entries
		t.mu.Unlock()
	}
	for _, a := range entries {
		if a.ProducerID == pid && a.FirstOffset <= off && off <= a.LastOffset {
			return true
		}
	}
	return false
}

// readTxnIndex reads s's .txnindex; an unreadable or insane one (Kafka's
// sanityCheck) is logged and left out: the markers still say what it said.
func (p *Partition) readTxnIndex(s *segment) []txn.AbortedTxn {
	if p.dropped.Load() {
		return nil // its topic's folder is gone (see txnState.load): the markers say it
	}
	path := s.stem + layout.TxnIndexSuffix
	data, err := vfs.ReadFile(p.topic.log.fs, path)
	var entries []txn.AbortedTxn
	if err == nil {
		entries, err = txn.ParseIndex(data)
	}
	if err == nil {
		err = txn.CheckIndex(entries, s.base)
	}
	if err == nil {
		err = p.checkTxnIndexEnds(s, entries)
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			p.topic.log.logger.Warn("ignoring transaction index; using the markers", "file", filepath.Base(path), "err", err)
		}
		return nil
	}
	return entries
}

// checkTxnIndexEnds refuses entries Kafka never writes into s's .txnindex:
// one whose ABORT marker (its last offset) lies past s, where the entry
// would be in that marker's segment, or past the log end, or before its
// first offset. Such an entry would hide the producer's committed batches
// wherever it reaches.
func (p *Partition) checkTxnIndexEnds(s *segment, entries []txn.AbortedTxn) error {
	limit := min(p.segmentLimitOf(s), p.EndOffset())
	for i, a := range entries {
		if a.LastOffset >= limit || a.FirstOffset > a.LastOffset {
			return fmt.Errorf("%w: transaction index entry %d (%v) does not end in the segment's offsets %d to %d", txn.ErrCorrupt, i, a, s.base, limit-1)
		}
	}
	return nil
}

// isTxnIndex reports whether name is a .txnindex file name.
func isTxnIndex(name string) bool { return strings.HasSuffix(name, layout.TxnIndexSuffix) }
