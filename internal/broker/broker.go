// Package broker writes a partition folder the way an Apache Kafka 3.7
// broker writes it, for tests that need broker-written data which the
// fixtures do not have: transactions of several producers, aborted ones,
// rolled segments, deletions and cleaner swaps, written while a reader
// watches. Each rule names the Kafka source it follows (3.7.1).
//
// It is a test helper, not a second implementation of storage: it keeps
// the whole partition's state in memory and writes with plain os calls.
package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/txn"
	"github.com/logfs/logfs/vfs"
)

// Options say how the partition is written. The zero value gives Kafka's
// defaults except a 1 MiB segment.bytes and 64 KiB index files.
type Options struct {
	SegmentBytes  int64 // segment.bytes: roll before an append that would not fit; 0 means 1 MiB
	IndexInterval int64 // index.interval.bytes; 0 means 4096, <0 means an entry on every append but the first
	IndexBytes    int64 // segment.index.bytes of an active segment's preallocated indexes; 0 means 64 KiB
	// NoTxnIndex leaves out the .txnindex entries of aborted transactions
	// (a copy that lost them, or data of a writer that never kept them).
	NoTxnIndex bool
	// NoSnapshots leaves out the producer snapshots Kafka takes at each
	// roll and at a clean shutdown.
	NoSnapshots bool
	LeaderEpoch int32
}

// Partition is one partition folder being written. Its methods are safe
// for concurrent use (one writer at a time, as a broker's log lock).
type Partition struct {
	mu    sync.Mutex
	data  string // the data directory
	topic string
	id    int
	dir   string
	o     Options

	start record.Offset // log start offset
	next  record.Offset // log end offset
	hw    record.Offset // the high watermark last checkpointed
	segs  []*segment    // the last is active
	ts    int64         // the clock, in ms: each batch one ms after the last

	open    map[int64]record.Offset // producers with an open transaction: its first offset
	last    map[int64]txn.ProducerEntry
	aborted []txn.AbortedTxn // every abort so far, in marker order
}

type segment struct {
	base            record.Offset
	size            int64
	log             *os.File
	offIdx          []byte // entries written so far
	timeIdx         []byte
	bytesSinceIndex int64
	maxTS           int64
	maxTSOffset     record.Offset
	last            record.Offset // last offset written, base-1 when empty
}

// Create makes the partition folder topic-id in the data directory data,
// with an empty active segment at offset 0.
func Create(data, topic string, id int, o Options) (*Partition, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = 1 << 20
	}
	if o.IndexInterval == 0 {
		o.IndexInterval = 4096
	}
	if o.IndexBytes == 0 {
		o.IndexBytes = 64 << 10
	}
	p := &Partition{data: data, topic: topic, id: id, dir: filepath.Join(data, layout.PartitionDirName(topic, id)), o: o,
		ts: 1_700_000_000_000, open: map[int64]record.Offset{}, last: map[int64]txn.ProducerEntry{}}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	if err := p.newSegment(0); err != nil {
		return nil, err
	}
	return p, p.writeCheckpoints()
}

// Dir returns the partition folder.
func (p *Partition) Dir() string { return p.dir }

// End returns the log end offset.
func (p *Partition) End() record.Offset {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// Aborted returns the aborted transactions so far.
func (p *Partition) Aborted() []txn.AbortedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]txn.AbortedTxn(nil), p.aborted...)
}

func (p *Partition) active() *segment { return p.segs[len(p.segs)-1] }

func (p *Partition) path(base record.Offset, suffix string) string {
	return filepath.Join(p.dir, layout.SegmentFileName(base, suffix))
}

