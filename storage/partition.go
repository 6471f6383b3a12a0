package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// Record is a record to append. Key and Value may be nil (null); the
// partition copies them, so the caller may reuse the memory afterwards.
type Record struct {
	// Timestamp is the CreateTime in milliseconds since the epoch; 0 means
	// the wall clock at append.
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []record.Header
}

// Partition is one partition of a topic: an ordered list of segments, the
// last of which takes appends.
//
// Lock order: Partition.followMu, then Partition.mu, then Partition.flushMu,
// then segment.idxMu.
// Readers take none of them: they load the segment list and the offsets
// from atomics, which appends store after the bytes they describe.
type Partition struct {
	topic *Topic
	id    int
	dir   string

	mu sync.Mutex // serialises appends, rolls, retention, close
	// filesMu keeps close from running while files of segments already
	// taken out of the log are renamed or removed by their paths
	// (deleteSegments, Prepend.Abort), which after a close may name a new
	// partition's files: a deleted topic created again. Taken before mu.
	filesMu sync.RWMutex
	// dropped says the partition's topic was deleted: its folder is
	// renamed away, and the names under dir may be the files of a topic
	// created again under the name. Stored under filesMu (see drop), so
	// that it holds still for a holder of filesMu.
	dropped atomic.Bool
	segs    atomic.Pointer[[]*segment]    // sorted by base offset; replaced, never mutated
	start   atomic.Int64                  // log start offset
	end     atomic.Int64                  // log end offset: the next offset to assign
	changed atomic.Pointer[chan struct{}] // handed out by Changed, closed by notify; nil until asked for
	// rewrites counts the changes that may have replaced records already
	// shown by other records at the same offsets (Rewrites).
	rewrites atomic.Uint64

	// GUARDED_BY(mu)
	builder record.Builder
	failed  error // set when a failed append could not be undone
	closed  bool
	// layouts counts the layouts given out (segment.layout): a follower
	// copy's reset or growing backwards takes the next.
	layouts uint64

	flushMu    sync.Mutex   // one flush at a time; later callers ride on it
	flushedTo  atomic.Int64 // recovery point: every offset below is durable
	lastFlush  atomic.Int64 // unix ms of the last flush
	lastAppend atomic.Int64 // unix ns of the last append (or the active .log's mtime)
	dirDirty   atomic.Bool  // a segment file was created since the last directory sync

	recovered RecoveryReport // set once by Open, read-only after
	txn       txnState       // read_committed's replay of producer state (see txn.go)
	hw        atomic.Int64   // a followed broker's high watermark, -1 unknown (follow.go)
	followMu  sync.Mutex     // a followed partition's refresh, and Check meanwhile (follow.go)
	sizes     sizeCache      // final view sizes of sealed segments (viewsizes.go)
	// sized counts the segments whose view size a View worked out itself
	// rather than took from sizes: tests check it stays once a segment.
	sized atomic.Int64
}

func newPartition(t *Topic, id int, dir string) *Partition {
	p := &Partition{topic: t, id: id, dir: dir}
	p.lastFlush.Store(t.log.now().UnixMilli())
	return p
}

// Topic returns the partition's topic.
func (p *Partition) Topic() *Topic { return p.topic }

// ID returns the partition number.
func (p *Partition) ID() int { return p.id }

// Dir returns the partition's folder.
func (p *Partition) Dir() string { return p.dir }

// StartOffset returns the log start offset: the first offset not deleted.
func (p *Partition) StartOffset() record.Offset { return record.Offset(p.start.Load()) }

// EndOffset returns the log end offset: the offset the next record gets.
func (p *Partition) EndOffset() record.Offset { return record.Offset(p.end.Load()) }

// ModTime returns the time of the last append, or when the partition was
// opened, the modification time of its active segment.
func (p *Partition) ModTime() time.Time { return time.Unix(0, p.lastAppend.Load()) }

