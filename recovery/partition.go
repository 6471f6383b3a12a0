package recovery

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// PartitionOptions describe one partition folder to load.
type PartitionOptions struct {
	FS  vfs.FS
	Dir string
	IndexConfig
	// Clean says the data directory was shut down cleanly: the files are
	// trusted and no log data is read.
	Clean bool
	// Force scans every segment, as after a crash with no recovery point,
	// cutting at the first invalid batch (`logfs check --repair`). The
	// recovery point is still used to tell a hole from a gap that Kafka's
	// compaction left (see the package documentation).
	Force bool
	// RecoveryPoint is the partition's entry in the recovery-point
	// checkpoint, or -1 when it has none. After an unclean shutdown every
	// segment from the one holding it to the end is scanned.
	RecoveryPoint record.Offset
	// LogStart is the partition's entry in the log-start checkpoint, or -1.
	LogStart record.Offset
	// Gapless says the partition is never compacted (logfs's own data
	// directories, with no meta.properties): its offsets have no gaps, so
	// a segment must start with its base offset, and offsets lost to
	// damage are reported as holes (PartitionReport.Holes).
	Gapless bool
	// ReadOnly loads without changing anything: leftovers stay, invalid
	// tails are reported and hidden rather than cut, indexes are not
	// rebuilt. The report says what a writable load would do.
	ReadOnly bool
	Logger   *slog.Logger
	// Progress, if not nil, is called with the .log bytes of each segment
	// recovery scans or drops, as it passes it: the segments from the one
	// holding the recovery point on (LoadAll's progress report, which
	// starts from ScanBytes). Trusted segments below the recovery point and
	// expired ones below the log start are not counted: they are not work.
	Progress func(bytes int64)
}

// Segment is a segment of a loaded partition.
type Segment struct {
	Base record.Offset
	// Size is the number of valid bytes of the .log, which on a read-only
	// load may be less than the file's length; -1 when the load did not
	// look (a trusted segment of a clean load): the file's length.
	Size record.Position
	// Recovered says the segment was scanned: its batches are valid and, on
	// a writable load, its indexes were rebuilt.
	Recovered bool
	// IndexMissing says the segment has no usable index files on disk and
	// the reader must index it another way (read-only loads only).
	IndexMissing bool
}

// PartitionState is a loaded partition.
type PartitionState struct {
	Segments      []Segment // sorted by base offset, never empty
	LogStart      record.Offset
	NextOffset    record.Offset // the log end offset
	RecoveryPoint record.Offset // offsets below it are known durable
	Report        PartitionReport
}

// LoadPartition brings a partition folder to a consistent state, following
// Kafka's LogLoader with its known bugs designed out. See the package
// documentation for the steps and for what each kind of damage leads to.
func LoadPartition(o PartitionOptions) (*PartitionState, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	l := &loader{o: o, st: &PartitionState{}}
	l.rep = &l.st.Report
	l.rep.Dir = o.Dir
	if err := l.load(); err != nil {
		return nil, err
	}
	return l.st, nil
}

// loader is one run of LoadPartition.
type loader struct {
	o   PartitionOptions
	st  *PartitionState
	rep *PartitionReport
	// dirty says entries of the folder changed and need a SyncDir.
	dirty bool
	// lostEnd says bad bytes took the end of the last segment below the
	// recovery point: offsets that were durable, and may have been read,
	// are gone from the end of the log.
	lostEnd bool
}

func (l *loader) load() error {
	o := l.o
	files, err := l.list()
	if err != nil {
		return err
	}
	bases := files.bases()
	if len(bases) == 0 {
		return l.empty()
	}
	// Segments entirely below the log start were deleted by retention:
	// their renames did not all survive a crash, or a Kafka broker had
	// not got to them. Their data is gone for readers; remove the files.
	if n := expiredPrefix(bases, o.LogStart); n > 0 {
		if err := l.expire(files, bases[:n], fmt.Sprintf("entirely below the log start offset %d of the checkpoint: deleted by retention", o.LogStart)); err != nil {
			return err
		}
		bases = bases[n:]
	}
	recoverFrom := l.recoverFrom(bases)
	first := sort.Search(len(bases), func(i int) bool { return bases[i] >= recoverFrom })
	for _, base := range bases[:first] {
		if err := l.trusted(base, files.segs[base]); err != nil {
			return err
		}
	}
	if err := l.recoverSegments(files, bases[first:]); err != nil {
		return err
	}
	if len(l.st.Segments) == 0 {
		// Every segment was set aside.
		return l.empty()
	}
	if last := l.st.Segments[len(l.st.Segments)-1]; !last.Recovered {
		if err := l.lastSegmentEnd(files, last); err != nil {
			return err
		}
	}
	if o.Gapless && o.RecoveryPoint > l.st.NextOffset && o.LogStart <= l.st.NextOffset {
		if err := l.continueAtRecoveryPoint(); err != nil {
			return err
		}
	}
	if o.LogStart > l.st.NextOffset {
		// Kafka: every segment is below the log start. Retention's renames
		// survived a crash that its roll did not, or the files were
		// deleted by hand: start afresh at the log start, so that no
		// offset is handed out twice.
		if err := l.resetToLogStart(files); err != nil {
			return err
		}
	} else {
		l.finishOffsets()
	}
	if l.dirty && !o.ReadOnly {
		if err := o.FS.SyncDir(o.Dir); err != nil {
			return err
		}
	}
	l.rep.LogStart, l.rep.LogEnd, l.rep.RecoveryPoint = l.st.LogStart, l.st.NextOffset, l.st.RecoveryPoint
	l.rep.Segments = len(l.st.Segments)
	return nil
}