// newSegment opens an active segment at base, with preallocated, zeroed
// index files as AbstractIndex makes them (setLength to segment.index.bytes
// rounded down to whole entries).
func (p *Partition) newSegment(base record.Offset) error {
	f, err := os.OpenFile(p.path(base, layout.LogSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		suffix string
		entry  int64
	}{{layout.IndexSuffix, 8}, {layout.TimeIndexSuffix, 12}} {
		if err := os.Truncate(p.path(base, s.suffix), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		g, err := os.OpenFile(p.path(base, s.suffix), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		err = errors.Join(g.Truncate(p.o.IndexBytes/s.entry*s.entry), g.Close())
		if err != nil {
			return err
		}
	}
	p.segs = append(p.segs, &segment{base: base, log: f, maxTS: record.NoTimestamp, maxTSOffset: base, last: base - 1})
	return nil
}

// Batch builds a batch of values at the next offset: transactional for a
// producer when pid >= 0 and txnl, idempotent when pid >= 0 alone.
func (p *Partition) Batch(pid int64, txnl bool, values ...string) []byte {
	var b record.Builder
	p.mu.Lock()
	ts := p.ts
	p.mu.Unlock()
	for i, v := range values {
		b.Append(ts+int64(i), nil, []byte(v), nil)
	}
	o := record.BuildOptions{ProducerID: pid, PartitionLeaderEpoch: p.o.LeaderEpoch}
	if pid < 0 {
		o.ProducerID = 0
	}
	if txnl {
		o.Attributes |= record.Attributes(0x10)
	}
	raw, err := b.BuildWith(o)
	if err != nil {
		panic(err) // values is never empty in tests
	}
	return append([]byte(nil), raw...)
}

// Write appends values as one batch of producer pid (-1: none), in a
// transaction when txnl, and returns its base offset.
func (p *Partition) Write(pid int64, txnl bool, values ...string) (record.Offset, error) {
	return p.Append(p.Batch(pid, txnl, values...))
}

// Marker appends producer pid's transaction marker of type t (commit or
// abort), as the partition leader writes it for the coordinator.
func (p *Partition) Marker(pid int64, t record.ControlType) (record.Offset, error) {
	var b record.Builder
	p.mu.Lock()
	ts := p.ts
	p.mu.Unlock()
	b.Append(ts, record.MarkerKey(t), record.MarkerValue(0), nil)
	raw, err := b.BuildWith(record.BuildOptions{ProducerID: pid, Attributes: 0x30, PartitionLeaderEpoch: p.o.LeaderEpoch})
	if err != nil {
		return 0, err
	}
	return p.Append(append([]byte(nil), raw...))
}

// Append writes an encoded batch at the log end, as UnifiedLog.append and
// LogSegment.append (3.7.1): it rolls first when the batch would not fit
// (LogSegment.shouldRoll: size > segment.bytes - batch size), gets its base
// offset, and adds an offset index entry keyed by its last offset at its
// position, with a time index entry of the running max timestamp, when more
// than index.interval.bytes were written since the last entry. Producer
// state follows ProducerAppendInfo: a transactional batch opens the
// producer's transaction, a marker ends it, and an ABORT adds an entry to
// the segment's .txnindex.
func (p *Partition) Append(raw []byte) (record.Offset, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, err := record.ParseHeader(raw, 0)
	if err != nil {
		return 0, err
	}
	s := p.active()
	if s.size > 0 && s.size > p.o.SegmentBytes-int64(len(raw)) {
		if err := p.rollLocked(); err != nil {
			return 0, err
		}
		s = p.active()
	}
	base := p.next
	record.SetBaseOffset(raw, base)
	h.BaseOffset = base
	pos := s.size
	if _, err := s.log.WriteAt(raw, pos); err != nil {
		return 0, err
	}
	s.size += int64(len(raw))
	if h.MaxTimestamp > s.maxTS {
		s.maxTS, s.maxTSOffset = h.MaxTimestamp, h.LastOffset()
	}
	if s.bytesSinceIndex > p.o.IndexInterval || (p.o.IndexInterval < 0 && pos > 0) {
		p.indexEntry(s, h.LastOffset(), pos)
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(len(raw))
	s.last = h.LastOffset()
	p.next = h.NextOffset()
	p.ts = max(p.ts, h.MaxTimestamp) + 1
	if h.ProducerID >= 0 {
		if err := p.producerLocked(s, &h, raw); err != nil {
			return 0, err
		}
	}
	return base, nil
}

func (p *Partition) producerLocked(s *segment, h *record.BatchHeader, raw []byte) error {
	e := p.last[h.ProducerID]
	e.ProducerID, e.ProducerEpoch, e.Timestamp = h.ProducerID, h.ProducerEpoch, h.MaxTimestamp
	e.CurrentTxnFirstOffset = -1
	if !h.Attributes.Control() {
		// A marker leaves the last batch's metadata as it was
		// (ProducerAppendInfo.appendEndTxnMarker).
		e.LastOffset, e.LastSequence, e.OffsetDelta = h.LastOffset(), h.BaseSequence+h.LastOffsetDelta, h.LastOffsetDelta
		if h.Attributes.Transactional() {
			if _, ok := p.open[h.ProducerID]; !ok {
				p.open[h.ProducerID] = h.BaseOffset
			}
			e.CurrentTxnFirstOffset = p.open[h.ProducerID]
		}
		p.last[h.ProducerID] = e
		return nil
	}
	b, err := record.ParseBatch(raw, 0)
	if err != nil {
		return err
	}
	var dec record.Decoder
	t, err := dec.ControlType(&b)
	if err != nil {
		return err
	}
	first, ok := p.open[h.ProducerID]
	delete(p.open, h.ProducerID)
	p.last[h.ProducerID] = e
	if t != record.ControlAbort || !ok {
		return nil
	}
	// ProducerStateManager.lastStableOffset: the first offset of the
	// earliest transaction still open once this one completes.
	lso := p.next
	for _, f := range p.open {
		lso = min(lso, f)
	}
	a := txn.AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset, LastStableOffset: lso}
	p.aborted = append(p.aborted, a)
	if p.o.NoTxnIndex {
		return nil
	}
	f, err := os.OpenFile(p.path(s.base, layout.TxnIndexSuffix), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(txn.AppendIndexEntry(nil, a))
	return errors.Join(err, f.Close())
}

// indexEntry is OffsetIndex.append and TimeIndex.maybeAppend: the time
// entry only when the max timestamp grew past the last entry's.
func (p *Partition) indexEntry(s *segment, last record.Offset, pos int64) {
	s.offIdx = binary.BigEndian.AppendUint32(s.offIdx, uint32(last-s.base))
	s.offIdx = binary.BigEndian.AppendUint32(s.offIdx, uint32(pos))
	p.timeEntry(s)
	p.writeIndexes(s, false)
}

func (p *Partition) timeEntry(s *segment) {
	lastTS := record.NoTimestamp
	if n := len(s.timeIdx); n > 0 {
		lastTS = int64(binary.BigEndian.Uint64(s.timeIdx[n-12:]))
	}
	if s.maxTS > lastTS {
		s.timeIdx = binary.BigEndian.AppendUint64(s.timeIdx, uint64(s.maxTS))
		s.timeIdx = binary.BigEndian.AppendUint32(s.timeIdx, uint32(s.maxTSOffset-s.base))
	}
}

// writeIndexes writes the index entries over the preallocated files, or,
// trimmed, as the files' whole content (trimToValidSize).
func (p *Partition) writeIndexes(s *segment, trim bool) error {
	for _, f := range []struct {
		suffix string
		b      []byte
	}{{layout.IndexSuffix, s.offIdx}, {layout.TimeIndexSuffix, s.timeIdx}} {
		g, err := os.OpenFile(p.path(s.base, f.suffix), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		_, err = g.WriteAt(f.b, 0)
		if trim {
			err = errors.Join(err, g.Truncate(int64(len(f.b))))
		}
		if err := errors.Join(err, g.Close()); err != nil {
			return err
		}
	}
	return nil
}

// Roll starts a new segment at the log end, as UnifiedLog.roll.
func (p *Partition) Roll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rollLocked()
}

// rollLocked seals the active segment as onBecomeInactiveSegment (the
// final time index entry, both indexes trimmed), opens the next and takes
// a producer snapshot named by its base offset.
func (p *Partition) rollLocked() error {
	s := p.active()
	p.timeEntry(s)
	if err := p.writeIndexes(s, true); err != nil {
		return err
	}
	if err := p.newSegment(p.next); err != nil {
		return err
	}
	return p.snapshotLocked()
}

// snapshotLocked writes <end>.snapshot with every producer's state, as
// ProducerStateManager.takeSnapshot.
func (p *Partition) snapshotLocked() error {
	if p.o.NoSnapshots {
		return nil
	}
	ids := make([]int64, 0, len(p.last))
	for id := range p.last {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	entries := make([]txn.ProducerEntry, len(ids))
	for i, id := range ids {
		entries[i] = p.last[id]
		entries[i].CurrentTxnFirstOffset = -1
		if f, ok := p.open[id]; ok {
			entries[i].CurrentTxnFirstOffset = f
		}
	}
	return os.WriteFile(p.path(p.next, layout.SnapshotSuffix), txn.EncodeSnapshot(entries), 0o644)
}

// DeleteOldest deletes the oldest segment as retention does
// (LocalLog.deleteSegmentFiles): the log start moves to the next
// segment's base, the checkpoint says so, and the segment's files are
// renamed *.deleted; unlink removes them at once (file.delete.delay.ms
// over) or leaves them.
func (p *Partition) DeleteOldest(unlink bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.segs) < 2 {
		return errors.New("broker: only the active segment is left")
	}
	s := p.segs[0]
	p.segs = p.segs[1:]
	p.start = p.segs[0].base
	if err := p.writeCheckpoints(); err != nil {
		return err
	}
	s.log.Close()
	for _, suffix := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix, layout.TxnIndexSuffix} {
		from := p.path(s.base, suffix)
		if err := os.Rename(from, from+layout.DeletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if unlink {
			os.Remove(from + layout.DeletedSuffix)
		}
	}
	return nil
}

// Clean replaces the sealed segment at index i (0 is the oldest) by a copy
// that keeps only the batches keep accepts, through the cleaner's swap
// (LocalLog.replaceSegments): the new files are written *.cleaned, renamed
// *.swap, the old ones renamed *.deleted, then the swap files renamed into
// place. Offsets keep their values; the copy gets indexes of its own.
func (p *Partition) Clean(i int, keep func(b *record.Batch) bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < 0 || i >= len(p.segs)-1 {
		return fmt.Errorf("broker: segment %d is not a sealed one", i)
	}
	old := p.segs[i]
	data, err := os.ReadFile(p.path(old.base, layout.LogSuffix))
	if err != nil {
		return err
	}
	cleaned := &segment{base: old.base, maxTS: record.NoTimestamp, maxTSOffset: old.base, last: old.base - 1}
	var out []byte
	sc := record.NewScanner(bytes.NewReader(data), 0, record.Position(len(data)), record.ScanOptions{})
	for sc.Next() {
		b := sc.Batch()
		if !keep(b) {
			continue
		}
		pos := int64(len(out))
		out = append(out, b.Bytes...)
		if b.MaxTimestamp > cleaned.maxTS {
			cleaned.maxTS, cleaned.maxTSOffset = b.MaxTimestamp, b.LastOffset()
		}
		if cleaned.bytesSinceIndex > p.o.IndexInterval {
			cleaned.offIdx = binary.BigEndian.AppendUint32(cleaned.offIdx, uint32(b.LastOffset()-old.base))
			cleaned.offIdx = binary.BigEndian.AppendUint32(cleaned.offIdx, uint32(pos))
			p.timeEntry(cleaned)
			cleaned.bytesSinceIndex = 0
		}
		cleaned.bytesSinceIndex += int64(len(b.Bytes))
	}
	if err := sc.Err(); err != nil {
		return err
	}
	p.timeEntry(cleaned)
	files := map[string][]byte{layout.LogSuffix: out, layout.IndexSuffix: cleaned.offIdx, layout.TimeIndexSuffix: cleaned.timeIdx}
	suffixes := []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix}
	for _, suffix := range suffixes {
		if err := os.WriteFile(p.path(old.base, suffix)+layout.CleanedSuffix, files[suffix], 0o644); err != nil {
			return err
		}
	}
	for _, suffix := range suffixes {
		c := p.path(old.base, suffix)
		if err := os.Rename(c+layout.CleanedSuffix, c+layout.SwapSuffix); err != nil {
			return err
		}
	}
	old.log.Close()
	for _, suffix := range suffixes {
		c := p.path(old.base, suffix)
		if err := os.Rename(c, c+layout.DeletedSuffix); err != nil {
			return err
		}
	}
	for _, suffix := range suffixes {
		c := p.path(old.base, suffix)
		if err := os.Rename(c+layout.SwapSuffix, c); err != nil {
			return err
		}
		os.Remove(c + layout.DeletedSuffix)
	}
	f, err := os.OpenFile(p.path(old.base, layout.LogSuffix), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	cleaned.log, cleaned.size = f, int64(len(out))
	p.segs[i] = cleaned
	return nil
}

// Truncate cuts the log back to offset to (exclusive), at a batch
// boundary, as a follower truncates after a leader change
// (LocalLog.truncateTo): later segments are deleted, the one holding to is
// cut and its indexes rebuilt, and the log end moves back.
func (p *Partition) Truncate(to record.Offset) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.segs) > 1 && p.active().base >= to {
		s := p.active()
		s.log.Close()
		for _, suffix := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix, layout.TxnIndexSuffix} {
			os.Remove(p.path(s.base, suffix))
		}
		p.segs = p.segs[:len(p.segs)-1]
	}
	s := p.active()
	data := make([]byte, s.size)
	if _, err := s.log.ReadAt(data, 0); err != nil {
		return err
	}
	sc := record.NewScanner(bytes.NewReader(data), 0, record.Position(len(data)), record.ScanOptions{HeadersOnly: true})
	cut := int64(0)
	s.offIdx, s.timeIdx, s.bytesSinceIndex, s.maxTS, s.maxTSOffset = nil, nil, 0, record.NoTimestamp, s.base
	next := s.base
	for sc.Next() {
		b := sc.Batch()
		if b.LastOffset() >= to {
			break
		}
		if b.MaxTimestamp > s.maxTS {
			s.maxTS, s.maxTSOffset = b.MaxTimestamp, b.LastOffset()
		}
		if s.bytesSinceIndex > p.o.IndexInterval {
			s.offIdx = binary.BigEndian.AppendUint32(s.offIdx, uint32(b.LastOffset()-s.base))
			s.offIdx = binary.BigEndian.AppendUint32(s.offIdx, uint32(b.Pos))
			p.timeEntry(s)
			s.bytesSinceIndex = 0
		}
		s.bytesSinceIndex += b.Size()
		cut, next = int64(sc.Pos()), b.NextOffset()
	}
	if err := s.log.Truncate(cut); err != nil {
		return err
	}
	s.size = cut
	p.next = next
	for id, f := range p.open {
		if f >= next {
			delete(p.open, id)
		}
	}
	p.hw = min(p.hw, p.next)
	// OffsetIndex.truncateTo and TimeIndex.truncateTo: entries past the cut
	// go, and the files are preallocated again.
	for _, f := range []struct {
		suffix string
		entry  int64
	}{{layout.IndexSuffix, 8}, {layout.TimeIndexSuffix, 12}} {
		if err := os.Truncate(p.path(s.base, f.suffix), 0); err != nil {
			return err
		}
		if err := os.Truncate(p.path(s.base, f.suffix), p.o.IndexBytes/f.entry*f.entry); err != nil {
			return err
		}
	}
	return errors.Join(p.writeIndexes(s, false), p.writeCheckpoints())
}

// Checkpoint writes the data directory's checkpoint files for this
// partition, as the broker's periodic tasks: the high watermark hw in
// replication-offset-checkpoint, the log start in
// log-start-offset-checkpoint, and the recovery point (the log end) in
// recovery-point-offset-checkpoint.
func (p *Partition) Checkpoint(hw record.Offset) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hw = hw
	return p.writeCheckpoints()
}