// RecoveryPoint returns the offset below which every record is durable.
func (p *Partition) RecoveryPoint() record.Offset { return record.Offset(p.flushedTo.Load()) }

func (p *Partition) segments() []*segment { return *p.segs.Load() }

func (p *Partition) active() *segment {
	s := p.segments()
	return s[len(s)-1]
}

func (p *Partition) setSegments(s []*segment) { p.segs.Store(&s) }

// Changed returns a channel that is closed at the next change of the
// partition: an append, a roll, a retention deletion, or close. Take the
// channel before checking the state it guards, then wait on it.
func (p *Partition) Changed() <-chan struct{} {
	for {
		if ch := p.changed.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		if p.changed.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// Rewrites counts the changes that may have replaced records the
// partition had shown by other records at the same offsets, so that a
// rendering read before may no longer be the partition's: a followed
// broker's cleaner swapping a segment, a truncation, a cluster copy reset.
// Appends, rolls and retention never do (they only add records, or delete
// them from the front). It moves before the partition shows the new
// records, so that a cache of renderings that notes it before it reads
// them knows them to be of no older a partition than that.
func (p *Partition) Rewrites() uint64 { return p.rewrites.Load() }

// notify closes the channel Changed handed out, if it handed one out since
// the last change: an append that nobody waits for makes no channel.
func (p *Partition) notify() {
	if ch := p.changed.Swap(nil); ch != nil {
		close(*ch)
	}
}

// Wait blocks until the log end offset passes offset, the partition closes,
// or ctx is done.
func (p *Partition) Wait(ctx context.Context, offset record.Offset) error {
	for {
		ch := p.Changed()
		if p.EndOffset() > offset {
			return nil
		}
		if p.isClosed() {
			return ErrClosed
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func (p *Partition) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Partition) writableLocked() error {
	switch {
	case p.closed:
		return ErrClosed
	case p.topic.log.opts.ReadOnly:
		return ErrReadOnly
	case p.failed != nil:
		return p.failed
	}
	return nil
}

// Sync makes every record appended so far durable: it fsyncs the segments
// written since the last flush and, after a roll, the partition folder.
// Concurrent callers share one flush. A partition whose topic was deleted
// may get ErrClosed.
func (p *Partition) Sync() error {
	target := p.end.Load()
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	if p.flushedTo.Load() >= target && !p.dirDirty.Load() {
		return nil
	}
	end := p.end.Load()
	dirDirty := p.dirDirty.Swap(false)
	segs := p.segments()
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		if s.durable.Load() {
			break
		}
		if !s.acquire() {
			continue // deleted by retention meanwhile: nothing to keep
		}
		// The active segment's indexes need no msync: recovery rebuilds
		// them after a crash, as the recovery point always lies in or
		// beyond the active segment. A sealed segment's must be durable
		// before the recovery point passes it.
		active := i == len(segs)-1
		err := s.flush(!active)
		s.release()
		if err != nil {
			p.dirDirty.Store(dirDirty || p.dirDirty.Load())
			return fmt.Errorf("flush %s: %w", s.logPath(), err)
		}
		if !active {
			s.durable.Store(true)
		}
	}
	if dirDirty {
		// A deleted topic's folder is renamed away, once drop is stored:
		// dir then names nothing, or a topic created again under the
		// name. Retention's renames after close's own flush leave it
		// dirty, and the flush a roll asked for may come after.
		if p.dropped.Load() {
			return fmt.Errorf("%s: %w", p, ErrClosed)
		}
		if err := p.topic.log.fs.SyncDir(p.dir); err != nil {
			if p.dropped.Load() {
				return fmt.Errorf("%s: %w", p, ErrClosed)
			}
			p.dirDirty.Store(true)
			return fmt.Errorf("sync %s: %w", p.dir, err)
		}
	}
	p.flushedTo.Store(end)
	p.lastFlush.Store(p.topic.log.now().UnixMilli())
	return nil
}

// needsFlush reports whether flush.ms has passed since the last flush with
// records still unflushed.
func (p *Partition) needsFlush(now time.Time, cfg Config) bool {
	if cfg.FlushMs < 0 || p.flushedTo.Load() >= p.end.Load() && !p.dirDirty.Load() {
		return false
	}
	return now.UnixMilli()-p.lastFlush.Load() >= cfg.FlushMs
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset   record.Offset `json:"base_offset"`
	Bytes        int64         `json:"bytes"`
	MaxTimestamp int64         `json:"max_timestamp"` // -1 when no record carries one
}

// Segments describes the partition's segments, oldest first.
func (p *Partition) Segments() ([]SegmentInfo, error) {
	segs := p.segments()
	out := make([]SegmentInfo, 0, len(segs))
	for _, s := range segs {
		if !s.acquire() {
			continue // deleted by retention meanwhile
		}
		ts, err := s.maxTimestamp()
		s.release()
		if err != nil {
			return nil, err
		}
		out = append(out, SegmentInfo{BaseOffset: s.base, Bytes: s.size.Load(), MaxTimestamp: ts})
	}
	return out, nil
}

// SegmentBases returns the base offsets of the segments without touching
// their indexes.
func (p *Partition) SegmentBases() []record.Offset {
	segs := p.segments()
	out := make([]record.Offset, len(segs))
	for i, s := range segs {
		out[i] = s.base
	}
	return out
}

// Size returns the bytes of all the partition's .log files.
func (p *Partition) Size() int64 {
	var n int64
	for _, s := range p.segments() {
		n += s.size.Load()
	}
	return n
}

// OffsetForTime returns the offset of the first record whose timestamp is at
// or after ts (ms), as Kafka's offsetsForTimes: the first segment whose max
// timestamp reaches ts, then its indexes, then a scan. When no record is
// that recent it returns the log end offset.
func (p *Partition) OffsetForTime(ts int64) (record.Offset, error) {
	segs := p.segments()
	for i, s := range segs {
		if !s.acquire() {
			continue // deleted under us: the next segment is newer anyway
		}
		limit := record.Offset(math.MaxInt64)
		if i+1 < len(segs) {
			limit = segs[i+1].base
		}
		off, found, err := p.findTimeIn(s, ts, limit)
		s.release()
		if err != nil || found {
			return off, err
		}
	}
	return p.EndOffset(), nil
}

// findTimeIn is findTime in s if s has a timestamp at or above ts; limit
// is the base offset of the segment after s.
func (p *Partition) findTimeIn(s *segment, ts int64, limit record.Offset) (record.Offset, bool, error) {
	mt, err := s.maxTimestamp()
	if err != nil || mt < ts {
		return 0, false, err
	}
	return s.findTime(ts, p.StartOffset(), limit)
}

// floorSegment returns the index of the last segment whose base offset is
// at or below off, or -1.
func floorSegment(segs []*segment, off record.Offset) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > off })
	return i - 1
}

