package recovery

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// scanReadAhead is how much of a .log recovery reads at a time: as cat
// does, small enough that the window is still in the core's L2 cache when
// the CRC pass reads it back (measured: 1 MiB windows were no faster and
// often slower; the window grows for a larger batch).
const scanReadAhead = 128 << 10

// tmpSuffix names the index files a rebuild writes before renaming them
// over the real ones: "00000000000000000000.index.tmp". Loading removes any
// such file a crash left behind.
const tmpSuffix = ".tmp"

// IndexConfig is what index rebuilding needs from the topic's settings.
type IndexConfig struct {
	IndexBytes    int64 // segment.index.bytes; 0 means index.DefaultMaxBytes
	IndexInterval int64 // index.interval.bytes
}

// SegmentResult is what recovering (or rebuilding the indexes of) one
// segment found and did.
type SegmentResult struct {
	Base       record.Offset
	Size       record.Position // length of the .log before recovery
	ValidBytes record.Position // length of its valid prefix
	// Truncated is how many bytes were cut from the end of the .log; on a
	// read-only recovery, how many would be.
	Truncated  int64
	NextOffset record.Offset // offset after the last valid batch, or Base when there is none
	Batches    int
	// Reason says why the scan stopped before the end of the file (a
	// *record.CorruptError naming the file and position), or is nil.
	Reason error
	// IndexesKept says the segment's index files kept the rule against
	// every batch (index.Verifier, as a sealed segment's) and were left as
	// they are; on a read-only recovery, that they may be used.
	IndexesKept bool
	// Bad lists the ranges of invalid bytes the salvage scan found, in
	// order: after each, the scan resynchronised on the next batch that
	// passes its checks and may follow the one before (record.Resync).
	// Recovery cuts them out (the last, when it reaches the end of the
	// file, is cut off) and keeps each aside in a file beside the .log
	// (layout.CutFileName). Empty when the segment is whole.
	Bad []BadRange
	// FirstBase is the base offset of the batch at position 0 when that
	// batch is intact (size, magic, CRC-32C), whatever its offsets; -1
	// otherwise. A segment whose FirstBase contradicts its name was
	// copied or renamed: recovery sets it aside (see the package doc).
	FirstBase record.Offset
}

// BadRange is a range of a .log that holds no valid batch.
type BadRange struct {
	From, To record.Position
	// LostFrom is where the batch before the range ended (the segment's
	// base when none did); LostTo the base offset of the batch after it,
	// or -1 when the range ends the file. The offsets in [LostFrom,
	// LostTo) are the ones the range may have held.
	LostFrom, LostTo record.Offset
	Reason           error // the rule the first invalid byte broke
	batchesBefore    int   // valid batches before the range
	// Aside is the file the range's bytes were copied to before the cut,
	// or "" (read-only, not cut, or all zero bytes).
	Aside string
}

// Tail says the range ends the file.
func (r *BadRange) Tail() bool { return r.LostTo < 0 }

// RecoverSegment is Kafka's LogSegment.recover: it walks the batches of a
// .log checking each one's size, magic, CRC-32C and offsets (each batch's
// base offset at or above its segment's base and above the previous
// batch's last offset, its last offset within a relative offset of the
// base), cuts the file at the first invalid byte and fsyncs the cut, and
// rebuilds both indexes from what remains, ending the time index with the
// segment's max timestamp. The indexes are written to *.tmp files and
// renamed over the old ones, so a crash leaves either. With readOnly it
// only scans and reports.
//
// A segment whose first invalid batch is a well-formed legacy message
// (magic 0 or 1, which logfs does not read) is not cut: the error wraps
// ErrLegacyFormat.
func RecoverSegment(fs vfs.FS, dir string, base record.Offset, cfg IndexConfig, readOnly bool) (SegmentResult, error) {
	return recoverSegment(fs, dir, base, cfg, readOnly, nil)
}