// recoverFrom returns the base of the first segment to scan: none after a
// clean shutdown, all when forced, else the one holding the recovery point
// (the first when there is none).
func (l *loader) recoverFrom(bases []record.Offset) record.Offset {
	switch {
	case len(bases) == 0:
		return math.MaxInt64
	case l.o.Force:
		return bases[0]
	case l.o.Clean && l.o.RecoveryPoint >= 0 && bases[len(bases)-1] > l.o.RecoveryPoint:
		// A segment starts past the end the clean shutdown recorded: a
		// copy or a stray file. Scan from the segment holding the end, so
		// that it is judged (and the log end cannot move back).
	case l.o.Clean:
		return math.MaxInt64
	case l.o.RecoveryPoint < 0:
		return bases[0]
	}
	i := sort.Search(len(bases), func(i int) bool { return bases[i] > l.o.RecoveryPoint })
	return bases[max(i-1, 0)]
}

// scanWindow is how many segments of a partition recovery scans at once:
// the scans run ahead of the one whose cut and indexes are being decided,
// so that a partition with several segments to recover uses every core.
func scanWindow() int { return min(max(runtime.GOMAXPROCS(0), 1), 4) }

// recoverSegments scans the segments from the one holding the recovery
// point to the end and decides, in order, what each keeps (see the
// package documentation): a stray, misnamed or overlapping segment is set
// aside; a loss above the recovery point (a crash: nothing there was
// durable) ends the log, and the segments after it are set aside; bad
// bytes below it are cut out and the rest kept. The scans (which change
// no file) run up to scanWindow ahead.
func (l *loader) recoverSegments(files *segmentFiles, bases []record.Offset) error {
	o := l.o
	type scan struct {
		done chan struct{}
		p    *pendingSegment
		err  error
	}
	scans := make([]*scan, len(bases))
	launch := func(i int) {
		if i >= len(bases) || scans[i] != nil {
			return
		}
		sc := &scan{done: make(chan struct{})}
		scans[i] = sc
		go func() {
			defer close(sc.done)
			sc.p, sc.err = scanPending(o.FS, o.Dir, bases[i], o.IndexConfig, o.ReadOnly)
		}()
	}
	// discard waits for the scans launched after i and closes them.
	discard := func(i int) {
		for _, sc := range scans[i+1:] {
			if sc != nil {
				<-sc.done
				if sc.err == nil {
					sc.p.close()
				}
			}
		}
		clear(scans[i+1:])
	}
	window := scanWindow()
	explained := max(o.RecoveryPoint, o.LogStart)
	havePrev := false
	var prevNext record.Offset // where the last segment kept ends
	for i, base := range bases {
		for k := i; k < i+window; k++ {
			launch(k)
		}
		sc := scans[i]
		<-sc.done
		f := files.segs[base]
		logPath := layout.SegmentPath(o.Dir, base, layout.LogSuffix)
		if sc.err != nil {
			discard(i)
			return fmt.Errorf("recover %s: %w", logPath, sc.err)
		}
		p := sc.p
		if why := l.stray(&p.res, base, havePrev, prevNext); why != "" {
			p.close()
			if err := l.setAside(files, []record.Offset{base}, why); err != nil {
				discard(i)
				return err
			}
			continue
		}
		if !havePrev && len(l.st.Segments) == 0 && o.Gapless && o.LogStart > 0 && base > explained {
			// The first segment of a partition that is never compacted
			// starts past its log start: the segments from the log start
			// on (retention had made one of them the first) never reached
			// the disk, and neither did anything after the recovery
			// point. This segment and the later ones are not part of the
			// log, which is empty at the log start (the k=843 state of
			// TestCrashLoop/Reorder). Without a log start checkpoint
			// nothing says where the log began: the segment is kept.
			p.close()
			discard(i)
			why := fmt.Sprintf("offsets %d to %d before it, the first of the log, are missing and were never durable (at or above the recovery point %d and the log start %d): the log is empty at %d",
				explained, base-1, o.RecoveryPoint, o.LogStart, explained)
			return l.setAside(files, bases[i:], why)
		}
		if havePrev && base > prevNext {
			if base > explained {
				// Offsets from max(prevNext, explained) to base were never
				// durable: a crash lost them (the end of a segment, or a
				// whole one, whose successor survived), whatever part of
				// the gap lies below. A segment past them is not part of
				// the log, which ends at prevNext.
				p.close()
				discard(i)
				why := fmt.Sprintf("offsets %d to %d before it are missing and were never durable (at or above the recovery point %d and the log start %d): the log ends at %d",
					max(prevNext, explained), base-1, o.RecoveryPoint, o.LogStart, prevNext)
				return l.setAside(files, bases[i:], why)
			}
			l.holeBetween(prevNext, base, fmt.Sprintf("missing between segment %d, which ends at %d, and segment %d", prevSegBase(l.st), prevNext, base))
		}
		tail := false
		for k, r := range p.res.Bad {
			if r.LostFrom >= explained {
				// Nothing durable was lost here: a torn tail. The segment
				// ends before the range, and so does the log.
				p.tailFrom(k)
				tail = true
				break
			}
		}
		res, err := p.commit(func(res *SegmentResult) error {
			for _, r := range res.Bad {
				l.o.Logger.Warn("recovery cuts invalid bytes out of a segment", "segment", logPath, "from", r.From, "to", r.To,
					"reason", r.Reason, "read_only", o.ReadOnly)
			}
			return nil
		})
		if err != nil {
			discard(i)
			return fmt.Errorf("recover %s: %w", logPath, err)
		}
		if i == len(bases)-1 && len(res.Bad) > 0 && res.Bad[len(res.Bad)-1].Tail() && !tail {
			l.lostEnd = true
		}
		for _, r := range res.Bad {
			l.rep.Cuts = append(l.rep.Cuts, Cut{File: logPath, Base: base, At: r.From, Bytes: int64(r.To - r.From), Reason: reasonOf(r.Reason), Aside: r.Aside})
			if !r.Tail() && r.LostTo > r.LostFrom {
				l.holeBetween(r.LostFrom, r.LostTo, fmt.Sprintf("cut out of %s with bytes %d to %d", filepath.Base(logPath), r.From, r.To))
			}
		}
		l.progress(f.size)
		l.dirty = l.dirty || !o.ReadOnly // new index files
		l.rep.ScannedSegments++
		l.rep.ScannedBytes += int64(f.size)
		l.st.Segments = append(l.st.Segments, Segment{Base: base, Size: res.ValidBytes, Recovered: true, IndexMissing: o.ReadOnly && !res.IndexesKept})
		l.st.NextOffset = res.NextOffset
		havePrev, prevNext = true, res.NextOffset
		if tail && i < len(bases)-1 {
			discard(i)
			why := fmt.Sprintf("follows the end of the log at %d, cut in %s above the recovery point %d (never durable)", res.NextOffset, filepath.Base(logPath), o.RecoveryPoint)
			return l.setAside(files, bases[i+1:], why)
		}
	}
	return nil
}