// detachExpired removes from the partition the oldest segments that
// retention.bytes or retention.ms condemn, as Kafka's deleteOldSegments:
// only a prefix, and the active segment only after rolling a new one when
// it is condemned too. Readers stop finding them at once and the log start
// offset moves past them; their files are left for deleteSegments, which
// runs once the new log start is durable (see Log.EnforceRetention).
func (p *Partition) detachExpired(now time.Time) ([]*segment, error) {
	cfg := p.topic.Config()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.topic.log.opts.ReadOnly {
		return nil, nil
	}
	segs := p.segments()
	n := 0
	if cfg.RetentionBytes >= 0 {
		excess := p.Size() - cfg.RetentionBytes
		for n < len(segs) && excess-segs[n].size.Load() >= 0 {
			excess -= segs[n].size.Load()
			n++
		}
	}
	if cfg.RetentionMs >= 0 {
		for n < len(segs) {
			mt, err := segs[n].maxTimestamp()
			if err != nil {
				return nil, err
			}
			if mt < 0 {
				mt = segs[n].created.UnixMilli()
			}
			if now.UnixMilli()-mt <= cfg.RetentionMs {
				break
			}
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	if n == len(segs) {
		if segs[n-1].size.Load() == 0 {
			n-- // an empty active segment stays
			if n == 0 {
				return nil, nil
			}
		} else if err := p.rollLocked(p.EndOffset()); err != nil {
			return nil, err
		}
	}
	segs = p.segments()
	doomed := segs[:n]
	// The start first: a reader that checks an offset against it and then
	// looks in the segment list finds its segment in either list, never a
	// list whose first segment begins past an offset the start allowed.
	p.start.Store(int64(max(p.StartOffset(), segs[n].base)))
	p.setSegments(slices.Clone(segs[n:]))
	p.notify()
	return doomed, nil
}

// deleteSegments renames the files of segments detachExpired removed to
// *.deleted, as Kafka does, and unlinks them after delay; readers that
// hold a segment finish it. The renames are separate directory operations,
// so a crash may keep any subset of them: the caller has made the log
// start offset that hides all of them durable first.
func (p *Partition) deleteSegments(doomed []*segment, delay time.Duration) error {
	p.filesMu.RLock()
	defer p.filesMu.RUnlock()
	if p.isClosed() {
		// The paths may be a new partition's: the folder went with a
		// deleted topic, or (a Log.Close) the next open removes the files,
		// which lie below the log start the checkpoint already says.
		for _, s := range doomed {
			s.leavePaths() // out of the list, so close did not see them
			s.release()
		}
		return nil
	}
	var errs []error
	for _, s := range doomed {
		errs = append(errs, s.markDeleted())
		p.topic.log.logger.Info("deleted segment by retention", "partition", p.String(), "base", s.base, "bytes", s.size.Load())
		s.release()
		p.removeDeletedLater(s, delay, "remove deleted segment")
	}
	p.dirDirty.Store(true)
	return errors.Join(errs...)
}

// removeDeletedLater unlinks the *.deleted files of s, a segment of p that
// markDeleted renamed, after delay (file.delete.delay.ms, or during
// Log.Close), unless p's topic was deleted by then: the files went with
// its folder, and the names are those a topic created again under the
// name gives its own segments of the same base offsets when its
// retention deletes them, whose readers are promised the full delay.
// what says what failed in the warning logged when the unlink fails.
func (p *Partition) removeDeletedLater(s *segment, delay time.Duration, what string) {
	p.topic.log.afterDelay(delay, func() {
		p.filesMu.RLock()
		defer p.filesMu.RUnlock()
		if p.dropped.Load() {
			return
		}
		if err := s.removeDeletedFiles(); err != nil {
			p.topic.log.logger.Warn(what, "segment", s.logPath(), "err", err)
		}
	})
}

// drop marks p dropped, before its topic's delete renames its folder away:
// a delayed unlink that runs after waits for nothing and does nothing.
func (p *Partition) drop() {
	p.filesMu.Lock()
	defer p.filesMu.Unlock()
	p.dropped.Store(true)
}

// close flushes and closes the partition: the clean-shutdown close of every
// segment, after which the partition refuses appends and wakes waiters.
func (p *Partition) close() error {
	var errs []error
	// A dropped partition's files are about to be removed: flushing them,
	// or writing their view indexes, would be work for nothing, and with
	// the process out of files (a create that failed for it) it only
	// fails louder.
	keep := !p.topic.log.opts.ReadOnly && !p.dropped.Load()
	if keep {
		errs = append(errs, p.Sync())
	}
	p.filesMu.Lock()
	defer p.filesMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	for _, s := range p.segments() {
		if keep {
			s.views.closing(s)
		}
		errs = append(errs, s.close())
		// Readers may hold it still; the folder may go to a deleted
		// topic's rename, and its names to a topic created again.
		s.leavePaths()
	}
	p.notify()
	return errors.Join(errs...)
}

func (p *Partition) String() string { return layout.PartitionDirName(p.topic.name, p.id) }