func (p *Partition) writeCheckpoints() error {
	tp := recovery.TopicPartition{Topic: p.topic, Partition: p.id}
	for name, off := range map[string]record.Offset{
		layout.ReplicationOffsetFile: p.hw,
		layout.LogStartFile:          p.start,
		layout.RecoveryPointFile:     p.next,
	} {
		path := filepath.Join(p.data, name)
		m, err := recovery.ReadCheckpoint(vfs.Default, path) // other partitions' entries stay
		if err != nil {
			return err
		}
		m[tp] = off
		if err := recovery.WriteCheckpoint(vfs.Default, path, m); err != nil {
			return err
		}
	}
	return nil
}

// Close shuts the partition down as a clean broker shutdown does: the
// active segment's final time entry and trimmed indexes, a producer
// snapshot at the log end, the checkpoints, then .kafka_cleanshutdown.
func (p *Partition) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.active()
	p.timeEntry(s)
	p.hw = p.next
	errs := []error{p.writeIndexes(s, true), p.snapshotLocked(), p.writeCheckpoints()}
	for _, s := range p.segs {
		errs = append(errs, s.log.Close())
	}
	errs = append(errs, os.WriteFile(filepath.Join(p.data, layout.CleanShutdownFile), nil, 0o644))
	return errors.Join(errs...)
}

// Files lists the partition folder's file names, sorted.
func (p *Partition) Files() ([]string, error) {
	es, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names, nil
}

// RemoveTxnIndexes deletes every .txnindex of the partition.
func (p *Partition) RemoveTxnIndexes() error {
	names, err := p.Files()
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasSuffix(n, layout.TxnIndexSuffix) {
			if err := os.Remove(filepath.Join(p.dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}