// continueAtRecoveryPoint starts a new, empty segment at the recovery
// point of a partition that is never compacted and whose log ends below
// it: bad bytes cut the end of the last segment off, or the last
// segment's .log is gone. Those offsets were durable and may have been
// read, so they are never handed out again. They become a hole between
// the two segments, which reads and check report. A read-only load reports
// the hole and shows the segment it would create, empty.
func (l *loader) continueAtRecoveryPoint() error {
	o, st := l.o, l.st
	from, base := st.NextOffset, o.RecoveryPoint
	how := fmt.Sprintf("cut off the end of segment %d", prevSegBase(st))
	if !l.lostEnd {
		how = fmt.Sprintf("gone from the end of the log, which segment %d ends at %d", prevSegBase(st), from)
	}
	if o.ReadOnly {
		// The segment a writable open creates, which storage stands in
		// for: reads see the hole as they will after that open.
		l.holeBetween(from, base, fmt.Sprintf("%s, below the recovery point %d; a writable open goes on at %d", how, base, base))
		st.Segments = append(st.Segments, Segment{Base: base, Recovered: true, IndexMissing: true})
		st.NextOffset = base
		return nil
	}
	if err := l.createEmpty(base); err != nil {
		return err
	}
	l.holeBetween(from, base, fmt.Sprintf("%s, below the recovery point %d; the log goes on at %d", how, base, base))
	st.Segments = append(st.Segments, Segment{Base: base, Recovered: true})
	st.NextOffset = base
	return nil
}

// prevSegBase returns the base of the last segment kept so far.
func prevSegBase(st *PartitionState) record.Offset {
	if len(st.Segments) == 0 {
		return -1
	}
	return st.Segments[len(st.Segments)-1].Base
}

// stray says why a scanned segment cannot be part of the log, or "": its
// first batch is intact but contradicts its name (a copy or a rename; in
// a gapless partition the first batch starts at the segment's base), or
// it starts below where the segment before it ended (an overlap).
func (l *loader) stray(res *SegmentResult, base record.Offset, havePrev bool, prevNext record.Offset) string {
	switch {
	case res.FirstBase >= 0 && res.FirstBase < base:
		return fmt.Sprintf("its first batch has base offset %d, below %d that its name says: a copy or a rename", res.FirstBase, base)
	case l.o.Gapless && res.FirstBase > base:
		return fmt.Sprintf("its first batch has base offset %d, not %d that its name says, in a partition that is never compacted: a copy or a rename", res.FirstBase, base)
	case havePrev && base < prevNext:
		return fmt.Sprintf("its base offset %d is below %d, where the segment before it ends: the offsets overlap", base, prevNext)
	}
	return ""
}

