package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// This file is the entry point of a follower copy (package kafka): batches
// fetched from a Kafka partition leader are written into a partition byte
// for byte, with the offsets, producer fields and CRCs the leader gave
// them, so the copy is a Kafka data directory like any other and is served
// with the code that serves local data. Only the copy's follower calls
// these; a partition written by them is not appended to with Append.

// ErrNotFollowing is returned by AppendFetched for batches that do not
// continue the copy: a base offset below its log end offset. The follower
// has lost its place and must start the copy again (ResetFetched).
var ErrNotFollowing = errors.New("logfs/storage: fetched batches do not continue the copy")

// AppendFetched appends whole fetched batches, each exactly as the leader
// sent it. Each batch's CRC is checked, its base offset must be at or
// above the log end offset (the follower may leave batches out, as
// compaction does), and it must fit in a segment; a batch that breaks one
// of these ends the call, and the batches before it stay appended. A
// failure to write (a full disk, an I/O error) leaves nothing of the call,
// as Append. The batches become visible to readers together.
// max.message.bytes does not apply: the leader already accepted them.
func (p *Partition) AppendFetched(batches [][]byte) error {
	cfg := p.topic.Config()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.writableLocked(); err != nil {
		return err
	}
	return p.appendFetchedLocked(batches, cfg)
}

// ResetFetched empties the partition and starts it again with batches, as
// a Kafka follower's truncateFullyAndStartAt: when the copy is to begin
// somewhere else (a read below what it holds, or its end deleted on the
// cluster). start becomes the log start offset; the first segment is named
// by the first batch's base offset when that is below start (the fetch of
// an offset inside a batch returns the whole batch), by start otherwise. Readers that hold the old segments finish them
// and then get ErrDeleted, as after retention. The old files are renamed
// aside before the new segment exists, so a crash never leaves a mix of
// the two; the checkpoints are written before it returns.
func (p *Partition) ResetFetched(start record.Offset, batches [][]byte) error {
	base := start
	if len(batches) > 0 {
		h, err := record.ParseHeader(batches[0], 0)
		if err != nil {
			return fmt.Errorf("fetched batch for %s: %w", p, err)
		}
		base = min(base, h.BaseOffset)
	}
	p.mu.Lock()
	if err := p.writableLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	old := p.segments()
	var errs []error
	for _, s := range old {
		errs = append(errs, s.markDeleted())
	}
	errs = append(errs, p.topic.log.fs.SyncDir(p.dir))
	if err := errors.Join(errs...); err != nil {
		p.failed = fmt.Errorf("%w: reset %s: %w", ErrFailed, p, err)
		p.mu.Unlock()
		return p.failed
	}
	seg, err := createSegment(p.topic.log.fs, p.dir, base, p.topic.segmentConfig(), p.topic.log.logger)
	if err != nil {
		// The old segments are renamed away: nothing is served until the
		// partition is opened again.
		p.failed = fmt.Errorf("%w: reset %s at %d: %w", ErrFailed, p, base, err)
		p.mu.Unlock()
		return p.failed
	}
	// One sequence number skipped: a view that holds the old segments sees
	// a gap after them and ends with ErrDeleted instead of going on here.
	seg.seq = old[len(old)-1].seq + 2
	p.layouts++
	seg.layout = p.layouts
	p.rewrites.Add(1)
	p.start.Store(int64(base))
	p.end.Store(int64(base))
	p.flushedTo.Store(int64(base))
	p.setSegments([]*segment{seg})
	p.dirDirty.Store(true)
	p.notify()
	p.mu.Unlock()
	p.dropSegments(old)
	// The checkpoints say where the new copy begins before anything is
	// appended to it: the old recovery point would vouch for bytes of the
	// new copy that were never synced.
	if err := p.topic.log.writeCheckpoints(); err != nil {
		return err
	}
	if err := p.AppendFetched(batches); err != nil {
		return err
	}
	_, err = p.AdvanceStart(start)
	return err
}