// recoverSegment is RecoverSegment with a hook: beforeCut, if not nil,
// runs when the scan found an invalid tail, before the file is cut (on a
// read-only recovery, instead). LoadPartition drops the later segments
// there, so that a crash between the two steps never leaves a cut segment
// followed by segments that continue past the hole.
func recoverSegment(fs vfs.FS, dir string, base record.Offset, cfg IndexConfig, readOnly bool, beforeCut func(*SegmentResult) error) (SegmentResult, error) {
	p, err := scanPending(fs, dir, base, cfg, readOnly)
	if err != nil {
		return p.res, err
	}
	return p.commit(beforeCut)
}

// pendingSegment is a segment recovery has scanned but not yet cut or
// given its new indexes: the first half of RecoverSegment, which has no
// effect on the segment's files, so that LoadPartition can scan the next
// segments while it decides about this one.
type pendingSegment struct {
	fs       vfs.FS
	dir      string
	readOnly bool
	f        vfs.File
	b        *indexBuilder // nil when read-only
	// verify checks the segment's index files as they are against the
	// batches scanned (nil when they are missing or break a structural
	// rule): files that keep the rule are kept.
	verify *index.Verifier
	res    SegmentResult
	cfg    IndexConfig
	// stale says the index builder's files no longer match the .log
	// (ranges were cut out of it): commit rebuilds them instead.
	stale bool
}

// scanPending opens a segment's .log, walks its batches into res and an
// index builder (writing *.tmp index files), and stops at the first
// invalid byte. The caller commits or closes the result; on error it is
// closed already.
func scanPending(fs vfs.FS, dir string, base record.Offset, cfg IndexConfig, readOnly bool) (*pendingSegment, error) {
	p := &pendingSegment{fs: fs, dir: dir, readOnly: readOnly, cfg: cfg, res: SegmentResult{Base: base, NextOffset: base, FirstBase: -1}}
	logPath := layout.SegmentPath(dir, base, layout.LogSuffix)
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	var err error
	if p.f, err = fs.OpenFile(logPath, flag, 0); err != nil {
		return p, err
	}
	fail := func(err error) (*pendingSegment, error) {
		p.close()
		return p, err
	}
	st, err := p.f.Stat()
	if err != nil {
		return fail(err)
	}
	p.res.Size = record.Position(st.Size())
	if !readOnly {
		if p.b, err = newIndexBuilder(fs, dir, base, cfg); err != nil {
			return fail(err)
		}
	}
	if p.verify, err = existingIndexes(fs, dir, base, p.res.Size); err != nil {
		return fail(err)
	}
	if err := scanSegment(p.f, logPath, base, p.res.Size, false, true, p.b, p.verify, &p.res); err != nil {
		return fail(err)
	}
	if err := refuseLegacy(p.f, logPath, &p.res); err != nil {
		return fail(err)
	}
	p.res.FirstBase = firstBase(p.f, p.res.Size)
	return p, nil
}

// tailFrom makes bad range k the tail: the segment is cut at its start
// and everything after it is kept aside with it (LoadPartition's rule for
// damage above the recovery point: what follows was never durable).
func (p *pendingSegment) tailFrom(k int) {
	res := &p.res
	if k >= len(res.Bad) {
		return
	}
	r := res.Bad[k]
	if !r.Tail() {
		p.stale = true // the builder indexed batches that go
	}
	r.To, r.LostTo = res.Size, -1
	res.Bad = append(res.Bad[:k], r)
	res.NextOffset = r.LostFrom
	res.Batches = r.batchesBefore
}