// holeBetween reports offsets [from, to) lost from a gapless partition.
func (l *loader) holeBetween(from, to record.Offset, why string) {
	if !l.o.Gapless || to <= from {
		return
	}
	l.rep.Holes = append(l.rep.Holes, Hole{From: from, To: to, Why: why})
	l.o.Logger.Error("offsets lost from a partition that is never compacted; reads that reach them fail", "dir", l.o.Dir,
		"from", from, "to", to-1, "why", why)
}

// trusted adds a segment below the recovery point, which is not scanned.
// Its indexes are checked on first use by storage; missing ones are
// rebuilt now from the batch headers (on a writable load).
func (l *loader) trusted(base record.Offset, f *segmentFile) error {
	o := l.o
	seg := Segment{Base: base, Size: f.size}
	if f.hasIndex && f.hasTimeIndex {
		l.st.Segments = append(l.st.Segments, seg)
		return nil
	}
	size, err := l.sizeOf(base, f)
	if err != nil {
		return err
	}
	seg.Size = size
	logPath := layout.SegmentPath(o.Dir, base, layout.LogSuffix)
	l.rep.Rebuilt = append(l.rep.Rebuilt, logPath)
	if o.ReadOnly {
		seg.IndexMissing = true
		l.st.Segments = append(l.st.Segments, seg)
		return nil
	}
	o.Logger.Warn("segment index files missing; rebuilding them from the log", "segment", logPath)
	res, err := RebuildIndexes(o.FS, o.Dir, base, size, o.IndexConfig)
	if err != nil {
		return fmt.Errorf("rebuild indexes of %s: %w", logPath, err)
	}
	l.dirty = true
	if res.Reason != nil {
		l.corrupt(res.Reason)
	}
	l.st.Segments = append(l.st.Segments, seg)
	return nil
}

// corrupt reports an invalid batch left in place.
func (l *loader) corrupt(reason error) {
	c := Corruption{Reason: reasonOf(reason)}
	var ce *record.CorruptError
	if errors.As(reason, &ce) {
		c.File, c.At = ce.File, ce.Pos
	}
	l.rep.Corrupt = append(l.rep.Corrupt, c)
	l.o.Logger.Error("corrupt batch below the recovery point; reads that reach it fail; `logfs check --repair` cuts it",
		"segment", c.File, "position", c.At, "reason", c.Reason)
}

// endWalkReadAhead is what lastSegmentEnd reads first: a header and the
// ones near it. Each further read doubles, up to the scanner's default,
// for a long walk (a last segment without an index). Starting at the
// default, sized for scans, read up to 256 KiB of batch bodies per
// partition at every open.
const endWalkReadAhead = 8 << 10

