package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
)

// This file is Options.Follow: a read-only log of a data directory that a
// Kafka broker is still writing, kept up to date as the broker appends,
// rolls, deletes, cleans and truncates, without a lock and without writing
// a byte.
//
// A follower goroutine watches the data directory and every partition
// folder with inotify (and looks again every FollowPoll in case an event
// was missed) and refreshes the partitions that changed, under
// Partition.mu, publishing what it finds with the same atomics appends
// use:
//
//   - the active segment's new batches: its size moves to the end of its
//     last whole batch; bytes after it (a batch being written) are
//     pending, not corrupt;
//   - new segments (a roll): the old active one is sealed at its final
//     size and the new one added;
//   - segments gone from the front (retention's *.deleted renames): the
//     log start moves past them, and the log start checkpoint moves it
//     within a segment;
//   - a segment whose .log is another file now (the cleaner's
//     .cleaned/.swap replacement): the new file replaces it under the same
//     sequence number; readers of the old one finish the old file;
//   - a truncation (a leader change): the cut segment's readers get
//     ErrDeleted once they reach it, and the partition goes on with the
//     truncated segment opened afresh, so that no reader moves from the
//     old bytes into the new ones;
//   - the high watermark from replication-offset-checkpoint, which caps
//     ReadCommitted views (ReadUncommitted ones show all that is written).
//
// Every segment of a followed log is indexed in memory and read with
// pread, never through a mapping: the broker trims and truncates index and
// log files in place, and a mapped page past the end of a file is a
// SIGBUS.

// FollowPoll is how often a followed log looks at every partition's files
// even without an inotify event.
const FollowPoll = time.Second

// followMinGap is the least time between two refreshes of one partition:
// a busy broker writes many times a millisecond, and readers need not
// learn of each write alone.
const followMinGap = 20 * time.Millisecond

// memIndexRegrow is how much a followed segment's log grows before its
// in-memory index is extended (lookups scan forward from its last entry
// meanwhile).
const memIndexRegrow = 1 << 20

// follower is a followed log's watcher state.
type follower struct {
	l     *Log
	fd    int
	file  *os.File
	mu    sync.Mutex
	byWD  map[int]*Partition // partition folders, by watch descriptor
	dirWD int                // the data directory
	dirty map[*Partition]bool
	top   bool // the data directory's checkpoints changed
	wake  chan struct{}
}

// startFollow prepares every partition for following and starts the
// follower. It is called by Open for Options.Follow.
func (l *Log) startFollow() error {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("follow %s: inotify: %w", l.dir, err)
	}
	f := &follower{l: l, fd: fd, file: os.NewFile(uintptr(fd), "inotify"), byWD: map[int]*Partition{},
		dirty: map[*Partition]bool{}, wake: make(chan struct{}, 1)}
	const dirMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE | unix.IN_MODIFY
	if f.dirWD, err = unix.InotifyAddWatch(fd, l.dir, dirMask); err != nil {
		f.file.Close()
		return fmt.Errorf("follow %s: %w", l.dir, err)
	}
	const partMask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE | unix.IN_CLOSE_WRITE
	for _, t := range l.allTopics() {
		for _, p := range t.Partitions() {
			p.prepareFollow()
			wd, err := unix.InotifyAddWatch(fd, p.dir, partMask)
			if err != nil {
				f.file.Close()
				return fmt.Errorf("follow %s: %w", p.dir, err)
			}
			f.byWD[wd] = p
		}
	}
	l.refreshHighWatermarks()
	l.bg.Add(2)
	go f.read()
	go f.run()
	return nil
}

// prepareFollow makes every segment of p read with pread and indexed in
// memory, and reads the log start checkpoint's word on p.
func (p *Partition) prepareFollow() {
	p.hw.Store(-1)
	for _, s := range p.segments() {
		s.followed()
	}
}