// commit is the second half of RecoverSegment: it keeps each bad range
// aside in a file beside the .log (not when all its bytes are zero), then
// cuts the ranges out of the .log (after beforeCut): a tail by a
// truncate, ranges inside by writing the valid bytes to a *.tmp file,
// fsyncing it and renaming it over the .log. The directory is fsynced
// before the .log changes, so the bytes kept aside are durable first. The
// new indexes are renamed into place last. It closes p.
func (p *pendingSegment) commit(beforeCut func(*SegmentResult) error) (SegmentResult, error) {
	defer p.close()
	res := &p.res
	logPath := layout.SegmentPath(p.dir, res.Base, layout.LogSuffix)
	res.Truncated = 0
	for _, r := range res.Bad {
		res.Truncated += int64(r.To - r.From)
	}
	res.ValidBytes = res.Size - record.Position(res.Truncated)
	if p.readOnly && len(res.Bad) > 0 {
		// Nothing is cut: a tail is hidden (Segment.Size), ranges inside
		// stay for the reads that reach them to report.
		res.ValidBytes = res.Size
		if last := res.Bad[len(res.Bad)-1]; last.Tail() {
			res.ValidBytes = last.From
		}
	}
	if res.Truncated > 0 {
		if beforeCut != nil {
			if err := beforeCut(res); err != nil {
				return *res, err
			}
		}
		if !p.readOnly {
			if err := p.cut(logPath); err != nil {
				return *res, fmt.Errorf("cut %s: %w", logPath, err)
			}
			// The sidecar of rendered positions may describe the bytes cut.
			if err := p.fs.Remove(layout.SegmentPath(p.dir, res.Base, layout.ViewIndexSuffix)); err != nil && !isNotExist(err) {
				return *res, err
			}
		}
	}
	res.IndexesKept = res.Truncated == 0 && p.verify != nil && len(p.verify.Finish(true, 1)) == 0
	if p.b != nil {
		if res.IndexesKept {
			// The files on disk keep the rule against every batch: they
			// are left as they are, as Kafka's valid files must be.
			p.b.abort()
			p.b = nil
			return *res, nil
		}
		if p.stale {
			// Batches moved or went: index the new file.
			p.b.abort()
			p.b = nil
			if _, err := RebuildIndexes(p.fs, p.dir, res.Base, res.ValidBytes, p.cfg); err != nil {
				return *res, err
			}
			return *res, nil
		}
		if err := p.b.finish(); err != nil {
			return *res, err
		}
	}
	return *res, nil
}

// cut keeps the bad ranges aside and removes them from the .log.
func (p *pendingSegment) cut(logPath string) error {
	res := &p.res
	for i := range res.Bad {
		if err := p.keepAside(&res.Bad[i]); err != nil { // durable before the .log changes
			return err
		}
	}
	if len(res.Bad) == 1 && res.Bad[0].Tail() {
		if err := p.f.Truncate(int64(res.Bad[0].From)); err != nil {
			return err
		}
		return p.f.Sync()
	}
	// The rest is written to NAME.log.tmp and renamed over the .log.
	err := vfs.WriteFileAtomicFrom(p.fs, logPath, func(out vfs.File) error {
		var w record.Position
		from := record.Position(0)
		for _, r := range res.Bad {
			n, err := copyAt(out, w, p.f, from, r.From)
			if err != nil {
				return err
			}
			w, from = w+n, r.To
		}
		_, err := copyAt(out, w, p.f, from, res.Size)
		return err
	})
	if err != nil {
		return err
	}
	p.stale = true
	return nil
}

// keepAside copies the bytes of r to layout.CutFileName beside the .log, or
// that name with .1, .2, … when an earlier recovery kept bytes under it
// (vfs.WriteFileAtomicFrom: *.tmp, fsync, rename, fsync the folder),
// unless they are all zero: a preallocated or zero-filled tail holds
// nothing to keep.
func (p *pendingSegment) keepAside(r *BadRange) error {
	zero, err := allZero(p.f, r.From, r.To)
	if err != nil || zero {
		return err
	}
	final, err := freeName(p.fs, filepath.Join(p.dir, layout.CutFileName(p.res.Base, r.From, r.To)))
	if err != nil {
		return err
	}
	err = vfs.WriteFileAtomicFrom(p.fs, final, func(out vfs.File) error {
		_, err := copyAt(out, 0, p.f, r.From, r.To)
		return err
	})
	if err != nil {
		return err
	}
	r.Aside = final
	return nil
}

// copyChunk is how much keepAside and cut copy at a time.
const copyChunk = 1 << 20

// copyAt copies [from, to) of src to dst at at, returning the bytes
// written.
func copyAt(dst vfs.File, at record.Position, src vfs.File, from, to record.Position) (record.Position, error) {
	buf := make([]byte, min(int64(copyChunk), int64(to-from)))
	var n record.Position
	for pos := from; pos < to; {
		k := min(int64(len(buf)), int64(to-pos))
		if _, err := src.ReadAt(buf[:k], int64(pos)); err != nil && !(errors.Is(err, io.EOF) && k == 0) {
			return n, err
		}
		if _, err := dst.WriteAt(buf[:k], int64(at+n)); err != nil {
			return n, err
		}
		pos += record.Position(k)
		n += record.Position(k)
	}
	return n, nil
}