// AdvanceStart raises the log start offset to off, as DeleteRecords or
// retention on the cluster did (or the copy's own byte budget), and
// deletes the segments wholly below it; a lower off changes nothing. off
// may not pass the log end offset (the copy must be reset then). Readers
// inside a deleted segment finish it, as after retention. It returns how
// many segments went.
func (p *Partition) AdvanceStart(off record.Offset) (int, error) {
	p.mu.Lock()
	if err := p.writableLocked(); err != nil {
		p.mu.Unlock()
		return 0, err
	}
	if off <= p.StartOffset() {
		p.mu.Unlock()
		return 0, nil
	}
	if end := p.EndOffset(); off > end {
		p.mu.Unlock()
		return 0, fmt.Errorf("%w: %s: log start %d is past the log end %d", ErrNotFollowing, p, off, end)
	}
	segs := p.segments()
	n := 0
	for n+1 < len(segs) && segs[n+1].base <= off {
		n++
	}
	// The start first, then the shorter list (see detachExpired).
	p.start.Store(int64(off))
	if n > 0 {
		p.setSegments(slices.Clone(segs[n:]))
	}
	p.notify()
	p.mu.Unlock()
	if n == 0 {
		return 0, nil
	}
	// The new log start is durable before any file goes, as for retention.
	if err := p.topic.log.writeCheckpoints(); err != nil {
		for _, s := range segs[:n] {
			s.release()
		}
		return 0, err
	}
	return n, p.deleteSegments(segs[:n], p.deleteDelay())
}

func (p *Partition) deleteDelay() time.Duration {
	return time.Duration(p.topic.Config().FileDeleteDelayMs) * time.Millisecond
}

// dropSegments releases segments whose files ResetFetched renamed aside,
// and unlinks them after file.delete.delay.ms.
func (p *Partition) dropSegments(segs []*segment) {
	delay := p.deleteDelay()
	for _, s := range segs {
		s.release()
		p.removeDeletedLater(s, delay, "remove reset segment")
	}
}

// appendFetchedLocked is AppendFetched with Partition.mu held. The
// batches go down in one atomic append (appendTx): a batch that breaks a
// rule ends it, and those before it are committed; a failure to write
// takes back every batch of the call, which the follower fetches again.
func (p *Partition) appendFetchedLocked(batches [][]byte, cfg Config) error {
	tx, err := p.beginAppend(cfg, p.topic.log.now())
	if err != nil {
		return err
	}
	for _, raw := range batches {
		b, err := record.ParseBatch(raw, 0)
		if err != nil {
			err = fmt.Errorf("fetched batch for %s: %w", p, err)
		} else {
			h := b.BatchHeader
			switch {
			case int64(len(raw)) != h.Size():
				err = fmt.Errorf("fetched batch for %s at offset %d: %d bytes for a batch of %d", p, h.BaseOffset, len(raw), h.Size())
			case h.BaseOffset < tx.end:
				err = fmt.Errorf("%w: %s: batch at offset %d, the copy ends at %d", ErrNotFollowing, p, h.BaseOffset, tx.end)
			case h.Size() > cfg.SegmentBytes:
				err = fmt.Errorf("%w: %s: fetched batch of %d bytes, segment.bytes of the copy is %d", ErrRecordTooLarge, p, h.Size(), cfg.SegmentBytes)
			}
		}
		if err != nil {
			if _, cerr := tx.commit(); cerr != nil {
				return cerr
			}
			return err
		}
		if err := tx.add(raw, -1, false); err != nil {
			return tx.abort(err)
		}
	}
	_, err = tx.commit()
	return err
}

// followerStateFile holds what a follower copy records about itself: the
// cluster it copies, the isolation level it was fetched with, the topic
// IDs. Kafka ignores it; logfs reads it only for a follower copy.
const followerStateFile = "logfs-follower.properties"

// FollowerState returns the properties a follower copy last stored with
// SetFollowerState, or an empty map for a directory that has none.
func (l *Log) FollowerState() (map[string]string, error) {
	data, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, followerStateFile))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	o := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: bad line %q", followerStateFile, line)
		}
		o[k] = v
	}
	return o, nil
}

// SetFollowerState stores a follower copy's properties, replacing the file
// atomically.
func (l *Log) SetFollowerState(o map[string]string) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# logfs: what this follower copy of a Kafka cluster holds\n")
	for _, k := range keys {
		b.WriteString(k + "=" + o[k] + "\n")
	}
	return vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, followerStateFile), []byte(b.String()))
}