// followed puts s on pread and an in-memory index, and records which
// file it reads (see sameFile).
func (s *segment) followed() {
	s.noMap.Store(true)
	s.idxMu.Lock()
	s.closeIndexHandlesLocked()
	if s.fallback == nil {
		s.fallback = &memIndex{}
	}
	s.idxMu.Unlock()
	if st, err := s.log.Stat(); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			s.ino = sys.Ino
		}
	}
}

// read turns inotify events into dirty partitions until the log closes.
func (f *follower) read() {
	defer f.l.bg.Done()
	go func() {
		<-f.l.stop
		f.file.Close() // ends a read in progress
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := f.file.Read(buf)
		if err != nil {
			return
		}
		f.mu.Lock()
		for b := buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			wd := int(int32(binary.NativeEndian.Uint32(b)))
			size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:16]))
			if size > len(b) {
				break
			}
			if wd == f.dirWD {
				f.top = true
			} else if p := f.byWD[wd]; p != nil {
				f.dirty[p] = true
			}
			b = b[size:]
		}
		f.mu.Unlock()
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// run refreshes the partitions the events name, and every partition each
// FollowPoll.
func (f *follower) run() {
	defer f.l.bg.Done()
	tick := time.NewTicker(FollowPoll)
	defer tick.Stop()
	for {
		all := false
		select {
		case <-f.l.stop:
			return
		case <-f.wake:
		case <-tick.C:
			all = true
		}
		f.mu.Lock()
		dirty, top := f.dirty, f.top || all
		f.dirty, f.top = map[*Partition]bool{}, false
		if all {
			for _, p := range f.byWD {
				dirty[p] = true
			}
		}
		f.mu.Unlock()
		if top {
			f.l.refreshHighWatermarks()
		}
		for p := range dirty {
			if err := p.refresh(); err != nil && !errors.Is(err, ErrClosed) {
				f.l.logger.Warn("following a partition", "partition", p.String(), "err", err)
			}
		}
		select {
		case <-f.l.stop:
			return
		case <-time.After(followMinGap):
		}
	}
}

// refreshHighWatermarks reads the broker's replication-offset-checkpoint
// and log-start-offset-checkpoint, and moves each partition's high
// watermark and log start.
func (l *Log) refreshHighWatermarks() {
	hws, err := recovery.ReadCheckpoint(l.fs, filepath.Join(l.dir, layout.ReplicationOffsetFile))
	if err != nil {
		l.logger.Warn("ignoring unreadable high watermarks", "file", layout.ReplicationOffsetFile, "err", err)
		return
	}
	starts, err := recovery.ReadCheckpoint(l.fs, filepath.Join(l.dir, layout.LogStartFile))
	if err != nil {
		starts = nil
	}
	for _, t := range l.allTopics() {
		for _, p := range t.Partitions() {
			tp := recovery.TopicPartition{Topic: t.name, Partition: p.id}
			changed := false
			if hw, ok := hws[tp]; ok && int64(hw) != p.hw.Load() {
				p.hw.Store(int64(hw))
				changed = true
			}
			if start, ok := starts[tp]; ok {
				p.mu.Lock()
				if start > p.StartOffset() && start <= p.EndOffset() {
					p.start.Store(int64(start))
					changed = true
				}
				p.mu.Unlock()
			}
			if changed {
				p.notify()
			}
		}
	}
}

// HighWatermark returns the broker's high watermark of a followed
// partition (from replication-offset-checkpoint), or -1 when it is not
// followed or the broker has not recorded one.
func (p *Partition) HighWatermark() record.Offset { return record.Offset(p.hw.Load()) }

// followLimit is what caps a ReadCommitted view of a followed partition
// besides the LSO: its high watermark, the log start when the broker has
// recorded none yet; ok false when the log is not followed.
func (p *Partition) followLimit() (record.Offset, bool) {
	if !p.topic.log.opts.Follow {
		return 0, false
	}
	if hw := p.hw.Load(); hw >= 0 {
		return record.Offset(hw), true
	}
	return p.StartOffset(), true
}