// allZero reports whether [from, to) of f holds only zero bytes.
func allZero(f vfs.File, from, to record.Position) (bool, error) {
	buf := make([]byte, min(int64(copyChunk), int64(to-from)))
	for pos := from; pos < to; {
		// A hole reads as zeros: skip it where the file system says
		// where data is (SEEK_DATA), so that a sparse tail of gigabytes
		// costs a system call, not a read of every byte.
		if d, ok := vfs.NextData(f, int64(pos)); ok {
			if d >= int64(to) {
				return true, nil
			}
			pos = record.Position(d)
		}
		k := min(int64(len(buf)), int64(to-pos))
		if _, err := f.ReadAt(buf[:k], int64(pos)); err != nil {
			return false, err
		}
		if !bytes.Equal(buf[:k], zeroChunk[:k]) {
			return false, nil
		}
		pos += record.Position(k)
	}
	return true, nil
}

// zeroChunk is what allZero compares each chunk it reads with.
var zeroChunk [copyChunk]byte

// firstBase returns the base offset of the batch at position 0 of f when
// it is intact (record.ParseBatch), else -1.
func firstBase(f vfs.File, size record.Position) record.Offset {
	var head [record.HeaderSize]byte
	if size < record.HeaderSize {
		return -1
	}
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return -1
	}
	h, err := record.ParseHeader(head[:], 0)
	if err != nil || h.Size() > int64(size) || h.Size() > record.DefaultMaxBatch {
		return -1
	}
	b := make([]byte, h.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return -1
	}
	if _, err := record.ParseBatch(b, 0); err != nil {
		return -1
	}
	return h.BaseOffset
}

// existingIndexes returns a verifier of a segment's index files as they
// are, or nil when either is missing or breaks a structural rule: those
// are rebuilt in any case.
func existingIndexes(fs vfs.FS, dir string, base record.Offset, size record.Position) (*index.Verifier, error) {
	offPath := layout.SegmentPath(dir, base, layout.IndexSuffix)
	timePath := layout.SegmentPath(dir, base, layout.TimeIndexSuffix)
	offData, err := vfs.ReadFileData(fs, offPath, index.OffsetEntrySize)
	if err != nil {
		if isNotExist(err) || vfs.IsPlanted(err) { // a planted link: rebuilt in its place
			return nil, nil
		}
		return nil, err
	}
	timeData, err := vfs.ReadFileData(fs, timePath, index.TimeEntrySize)
	if err != nil {
		if isNotExist(err) || vfs.IsPlanted(err) {
			return nil, nil
		}
		return nil, err
	}
	off, err := index.DecodeOffsetEntries(offPath, offData, base, size)
	if err != nil {
		return nil, nil
	}
	tim, err := index.DecodeTimeEntries(timePath, timeData, base, off)
	if err != nil {
		return nil, nil
	}
	return index.NewVerifier(offPath, off, timePath, tim, 0), nil
}

// close releases the file and removes the *.tmp indexes that commit did
// not rename into place. It is idempotent.
func (p *pendingSegment) close() {
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
	if p.b != nil {
		p.b.abort()
		p.b = nil
	}
}

// RebuildIndexes rewrites a segment's two indexes from the first size
// bytes of its .log without changing the .log: the repair of a segment
// below the recovery point (not scanned at open) whose index files are
// missing or break a rule. It reads batch headers only. An invalid header
// ends the indexes there and is returned in Reason, not as an error: the
// batch stays in place for reads to report and for `logfs check --repair`
// to cut. The files are written as *.tmp, fsynced and renamed over the old
// ones; the caller syncs the directory.
func RebuildIndexes(fs vfs.FS, dir string, base record.Offset, size record.Position, cfg IndexConfig) (SegmentResult, error) {
	res := SegmentResult{Base: base, NextOffset: base, Size: size}
	logPath := layout.SegmentPath(dir, base, layout.LogSuffix)
	f, err := fs.OpenFile(logPath, os.O_RDONLY, 0)
	if err != nil {
		return res, err
	}
	defer f.Close()
	b, err := newIndexBuilder(fs, dir, base, cfg)
	if err != nil {
		return res, err
	}
	defer b.abort()
	if err := scanSegment(f, logPath, base, size, true, false, b, nil, &res); err != nil {
		return res, err
	}
	return res, b.finish()
}