// lastSegmentEnd finds the log end offset when the last segment was not
// scanned, as Kafka's readNextOffset: a walk of the batch headers from its
// last offset-index entry (a few KiB; from the start when it has no
// index). After a clean shutdown this is the only log data the load reads;
// the recovery point the checkpoint gives is not taken for the end, since
// a damaged checkpoint that still parses, or a deleted last segment, would
// then hand out offsets twice. On a writable load a walk that meets an
// invalid batch recovers the segment instead, so that appends never land
// after garbage.
func (l *loader) lastSegmentEnd(files *segmentFiles, last Segment) error {
	o := l.o
	logPath := layout.SegmentPath(o.Dir, last.Base, layout.LogSuffix)
	if last.Size < 0 {
		info, err := o.FS.Stat(logPath)
		if err != nil {
			return err
		}
		last.Size = record.Position(info.Size())
		l.st.Segments[len(l.st.Segments)-1].Size = last.Size
	}
	start := record.Position(0)
	if !last.IndexMissing {
		idx, err := index.OpenOffsetIndex(layout.SegmentPath(o.Dir, last.Base, layout.IndexSuffix), last.Base, index.Options{FS: o.FS, LogSize: last.Size})
		if err == nil {
			// An entry at or past the size taken points at no batch of it:
			// a writer's, appending since (a read-only load beside one), or
			// a bad one. The walk then starts at the segment's start.
			if _, pos, err := idx.LastEntry(); err == nil && pos < last.Size {
				start = pos
			}
			idx.Close()
		}
	}
	f, err := o.FS.OpenFile(logPath, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	next, pos := last.Base, start
	sc := record.NewScanner(f, start, last.Size, record.ScanOptions{HeadersOnly: true, ReadAhead: endWalkReadAhead, MaxReadAhead: record.DefaultReadAhead})
	for sc.Next() {
		next, pos = sc.Batch().NextOffset(), sc.Pos()
	}
	f.Close()
	scanErr := sc.Err()
	var ce *record.CorruptError
	if scanErr != nil && !errors.As(scanErr, &ce) {
		return fmt.Errorf("read %s: %w", logPath, scanErr)
	}
	if scanErr == nil {
		l.st.NextOffset = next
		if rp := o.RecoveryPoint; l.trusting() && rp >= 0 && rp < next {
			w := fmt.Sprintf("the recovery point %d is below the log end %d after a clean shutdown (a damaged checkpoint): the log ends where its data does", rp, next)
			l.rep.Warnings = append(l.rep.Warnings, w)
			o.Logger.Warn("recovery point below the log end after a clean shutdown", "dir", o.Dir, "recovery_point", rp, "log_end", next)
		}
		return nil
	}
	// The active segment ends in bytes that are not a batch.
	l.st.Segments = l.st.Segments[:len(l.st.Segments)-1]
	if o.ReadOnly {
		l.rep.Cuts = append(l.rep.Cuts, Cut{File: logPath, Base: last.Base, At: pos, Bytes: int64(last.Size - pos), Reason: reasonOf(record.WithFile(scanErr, logPath))})
		l.st.Segments = append(l.st.Segments, Segment{Base: last.Base, Size: pos, IndexMissing: last.IndexMissing})
		l.st.NextOffset = next
		return nil
	}
	return l.recoverSegments(files, []record.Offset{last.Base})
}

// finishOffsets sets the log start offset and the recovery point.
func (l *loader) finishOffsets() {
	o, st := l.o, l.st
	st.LogStart = min(max(o.LogStart, st.Segments[0].Base), st.NextOffset)
	switch {
	case l.trusting():
		st.RecoveryPoint = st.NextOffset
	case o.RecoveryPoint >= 0:
		st.RecoveryPoint = min(o.RecoveryPoint, st.NextOffset)
	default:
		st.RecoveryPoint = st.Segments[0].Base
	}
	if o.RecoveryPoint > st.NextOffset {
		w := fmt.Sprintf("the recovery point %d is beyond the log end %d: data the checkpoint called durable is gone", o.RecoveryPoint, st.NextOffset)
		l.rep.Warnings = append(l.rep.Warnings, w)
		o.Logger.Warn("recovery point beyond the log end", "dir", o.Dir, "recovery_point", o.RecoveryPoint, "log_end", st.NextOffset)
	}
}

// resetToLogStart drops every segment and makes an empty one at the log
// start offset, for a partition whose log ends below it.
func (l *loader) resetToLogStart(files *segmentFiles) error {
	bases := make([]record.Offset, len(l.st.Segments))
	for i, s := range l.st.Segments {
		bases[i] = s.Base
	}
	why := fmt.Sprintf("below the log start offset %d of the checkpoint, past the log end %d: deleted by retention", l.o.LogStart, l.st.NextOffset)
	if err := l.expire(files, bases, why); err != nil {
		return err
	}
	l.st.Segments = nil
	return l.empty()
}

// expiredPrefix returns how many of the sorted bases start segments that
// lie entirely below logStart: the next segment starts at or below it. The
// last segment never does.
func expiredPrefix(bases []record.Offset, logStart record.Offset) int {
	n := 0
	for n+1 < len(bases) && bases[n+1] <= logStart {
		n++
	}
	return n
}

// expire removes segments that retention deleted (they lie below the log
// start) and reports them as such, not as lost data.
func (l *loader) expire(files *segmentFiles, bases []record.Offset, why string) error {
	return l.removeSegments(files, bases, why, &l.rep.Expired, func(logPath string, _ record.Position) {
		l.o.Logger.Info("removing a segment retention deleted", "segment", logPath, "why", why, "read_only", l.o.ReadOnly)
	})
}

// removeSegments deletes the files of whole segments, reporting each in
// list and to logf, and counting them as recovery progress.
func (l *loader) removeSegments(files *segmentFiles, bases []record.Offset, why string, list *[]Dropped, logf func(string, record.Position)) error {
	o := l.o
	for _, base := range bases {
		f := files.segs[base]
		logPath := layout.SegmentPath(o.Dir, base, layout.LogSuffix)
		if _, err := l.sizeOf(base, f); err != nil {
			return err
		}
		*list = append(*list, Dropped{File: logPath, Base: base, Bytes: int64(f.size), Why: why})
		logf(logPath, f.size)
		if o.ReadOnly {
			continue
		}
		for _, name := range f.names {
			if err := o.FS.Remove(filepath.Join(o.Dir, name)); err != nil && !isNotExist(err) {
				return err
			}
		}
		l.dirty = true
	}
	return nil
}

// empty gives a partition with no segment an empty one at its log start
// (or recovery point), as Kafka does.
func (l *loader) empty() error {
	o, st := l.o, l.st
	base := max(o.LogStart, o.RecoveryPoint, 0)
	logPath := layout.SegmentPath(o.Dir, base, layout.LogSuffix)
	l.rep.Created = logPath
	if from := max(o.LogStart, 0); o.Gapless && o.RecoveryPoint > from {
		// Offsets below the recovery point were durable, and no segment
		// holds them any more: the log starts again at the recovery point.
		l.holeBetween(from, base, fmt.Sprintf("no segment holding them is left, below the recovery point %d; the log starts again at %d", o.RecoveryPoint, base))
	}
	if !o.ReadOnly {
		o.Logger.Info("partition has no segment; creating an empty one", "segment", logPath)
		if err := l.createEmpty(base); err != nil {
			return err
		}
	}
	st.Segments = []Segment{{Base: base, IndexMissing: o.ReadOnly}}
	st.LogStart, st.NextOffset, st.RecoveryPoint = base, base, base
	l.rep.LogStart, l.rep.LogEnd, l.rep.RecoveryPoint, l.rep.Segments = base, base, base, 1
	return nil
}

// freeName returns path, or when a file of that name exists already the
// first of path.1, path.2, … that does not: what recovery keeps aside (a
// .stray, a .cut-*) never replaces what an earlier recovery kept.
func freeName(fsys vfs.FS, path string) (string, error) {
	name := path
	for n := 1; ; n++ {
		if _, err := fsys.Stat(name); isNotExist(err) {
			return name, nil
		} else if err != nil {
			return "", err
		}
		name = fmt.Sprintf("%s.%d", path, n)
	}
}

// setAside leaves whole segments out of the log: each .log is renamed to
// NAME.log.stray (NAME.log.stray.1, … when that is taken), never deleted,
// and its derived files (indexes, view index) are removed. The renames are
// made durable before the caller goes on.
func (l *loader) setAside(files *segmentFiles, bases []record.Offset, why string) error {
	o := l.o
	for _, base := range bases {
		f := files.segs[base]
		logPath := layout.SegmentPath(o.Dir, base, layout.LogSuffix)
		size, err := l.sizeOf(base, f)
		if err != nil {
			return err
		}
		d := Dropped{File: logPath, Base: base, Bytes: int64(size), Why: why}
		o.Logger.Warn("recovery set a segment aside", "segment", logPath, "bytes", size, "why", why, "read_only", o.ReadOnly)
		l.progress(size)
		if !o.ReadOnly {
			aside, err := freeName(o.FS, logPath+layout.StraySuffix)
			if err != nil {
				return err
			}
			if err := o.FS.Rename(logPath, aside); err != nil {
				return err
			}
			d.AsideAs = aside
			for _, name := range f.names {
				if name == filepath.Base(logPath) {
					continue
				}
				if err := o.FS.Remove(filepath.Join(o.Dir, name)); err != nil && !isNotExist(err) {
					return err
				}
			}
			l.dirty = true
		}
		l.rep.Dropped = append(l.rep.Dropped, d)
	}
	if o.ReadOnly || len(bases) == 0 {
		return nil
	}
	return o.FS.SyncDir(o.Dir)
}

func (l *loader) progress(n record.Position) {
	if l.o.Progress != nil && n > 0 {
		l.o.Progress(int64(n))
	}
}

// trusting says the load trusts the files as they are (a clean shutdown,
// not forced): it does not even stat the segments it does not need to.
// Storage learns their sizes when it opens them.
func (l *loader) trusting() bool { return l.o.Clean && !l.o.Force }

// sizeOf returns the length of a segment's .log, statting it the first
// time.
func (l *loader) sizeOf(base record.Offset, f *segmentFile) (record.Position, error) {
	if f.size < 0 {
		info, err := l.o.FS.Stat(layout.SegmentPath(l.o.Dir, base, layout.LogSuffix))
		if err != nil {
			return 0, err
		}
		f.size = record.Position(info.Size())
	}
	return f.size, nil
}

// reasonOf renders why a scan stopped, without the file name the report
// already carries.
func reasonOf(err error) string {
	var ce *record.CorruptError
	if errors.As(err, &ce) {
		return fmt.Sprintf("%v at position %d: %s", ce.Err, ce.Pos, ce.Reason)
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// segmentFiles is what a partition folder holds, by base offset.
type segmentFiles struct {
	segs map[record.Offset]*segmentFile
}

type segmentFile struct {
	hasLog       bool
	size         record.Position // of the .log; -1 until looked at (see sizeOf)
	hasIndex     bool
	hasTimeIndex bool
	names        []string // the segment's own files (.log and derived), not producer snapshots
}

func (f *segmentFiles) bases() []record.Offset {
	out := make([]record.Offset, 0, len(f.segs))
	for b, s := range f.segs {
		if s.hasLog {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// list lists the folder and handles the leftovers of deletes, cleanings,
// swaps and index rebuilds (Kafka's removeTempFilesAndCollectSwapFiles and
// completion of swaps, plus logfs's *.tmp), then removes index files that
// have no .log.
func (l *loader) list() (*segmentFiles, error) {
	o := l.o
	entries, err := o.FS.ReadDir(o.Dir)
	if err != nil {
		return nil, err
	}
	minCleaned := record.Offset(math.MaxInt64)
	var swaps, names []string
	var leftovers []string
	for _, e := range entries {
		base, suffix, ok := layout.ParseSegmentFileName(e.Name())
		if !ok || e.IsDir() {
			continue // leader-epoch-checkpoint, partition.metadata, …
		}
		switch {
		case strings.HasSuffix(suffix, layout.DeletedSuffix), strings.HasSuffix(suffix, tmpSuffix):
			leftovers = append(leftovers, e.Name())
		case strings.HasSuffix(suffix, layout.CleanedSuffix):
			minCleaned = min(minCleaned, base)
			leftovers = append(leftovers, e.Name())
		case strings.HasSuffix(suffix, layout.SwapSuffix):
			swaps = append(swaps, e.Name())
		default:
			names = append(names, e.Name())
		}
	}
	var keptSwaps []string
	for _, name := range swaps {
		if base, _, _ := layout.ParseSegmentFileName(name); base >= minCleaned {
			leftovers = append(leftovers, name) // a split that never finished (KAFKA-6264)
			continue
		}
		keptSwaps = append(keptSwaps, name)
	}
	sort.Strings(leftovers)
	for _, name := range leftovers {
		if err := l.remove(name, "removing leftover file"); err != nil {
			return nil, err
		}
	}
	if len(keptSwaps) > 0 {
		if names, err = l.completeSwaps(keptSwaps, names); err != nil {
			return nil, err
		}
	}
	files := &segmentFiles{segs: map[record.Offset]*segmentFile{}}
	get := func(b record.Offset) *segmentFile {
		if files.segs[b] == nil {
			files.segs[b] = &segmentFile{size: -1}
		}
		return files.segs[b]
	}
	for _, name := range names {
		base, suffix, _ := layout.ParseSegmentFileName(name)
		switch suffix {
		case layout.LogSuffix:
			f := get(base)
			f.names = append(f.names, name)
			f.hasLog = true
			if !l.trusting() {
				if _, err := l.sizeOf(base, f); err != nil {
					return nil, err
				}
			}
		case layout.IndexSuffix:
			f := get(base)
			f.names = append(f.names, name)
			f.hasIndex = true
		case layout.TimeIndexSuffix:
			f := get(base)
			f.names = append(f.names, name)
			f.hasTimeIndex = true
		default:
			if isIndexName(name) {
				f := get(base)
				f.names = append(f.names, name)
			}
		}
	}
	bases := make([]record.Offset, 0, len(files.segs))
	for b := range files.segs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	for _, base := range bases {
		f := files.segs[base]
		if f.hasLog {
			continue
		}
		for _, name := range f.names {
			if err := l.remove(name, "removing index file with no .log"); err != nil {
				return nil, err
			}
		}
		delete(files.segs, base)
	}
	return files, nil
}

// remove removes a leftover file of the folder and reports it.
func (l *loader) remove(name, msg string) error {
	p := filepath.Join(l.o.Dir, name)
	l.rep.Removed = append(l.rep.Removed, p)
	if l.o.ReadOnly {
		return nil
	}
	l.o.Logger.Info(msg, "file", p)
	l.dirty = true
	if err := l.o.FS.Remove(p); err != nil && !isNotExist(err) {
		return err
	}
	return nil
}

// isIndexName reports whether a segment file is derived from its .log and
// must go when the .log is gone. Producer snapshots (.snapshot) are named by
// an offset too but are not segment files.
func isIndexName(name string) bool {
	for _, s := range []string{layout.IndexSuffix, layout.TimeIndexSuffix, layout.ViewIndexSuffix, ".txnindex"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// completeSwaps finishes a swap that a crash interrupted (Kafka's
// replaceSegments): the .swap segments replace every old segment whose base
// lies in the range they cover, then lose their suffix. Read-only, it only
// reports.
//
// A swap that cannot be the log cleaner's output is not completed: any
// swap in a gapless partition (logfs's own, which nothing compacts), one
// whose .log holds no valid batch (it would take the place of the segment
// of its name and cover nothing), or one that reaches into the last
// segment (the cleaner never cleans the active segment). Its files are set
// aside (NAME.log.swap.stray, the index swaps removed) and the old
// segments stay: recovery never deletes a batch that passes its checks on
// the word of a file that does not add up.
func (l *loader) completeSwaps(swaps, names []string) ([]string, error) {
	o := l.o
	// An index swap whose .log.swap is gone (a kill while a swap was set
	// aside, or a planted file) has nothing to be derived from: it goes,
	// rather than take the place of its segment's index.
	logSwaps := map[record.Offset]bool{}
	for _, name := range swaps {
		if base, suffix, _ := layout.ParseSegmentFileName(name); suffix == layout.LogSuffix+layout.SwapSuffix {
			logSwaps[base] = true
		}
	}
	var withLog []string
	for _, name := range swaps {
		if base, _, _ := layout.ParseSegmentFileName(name); !logSwaps[base] {
			if err := l.remove(name, "removing an index swap without its .log.swap"); err != nil {
				return nil, err
			}
			continue
		}
		withLog = append(withLog, name)
	}
	if swaps = withLog; len(swaps) == 0 {
		return names, nil
	}
	if o.Gapless {
		return names, l.setSwapsAside(swaps, "a swap in a partition that is never compacted: no log cleaner wrote it")
	}
	lo, hi := record.Offset(math.MaxInt64), record.Offset(-1)
	why := ""
	for _, name := range swaps {
		base, suffix, _ := layout.ParseSegmentFileName(name)
		if suffix != layout.LogSuffix+layout.SwapSuffix {
			continue
		}
		lo = min(lo, base)
		next, err := scanNext(o.FS, filepath.Join(o.Dir, name), base)
		if err != nil {
			return nil, err
		}
		if next <= base && why == "" {
			why = "an interrupted swap whose file holds no valid batch"
		}
		hi = max(hi, next)
	}
	last := record.Offset(-1) // the active segment's base
	for _, name := range names {
		if base, suffix, _ := layout.ParseSegmentFileName(name); suffix == layout.LogSuffix {
			last = max(last, base)
		}
	}
	if why == "" && last >= 0 && hi > last {
		why = fmt.Sprintf("an interrupted swap that reaches offset %d, into the last segment (%d), which the log cleaner never cleans", hi-1, last)
	}
	if why != "" {
		return names, l.setSwapsAside(swaps, why)
	}
	var kept, replaced []string
	for _, name := range names {
		base, _, _ := layout.ParseSegmentFileName(name)
		if base >= lo && base < hi && (strings.HasSuffix(name, layout.LogSuffix) || isIndexName(name)) {
			replaced = append(replaced, name)
			continue
		}
		kept = append(kept, name)
	}
	for _, name := range swaps {
		l.rep.Swapped = append(l.rep.Swapped, filepath.Join(o.Dir, name))
	}
	for _, name := range replaced {
		l.rep.Replaced = append(l.rep.Replaced, filepath.Join(o.Dir, name))
	}
	if o.ReadOnly {
		return names, nil // the old segments stay in use
	}
	for _, name := range replaced {
		p := filepath.Join(o.Dir, name)
		o.Logger.Info("removing segment file replaced by an interrupted swap", "file", p)
		if err := o.FS.Remove(p); err != nil && !isNotExist(err) {
			return nil, err
		}
	}
	for _, name := range swaps {
		final := strings.TrimSuffix(name, layout.SwapSuffix)
		o.Logger.Info("completing an interrupted swap", "file", filepath.Join(o.Dir, name))
		if err := o.FS.Rename(filepath.Join(o.Dir, name), filepath.Join(o.Dir, final)); err != nil {
			return nil, err
		}
		kept = append(kept, final)
	}
	sort.Strings(kept)
	l.dirty = true
	return kept, o.FS.SyncDir(o.Dir)
}

// setSwapsAside leaves an interrupted swap undone: each .log.swap is
// renamed NAME.log.swap.stray (never deleted) and reported as dropped, the
// index swaps, derived from it, are removed. Read-only, it only reports.
func (l *loader) setSwapsAside(swaps []string, why string) error {
	o := l.o
	for _, name := range swaps {
		p := filepath.Join(o.Dir, name)
		base, suffix, _ := layout.ParseSegmentFileName(name)
		if suffix != layout.LogSuffix+layout.SwapSuffix {
			if err := l.remove(name, "removing an index of a swap set aside"); err != nil {
				return err
			}
			continue
		}
		fi, err := o.FS.Stat(p)
		if err != nil {
			return err
		}
		d := Dropped{File: p, Base: base, Bytes: fi.Size(), Why: why}
		o.Logger.Warn("recovery set an interrupted swap aside", "file", p, "why", why, "read_only", o.ReadOnly)
		if !o.ReadOnly {
			if d.AsideAs, err = freeName(o.FS, p+layout.StraySuffix); err != nil {
				return err
			}
			if err := o.FS.Rename(p, d.AsideAs); err != nil {
				return err
			}
			l.dirty = true
		}
		l.rep.Dropped = append(l.rep.Dropped, d)
	}
	if o.ReadOnly {
		return nil
	}
	return o.FS.SyncDir(o.Dir)
}

// scanNext returns the offset after the last valid batch of a log file.
func scanNext(fs vfs.FS, path string, base record.Offset) (record.Offset, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	next := base
	sc := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{HeadersOnly: true})
	for sc.Next() {
		next = sc.Batch().NextOffset()
	}
	return next, nil
}

// createEmpty writes an empty segment at base, with empty indexes, and
// makes it durable.
func (l *loader) createEmpty(base record.Offset) error {
	o := l.o
	logPath := layout.SegmentPath(o.Dir, base, layout.LogSuffix)
	f, err := o.FS.OpenFile(logPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	b, err := newIndexBuilder(o.FS, o.Dir, base, o.IndexConfig)
	if err != nil {
		return err
	}
	err = b.finish()
	b.abort()
	if err != nil {
		return err
	}
	return o.FS.SyncDir(o.Dir)
}