// logFile is one .log of a partition folder as the follower finds it.
type logFile struct {
	base record.Offset
	size int64
	ino  uint64
	// swapping: the base has no .log but a .log.swap, the cleaner's copy
	// between the renames of its swap (the old .log is .deleted already,
	// the copy becomes the .log next). The segment is still there: not
	// deleted, not cut, not replaced yet (ino is 0).
	swapping bool
}

// listLogs returns the partition folder's .log files in base order.
func (p *Partition) listLogs() ([]logFile, error) {
	entries, err := p.topic.log.fs.ReadDir(p.dir)
	if err != nil {
		return nil, err
	}
	var out []logFile
	seen := map[record.Offset]bool{}
	for _, e := range entries {
		base, suffix, ok := layout.ParseSegmentFileName(e.Name())
		if !ok || suffix != layout.LogSuffix && suffix != layout.LogSuffix+layout.SwapSuffix || seen[base] {
			continue
		}
		seen[base] = true
		st, swapping, ok := p.statLog(base)
		if !ok {
			continue // deleted since the listing
		}
		lf := logFile{base: base, size: st.Size(), swapping: swapping}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && !swapping {
			lf.ino = sys.Ino
		}
		out = append(out, lf)
	}
	slices.SortFunc(out, func(a, b logFile) int { return int(a.base - b.base) })
	return out, nil
}

// statLog stats the .log of the segment at base, or, between the renames
// of a cleaner's swap, its .log.swap (swapping). A swap renames the .log
// away and then the .log.swap into its place, so one of the two is there
// at any moment; but a look at each in turn can miss both, when the
// second rename falls between them, and it looks again. Neither there
// after that: the segment was deleted.
func (p *Partition) statLog(base record.Offset) (st os.FileInfo, swapping, ok bool) {
	name := filepath.Join(p.dir, layout.SegmentFileName(base, layout.LogSuffix))
	for range 3 {
		if st, err := p.topic.log.fs.Stat(name); err == nil {
			return st, false, true
		}
		if st, err := p.topic.log.fs.Stat(name + layout.SwapSuffix); err == nil {
			return st, true, true
		}
	}
	return nil, false, false
}

// refresh brings a followed partition up to date with its folder.
func (p *Partition) refresh() error {
	p.followMu.Lock()
	defer p.followMu.Unlock()
	return p.catchUp()
}

// pauseFollow brings a followed partition up to date with its folder and
// keeps the follower from changing it until resume is called, for Check:
// a follower learns of the broker's writes a little after they are made
// (up to followMinGap, or FollowPoll for a missed event), and meanwhile
// the broker's files hold bytes and index entries, a cleaner's copy or a
// truncation, that the partition does not show yet. Checked against those
// as they are now, a follower that is merely behind would be called
// corrupt; and one that refreshed during the check would show Check two
// states. err is what the refresh met (such as a bad batch the follower
// stops before). On a log that is not followed it does nothing.
func (p *Partition) pauseFollow() (resume func(), err error) {
	if !p.topic.log.opts.Follow {
		return func() {}, nil
	}
	p.followMu.Lock()
	if err = p.catchUp(); errors.Is(err, ErrClosed) {
		err = nil
	}
	return p.followMu.Unlock, err
}