// Prepend builds segments of fetched batches that go before a partition's
// first segment: a follower copy that a reader needs to start earlier than
// it does grows backwards, instead of starting again (which would end the
// views of readers further on). Batches are written into new segment files
// that no reader sees; Commit makes them durable and then puts them in
// front, lowering the log start offset, in one step. Only the follower
// calls it, one at a time per partition.
type Prepend struct {
	p     *Partition
	start record.Offset
	first *segment // the partition's first segment at BeginPrepend
	segs  []*segment
	next  record.Offset // the least base offset the next batch may have
	done  bool
}

// BeginPrepend starts segments for the offsets from start to the
// partition's first segment's base offset.
func (p *Partition) BeginPrepend(start record.Offset) (*Prepend, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.writableLocked(); err != nil {
		return nil, err
	}
	first := p.segments()[0]
	if start >= p.StartOffset() || start >= first.base {
		return nil, fmt.Errorf("%w: %s: nothing to prepend from %d (the copy starts at %d)", ErrNotFollowing, p, start, p.StartOffset())
	}
	return &Prepend{p: p, start: start, first: first, next: -1}, nil
}

// Limit is the offset the prepended batches must end before.
func (pp *Prepend) Limit() record.Offset { return pp.first.base }

// Append writes whole fetched batches after those already prepended; each
// must end before Limit.
func (pp *Prepend) Append(batches [][]byte) error {
	p := pp.p
	cfg := p.topic.Config()
	for _, raw := range batches {
		b, err := record.ParseBatch(raw, 0)
		if err != nil {
			return fmt.Errorf("fetched batch for %s: %w", p, err)
		}
		h := b.BatchHeader
		switch {
		case int64(len(raw)) != h.Size():
			return fmt.Errorf("fetched batch for %s at offset %d: %d bytes for a batch of %d", p, h.BaseOffset, len(raw), h.Size())
		case h.BaseOffset < pp.next || h.LastOffset() >= pp.first.base:
			return fmt.Errorf("%w: %s: prepended batch at %d to %d, after %d and before %d", ErrNotFollowing, p, h.BaseOffset, h.LastOffset(), pp.next, pp.first.base)
		case h.Size() > cfg.SegmentBytes:
			return fmt.Errorf("%w: %s: fetched batch of %d bytes, segment.bytes of the copy is %d", ErrRecordTooLarge, p, h.Size(), cfg.SegmentBytes)
		}
		var seg *segment
		if n := len(pp.segs); n > 0 {
			seg = pp.segs[n-1]
		}
		if seg == nil || seg.size.Load() > cfg.SegmentBytes-h.Size() || !seg.checkRelativeOffset(h.LastOffset()) || seg.indexFull() {
			base := h.BaseOffset
			if seg == nil {
				base = min(base, pp.start)
			}
			if seg, err = pp.createSegment(base); err != nil {
				return err
			}
			pp.segs = append(pp.segs, seg)
		}
		if err := seg.appendBatch(raw, &h); err != nil {
			return err
		}
		pp.next = h.NextOffset()
	}
	return nil
}

// Commit seals and syncs the new segments and puts them in front of the
// partition, with the log start at start. It fails, changing nothing,
// when the partition's first segment is no longer the one BeginPrepend
// saw (the copy was reset or evicted from meanwhile).
func (pp *Prepend) Commit() error {
	p := pp.p
	if err := pp.prepare(); err != nil {
		pp.Abort()
		return err
	}
	p.mu.Lock()
	segs := p.segments()
	if err := p.writableLocked(); err != nil || segs[0] != pp.first || p.StartOffset() <= pp.start {
		p.mu.Unlock()
		pp.Abort()
		if err == nil {
			err = fmt.Errorf("%w: %s changed while segments were prepended", ErrNotFollowing, p)
		}
		return err
	}
	// The numbers below the first may be those of segments evicted
	// before: a new layout tells them apart.
	p.layouts++
	for i, s := range pp.segs {
		s.frozen.Store(true)
		s.seq = pp.first.seq - uint64(len(pp.segs)-i) // wraps: views only compare neighbours
		s.layout = p.layouts
	}
	p.setSegments(append(slices.Clone(pp.segs), segs...))
	p.start.Store(int64(pp.start))
	p.notify()
	p.mu.Unlock()
	pp.done = true
	return p.topic.log.writeCheckpoints()
}