// scanSegment walks the batches of [0, size) into res and, if b is not
// nil, into the index builder, and if verify is not nil, into it. Without
// salvage it stops at the first invalid batch and records why in
// res.Reason. With salvage it goes on: it looks for the next position
// where a batch passes its checks and may follow the last valid one
// (record.Resync), lists the bytes between in res.Bad and scans on from
// there. res.ValidBytes is where the first invalid byte is (the file's
// size when there is none). Only I/O errors are returned.
func scanSegment(f vfs.File, logPath string, base record.Offset, size record.Position, headersOnly, salvage bool, b *indexBuilder, verify *index.Verifier, res *SegmentResult) error {
	next := base
	pos := record.Position(0)
	res.ValidBytes = 0
	for {
		reason, end, err := scanRun(f, logPath, base, pos, size, headersOnly, &next, b, verify, res)
		if err != nil {
			return err
		}
		if reason == nil {
			if len(res.Bad) == 0 {
				res.ValidBytes = end
			}
			break
		}
		if len(res.Bad) == 0 {
			res.Reason = reason
			res.ValidBytes = end
		}
		if !salvage {
			break
		}
		verify = nil // indexes are rebuilt in any case
		r := BadRange{From: end, To: size, LostFrom: next, LostTo: -1, Reason: reason, batchesBefore: res.Batches}
		// A segment holds at most MaxInt32 bytes (segment.bytes, as in
		// Kafka): no batch of it starts or ends past that, however large
		// the file (a sparse tail of gigabytes).
		q, ok, err := record.Resync(f, end+1, min(size, math.MaxInt32), 0, func(c *record.Batch) bool {
			return c.CheckFollows(base, next, math.MaxInt64) == nil
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", logPath, err)
		}
		if ok {
			r.To, r.LostTo = q.Pos, q.BaseOffset
		}
		res.Bad = append(res.Bad, r)
		if !ok {
			break
		}
		pos = q.Pos
	}
	res.NextOffset = next
	return nil
}

// scanRun scans valid batches from pos and returns why it stopped (nil at
// the end of the file) and where the last valid batch ended.
func scanRun(f vfs.File, logPath string, base record.Offset, pos, size record.Position, headersOnly bool, next *record.Offset, b *indexBuilder, verify *index.Verifier, res *SegmentResult) (reason error, end record.Position, err error) {
	sc := record.NewScanner(f, pos, size, record.ScanOptions{HeadersOnly: headersOnly, ReadAhead: scanReadAhead})
	end = pos
	for sc.Next() {
		batch := sc.Batch()
		if err := batch.CheckFollows(base, *next, math.MaxInt64); err != nil {
			return record.WithFile(err, logPath), end, nil
		}
		if b != nil {
			if err := b.add(batch); err != nil {
				return nil, end, err
			}
		}
		if verify != nil {
			verify.Batch(index.BatchOf(&batch.BatchHeader, batch.Pos))
		}
		res.Batches++
		end = sc.Pos()
		*next = batch.NextOffset()
	}
	if err := sc.Err(); err != nil {
		var ce *record.CorruptError
		if !errors.As(err, &ce) {
			return nil, end, fmt.Errorf("read %s: %w", logPath, err) // I/O, not the data
		}
		return record.WithFile(err, logPath), end, nil
	}
	return nil, end, nil
}

// legacyHeader is what a Kafka v0/v1 message needs before its CRC can be
// checked: offset, size, crc, magic.
const legacyHeader = 17

// refuseLegacy turns a scan that stopped at a well-formed legacy message
// (magic 0 or 1 with a matching CRC-32) into ErrLegacyFormat: cutting there
// would throw away data that Kafka reads and logfs does not. A zero-filled
// tail also reads as magic 0, but its CRC field is 0 while the CRC of its
// zero bytes is not, so it is still cut.
func refuseLegacy(f vfs.File, logPath string, res *SegmentResult) error {
	if !errors.Is(res.Reason, record.ErrUnsupportedMagic) {
		return nil
	}
	pos := int64(res.ValidBytes)
	var head [legacyHeader]byte
	if _, err := f.ReadAt(head[:], pos); err != nil {
		return nil
	}
	size := int64(int32(binary.BigEndian.Uint32(head[8:])))
	if magic := head[16]; magic > 1 || size < 14 || size > 64<<20 || pos+12+size > int64(res.Size) {
		return nil
	}
	body := make([]byte, size-4) // from the magic byte to the end of the message
	if _, err := f.ReadAt(body, pos+16); err != nil {
		return nil
	}
	if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(head[12:]) {
		return nil
	}
	return fmt.Errorf("%s position %d: %w", logPath, pos, ErrLegacyFormat)
}

// indexBuilder writes a segment's two indexes from its batches with Kafka's
// rules: an entry when more than index.interval.bytes of log lie between
// the last entry's batch and this batch's start, keyed by the batch's last
// offset at the batch's start; the time index follows the running max
// timestamp and the last offset of the batch that first reached it. It
// writes *.tmp files and renames them into place in finish.
type indexBuilder struct {
	dir         string
	base        record.Offset
	cfg         IndexConfig
	off         *index.OffsetIndex
	time        *index.TimeIndex
	lastEntry   record.Position
	maxTS       int64
	maxTSOffset record.Offset
	offDone     bool // the offset index is in place
	timeDone    bool // the time index is in place
}

func newIndexBuilder(fs vfs.FS, dir string, base record.Offset, cfg IndexConfig) (*indexBuilder, error) {
	opts := index.Options{FS: fs, MaxBytes: cfg.IndexBytes, Writable: true}
	off, err := index.CreateOffsetIndex(layout.SegmentPath(dir, base, layout.IndexSuffix+tmpSuffix), base, opts)
	if err != nil {
		return nil, err
	}
	ti, err := index.CreateTimeIndex(layout.SegmentPath(dir, base, layout.TimeIndexSuffix+tmpSuffix), base, opts)
	if err != nil {
		off.Delete()
		return nil, err
	}
	return &indexBuilder{dir: dir, base: base, cfg: cfg, off: off, time: ti, maxTS: record.NoTimestamp, maxTSOffset: base}, nil
}

func (b *indexBuilder) add(batch *record.Batch) error {
	if batch.MaxTimestamp > b.maxTS {
		b.maxTS, b.maxTSOffset = batch.MaxTimestamp, batch.LastOffset()
	}
	if int64(batch.Pos-b.lastEntry) <= b.cfg.IndexInterval {
		return nil
	}
	b.lastEntry = batch.Pos
	if b.off.IsFull() || b.time.IsFull() {
		return nil // a sparser index is still a correct one
	}
	if err := b.off.Append(batch.LastOffset(), batch.Pos); err != nil {
		return err
	}
	return b.time.MaybeAppend(b.maxTS, b.maxTSOffset, false)
}

// finish writes the final time-index entry, trims both files, makes them
// durable and renames them over the segment's index files.
func (b *indexBuilder) finish() error {
	if err := b.time.MaybeAppend(b.maxTS, b.maxTSOffset, true); err != nil {
		return err
	}
	if err := errors.Join(b.off.Seal(), b.time.Seal(), b.off.Flush(), b.time.Flush()); err != nil {
		return err
	}
	if err := b.off.Rename(layout.SegmentPath(b.dir, b.base, layout.IndexSuffix)); err != nil {
		return err
	}
	b.offDone = true
	if err := b.time.Rename(layout.SegmentPath(b.dir, b.base, layout.TimeIndexSuffix)); err != nil {
		return err
	}
	b.timeDone = true
	return errors.Join(b.off.Close(), b.time.Close())
}

// abort closes the builder and removes the *.tmp files it did not rename
// into place. After finish it only closes (Close is idempotent).
func (b *indexBuilder) abort() {
	if b.offDone {
		b.off.Close()
	} else {
		b.off.Delete()
	}
	if b.timeDone {
		b.time.Close()
	} else {
		b.time.Delete()
	}
}