// catchUp is refresh; the caller holds p.followMu.
func (p *Partition) catchUp() error {
	files, err := p.listLogs()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	onDisk := map[record.Offset]logFile{}
	for _, f := range files {
		onDisk[f.base] = f
	}
	segs := slices.Clone(p.segments()) // published lists are never changed
	changed := false
	cfg := p.topic.segmentConfig()

	// Segments gone from the front: deleted by retention.
	n := 0
	for n < len(segs)-1 {
		if _, ok := onDisk[segs[n].base]; ok {
			break
		}
		n++
	}
	if n > 0 {
		p.start.Store(int64(max(p.StartOffset(), segs[n].base)))
		for _, s := range segs[:n] {
			s.release()
		}
		segs = slices.Clone(segs[n:])
		changed = true
	}

	// Segments gone from the tail (a truncation removed them), or
	// replaced by other files (the cleaner's swap, or a truncation that
	// recreated one).
	var cutAt = -1
	for i := 0; i < len(segs); i++ {
		s := segs[i]
		f, ok := onDisk[s.base]
		switch {
		case !ok && i > 0:
			cutAt = i // later segments are gone too, or follow it
		case ok && f.ino != 0 && s.ino != 0 && f.ino != s.ino:
			ns, err := p.openFollowed(s.base, cfg)
			if err != nil {
				return err
			}
			ns.seq, ns.layout = s.seq, s.layout
			if i == len(segs)-1 {
				ns.frozen.Store(false)
			}
			p.rewrites.Add(1)
			segs[i] = ns
			s.release() // its readers finish the old file, renamed *.deleted
			p.txn.reset()
			changed = true
			p.topic.log.logger.Info("followed a replaced segment", "partition", p.String(), "base", s.base)
		}
		if cutAt >= 0 {
			break
		}
	}
	if cutAt >= 0 {
		p.rewrites.Add(1)
		for _, s := range segs[cutAt:] {
			s.cutAt(0)
			s.release()
		}
		segs = slices.Clone(segs[:cutAt])
		changed = true
		p.txn.reset()
	}

	// The last segment we have: grown, truncated, or rolled.
	last := segs[len(segs)-1]
	if f, ok := onDisk[last.base]; ok && !f.swapping {
		size := record.Position(last.size.Load())
		if same := last.unchanged(record.Position(f.size)); same >= 0 || cutAt >= 0 {
			if same < 0 {
				same = min(size, record.Position(f.size))
			}
			// Truncated: the segment afresh under the same sequence
			// number; readers of the old one stop at the cut (cutErr)
			// and never move on to the new one, which has the same base.
			ns, err := p.openFollowed(last.base, cfg)
			if err != nil {
				return err
			}
			ns.seq, ns.layout = last.seq, last.layout
			ns.frozen.Store(false)
			p.rewrites.Add(1)
			last.cutAt(same)
			last.release()
			segs[len(segs)-1] = ns
			last = ns
			p.txn.reset()
			changed = true
			p.topic.log.logger.Info("followed a truncation", "partition", p.String(), "base", ns.base)
		}
	}
	// New segments after it: rolls.
	for _, f := range files {
		if f.base <= last.base || f.swapping {
			continue
		}
		if err := p.grow(last); err != nil {
			return err
		}
		last.frozen.Store(true)
		ns, err := p.openFollowed(f.base, cfg)
		if err != nil {
			return err
		}
		ns.seq, ns.layout = last.seq+1, last.layout
		ns.frozen.Store(false)
		segs = append(segs, ns)
		last = ns
		changed = true
	}
	if changed {
		p.setSegments(segs)
	}
	grew, err := p.growEnd(last)
	if changed || grew {
		p.notify()
	}
	return err
}