// prepare seals the prepended segments and makes them durable, with
// their folder entries, for Commit to publish; with none, it makes one to
// hold the new start. Sealing writes the view-index sidecar by name, and
// a segment is made by name, in the partition's folder: under filesMu,
// and only while the partition is open (see createSegment).
func (pp *Prepend) prepare() error {
	p := pp.p
	p.filesMu.RLock()
	defer p.filesMu.RUnlock()
	if p.isClosed() {
		return fmt.Errorf("%s: %w", p, ErrClosed)
	}
	if len(pp.segs) == 0 {
		// Nothing before the copy but batches left out: a segment to hold
		// the new start.
		seg, err := createSegment(p.topic.log.fs, p.dir, pp.start, p.topic.segmentConfig(), p.topic.log.logger)
		if err != nil {
			return err
		}
		pp.segs = append(pp.segs, seg)
	}
	for _, s := range pp.segs {
		if err := s.seal(); err != nil {
			return err
		}
		s.views.sealed(s)
		if err := s.flush(true); err != nil {
			return fmt.Errorf("flush %s: %w", s.logPath(), err)
		}
		s.durable.Store(true)
	}
	return p.topic.log.fs.SyncDir(p.dir)
}

// createSegment makes a segment to prepend in the partition's folder,
// unless the partition is closed: its topic may have been deleted and
// created again, and the folder of that name is the new topic's, whose
// segment of the same base offset a new segment would empty (it is made
// with O_TRUNC). filesMu keeps the close, and so the delete, from
// happening meanwhile.
func (pp *Prepend) createSegment(base record.Offset) (*segment, error) {
	p := pp.p
	p.filesMu.RLock()
	defer p.filesMu.RUnlock()
	if p.isClosed() {
		return nil, fmt.Errorf("%s: %w", p, ErrClosed)
	}
	return createSegment(p.topic.log.fs, p.dir, base, p.topic.segmentConfig(), p.topic.log.logger)
}

// Abort removes the segments built so far.
func (pp *Prepend) Abort() {
	if pp.done {
		return
	}
	pp.done = true
	pp.p.filesMu.RLock()
	defer pp.p.filesMu.RUnlock()
	// After a close the paths may be a new partition's (a deleted topic
	// created again); otherwise the next open removes the files, below
	// the log start.
	closed := pp.p.isClosed()
	for _, s := range pp.segs {
		paths := []string{s.logPath(), s.indexPath(), s.timeIndexPath(), s.viewIndexPath()}
		s.release()
		if closed {
			continue
		}
		for _, path := range paths {
			if err := pp.p.topic.log.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				pp.p.topic.log.logger.Warn("remove an aborted prepended segment", "file", path, "err", err)
			}
		}
	}
	pp.segs = nil
}

// LastBatch returns the header of the batch that holds the copy's last
// offset, and false when the copy holds none. A follower names that
// batch's leader epoch in its next fetch (Kafka's LastFetchedEpoch), so
// that the leader can say whether the copy's end is still in the
// cluster's log or was lost to an unclean leader election since.
func (p *Partition) LastBatch() (record.BatchHeader, bool, error) {
	for {
		end, segs := p.EndOffset(), p.segments()
		if end <= p.StartOffset() {
			return record.BatchHeader{}, false, nil
		}
		s := segs[max(floorSegment(segs, end-1), 0)]
		if !s.acquire() {
			if p.isClosed() {
				return record.BatchHeader{}, false, fmt.Errorf("%s: %w", p, ErrClosed)
			}
			continue // deleted under us; look again
		}
		h, ok, err := s.batchHolding(end - 1)
		s.release()
		return h, ok, err
	}
}

// batchHolding returns the header of the batch of s whose offsets reach
// off, and false when s ends before it.
func (s *segment) batchHolding(off record.Offset) (record.BatchHeader, bool, error) {
	st := lookupStates.Get().(*lookupState)
	defer lookupStates.Put(st)
	found, _, err := s.seek(&st.sc, off, record.ScanOptions{HeadersOnly: true})
	if err != nil || !found {
		return record.BatchHeader{}, false, err
	}
	if !st.sc.Next() {
		return record.BatchHeader{}, false, st.sc.Err()
	}
	return st.sc.Batch().BatchHeader, true, nil
}