// openFollowed opens a segment of a followed partition: its complete
// batches, read with pread and indexed in memory.
func (p *Partition) openFollowed(base record.Offset, cfg *segmentConfig) (*segment, error) {
	s, err := openSegment(p.topic.log.fs, p.dir, base, 0, -1, cfg, true, p.topic.log.logger)
	if err != nil {
		return nil, err
	}
	s.followed()
	s.frozen.Store(true)
	if err := p.grow(s); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

// growEnd publishes the new whole batches of the active segment s and
// moves the log end offset after them.
func (p *Partition) growEnd(s *segment) (bool, error) {
	before := s.size.Load()
	err := p.grow(s)
	if s.size.Load() == before && p.EndOffset() == max(s.followNext, s.base) {
		return false, err
	}
	p.end.Store(int64(max(s.followNext, s.base)))
	p.lastAppend.Store(time.Now().UnixNano())
	return true, err
}

// grow publishes s's whole batches past its size, found by a walk of their
// headers; a batch that runs past the end of the file is being written and
// is left for next time. It keeps s's max timestamp and where its last
// batch ends.
func (p *Partition) grow(s *segment) error {
	size := record.Position(s.size.Load())
	st, err := s.log.Stat()
	if err != nil {
		return err
	}
	if !s.followOK {
		s.followNext, s.followOK = p.nextOffsetOf(s), true
	}
	if record.Position(st.Size()) <= size {
		return nil
	}
	if err := s.loadTimestamps(); err != nil { // before it changes, so that what it finds is not newer than ours
		return err
	}
	sc := record.NewScanner(s.log, size, record.Position(st.Size()), record.ScanOptions{HeadersOnly: true, ReadAhead: lookupReadAhead, MaxReadAhead: readerMaxReadAhead})
	end, next := size, s.followNext
	for sc.Next() {
		b := sc.Batch()
		if err := b.CheckFollows(s.base, next, math.MaxInt64); err != nil {
			s.publish(end, next)
			return fmt.Errorf("not following past a batch that cannot follow the one before: %w", record.WithFile(err, s.logPath()))
		}
		if b.MaxTimestamp > s.maxTS.Load() {
			s.maxTSOffset.Store(int64(b.LastOffset()))
			s.maxTS.Store(b.MaxTimestamp)
		}
		end, next = sc.Pos(), b.NextOffset()
		s.sign(b, end)
	}
	s.publish(end, next)
	if err := sc.Err(); err != nil && !errors.Is(err, record.ErrTruncated) {
		return fmt.Errorf("not following past a bad batch: %w", record.WithFile(err, s.logPath()))
	}
	return nil
}

// batchSig is where a batch of a followed segment was and its CRC: if
// it is still there, the log before its end is what it was.
type batchSig struct {
	pos, end record.Position
	crc      uint32
}

// A followed segment keeps the signatures of its last sigRecent
// batches, and of one batch every sigEvery bytes before them: a
// truncation is found to the batch when it cuts one of the recent ones, as
// a leader change cuts what lies above the high watermark.
const (
	sigRecent = 4096
	sigEvery  = 64 << 10
)

// batchSigs are a followed segment's signatures, oldest first.
type batchSigs struct {
	sparse []batchSig
	recent []batchSig
}

// sign records the signature of batch b of s, which ends at end.
func (s *segment) sign(b *record.Batch, end record.Position) {
	g := &s.followSigs
	g.recent = append(g.recent, batchSig{pos: b.Pos, end: end, crc: b.CRC})
	if len(g.recent) <= sigRecent {
		return
	}
	oldest := g.recent[0]
	if n := len(g.sparse); n == 0 || oldest.pos-g.sparse[n-1].pos >= sigEvery {
		g.sparse = append(g.sparse, oldest)
	}
	g.recent = append(g.recent[:0], g.recent[1:]...)
}

// unchanged returns how much of s's published log is still what it was:
// all of it (-1) when its last batch is where it was with its CRC and the
// file is no shorter, else the end of the last signed batch that still is,
// or 0.
func (s *segment) unchanged(fileSize record.Position) record.Position {
	size := record.Position(s.size.Load())
	g := &s.followSigs
	if len(g.recent) == 0 {
		if fileSize < size {
			return 0
		}
		return -1
	}
	if fileSize >= size && s.sigHolds(g.recent[len(g.recent)-1]) {
		return -1 // the common case: one pread
	}
	all := append(slices.Clone(g.sparse), g.recent...)
	for i := len(all) - 1; i >= 0; i-- {
		if sig := all[i]; sig.end <= fileSize && s.sigHolds(sig) {
			return sig.end
		}
	}
	return 0
}

// sigHolds reports whether the batch signed by sig is still there.
func (s *segment) sigHolds(sig batchSig) bool {
	var hdr [record.HeaderSize]byte
	if _, err := s.log.ReadAt(hdr[:], int64(sig.pos)); err != nil {
		return false
	}
	h, err := record.ParseHeader(hdr[:], sig.pos)
	return err == nil && h.CRC == sig.crc && sig.pos+record.Position(h.Size()) == sig.end
}

// publish stores a followed segment's new size and where its batches end.
func (s *segment) publish(size record.Position, next record.Offset) {
	s.followNext = next
	s.size.Store(int64(size))
}

// nextOffsetOf returns where the batches of s end, by a walk of its
// headers from its last in-memory index entry, signing them (see
// unchanged).
func (p *Partition) nextOffsetOf(s *segment) record.Offset {
	m, err := s.memIndex()
	from := record.Position(0)
	if err == nil && len(m.entries) > 0 {
		from = m.entries[len(m.entries)-1].pos
	}
	sc := record.NewScanner(s.log, from, record.Position(s.size.Load()), record.ScanOptions{HeadersOnly: true})
	next := s.base
	for sc.Next() {
		next = sc.Batch().NextOffset()
		s.sign(sc.Batch(), sc.Pos())
	}
	return next
}

// cutAt says that a followed broker truncated s at pos: the file holds
// other bytes from there on, and readers get cutErr.
func (s *segment) cutAt(pos record.Position) { s.cut.Store(int64(pos) + 1) }

// isCut reports whether s was cut at or before pos.
func (s *segment) isCut(pos record.Position) bool {
	c := s.cut.Load()
	return c > 0 && pos >= record.Position(c-1)
}

// wasCut reports whether s was cut anywhere.
func (s *segment) wasCut() bool { return s.cut.Load() > 0 }

// cutErr is what a reader gets past the cut of a segment a followed
// broker truncated: the partition holds other records there now.
func (s *segment) cutErr() error {
	return fmt.Errorf("%s: the broker truncated the segment: %w", filepath.Base(s.logPath()), ErrDeleted)
}

// swapCut replaces segs[i], which a followed broker truncated, by the
// segment the partition went on with, if the view has shown nothing of
// segs[i] past the cut: the bytes before the cut are the same in both. A
// ReadCommitted view, capped at the high watermark, is never past a
// truncation of records above it. It reports whether it did.
func (v *View) swapCut(i int) bool {
	old := v.segs[i]
	c := old.cut.Load() - 1
	if c <= 0 || v.reach[i] > record.Position(c) {
		return false
	}
	for _, n := range v.p.segments() {
		if n.base != old.base || n == old || n.seq != old.seq || n.wasCut() {
			continue
		}
		if !n.acquire() {
			return false
		}
		old.release()
		v.segs[i], v.idx[i], v.totals[i], v.final[i] = n, n.views.get(n, v.format), -1, nil
		if v.scSeg == i {
			v.scOK, v.scSeg = false, -1
		}
		if v.chunkSeg == i {
			v.chunk, v.chunkSeg = v.chunk[:0], -1
		}
		v.limitSeg = -1
		return true
	}
	return false
}

// hwEnd returns the position in s (whose log holds size bytes) of the
// first batch at or past the high watermark hw, remembered for the next
// call with the same hw.
func (s *segment) hwEnd(p *Partition, hw record.Offset, size record.Position) (record.Position, error) {
	switch {
	case hw >= p.segmentLimitOf(s):
		return size, nil
	case hw <= s.base:
		return 0, nil
	}
	if m := s.hwMemo.Load(); m != nil && m[0] == int64(hw) && m[1] <= int64(size) {
		return record.Position(m[1]), nil
	}
	pos, err := s.positionOf(hw, size)
	if err != nil {
		return 0, err
	}
	if pos < size {
		s.hwMemo.Store(&[2]int64{int64(hw), int64(pos)})
	}
	return pos, nil
}

// reset forgets the replay of producer state, to be done again from the
// latest snapshot: after a truncation or a cleaner's replacement.
func (t *txnState) reset() {
	t.mu.Lock()
	t.loaded = false
	t.mu.Unlock()
}
