package recovery

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
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
	// RecoveryPoint is the partition's entry in the recovery-point
	// checkpoint, or -1 when it has none. After an unclean shutdown every
	// segment from the one holding it to the end is scanned; after a clean
	// one it is the log end offset.
	RecoveryPoint record.Offset
	// LogStart is the partition's entry in the log-start checkpoint, or -1.
	LogStart record.Offset
	// ReadOnly loads without changing anything: leftovers stay, torn tails
	// are reported and skipped rather than cut, indexes are not rebuilt.
	ReadOnly bool
	Logger   *slog.Logger
}

// Segment is a segment of a loaded partition.
type Segment struct {
	Base record.Offset
	// Size is the number of valid bytes of the .log, which on a read-only
	// load may be less than the file's length.
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
	Segments       []Segment // sorted by base offset, never empty
	LogStart       record.Offset
	NextOffset     record.Offset // the log end offset
	RecoveryPoint  record.Offset // offsets below it are known durable
	TruncatedBytes int64         // cut (or, read-only, skipped) by recovery
	Dropped        []record.Offset
	ScannedBytes   int64
}

// LoadPartition brings a partition folder to a consistent state, following
// Kafka's LogLoader with its known bugs designed out:
//
//  1. leftovers: *.deleted and *.cleaned files are removed, *.swap files
//     from an interrupted swap are completed or discarded, index files with
//     no .log are removed;
//  2. after an unclean shutdown, every segment from the one holding the
//     recovery point to the end is recovered (RecoverSegment): cut at the
//     first invalid byte, indexes rebuilt; a cut drops every later segment;
//  3. a segment below the recovery point, or any after a clean shutdown,
//     is trusted, but one whose index files are missing is recovered too;
//  4. a partition left with no segment gets an empty one at its log start.
func LoadPartition(o PartitionOptions) (*PartitionState, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	files, err := listSegmentFiles(o)
	if err != nil {
		return nil, err
	}
	st := &PartitionState{}
	bases := files.bases()
	if len(bases) == 0 {
		return emptyPartition(o, st)
	}
	recoverFrom := record.Offset(math.MaxInt64)
	if !o.Clean {
		recoverFrom = bases[0]
		if o.RecoveryPoint >= 0 {
			if i := sort.Search(len(bases), func(i int) bool { return bases[i] > o.RecoveryPoint }); i > 0 {
				recoverFrom = bases[i-1]
			}
		}
	}
	for i, base := range bases {
		f := files.segs[base]
		needIndex := !f.hasIndex || !f.hasTimeIndex
		if base < recoverFrom && !needIndex {
			st.Segments = append(st.Segments, Segment{Base: base, Size: f.size})
			continue
		}
		if base < recoverFrom && o.ReadOnly {
			st.Segments = append(st.Segments, Segment{Base: base, Size: f.size, IndexMissing: true})
			continue
		}
		res, err := RecoverSegment(o.FS, o.Dir, base, o.IndexConfig, o.ReadOnly)
		if err != nil {
			return nil, fmt.Errorf("recover %s: %w", layout.SegmentPath(o.Dir, base, layout.LogSuffix), err)
		}
		st.ScannedBytes += int64(f.size)
		st.Segments = append(st.Segments, Segment{Base: base, Size: res.ValidBytes, Recovered: true, IndexMissing: o.ReadOnly})
		if res.Reason != nil {
			o.Logger.Warn("recovery cut a segment at its first invalid byte", "segment", layout.SegmentPath(o.Dir, base, layout.LogSuffix),
				"valid_bytes", res.ValidBytes, "cut_bytes", res.Truncated, "reason", res.Reason, "read_only", o.ReadOnly)
		}
		st.TruncatedBytes += res.Truncated
		if i == len(bases)-1 {
			st.NextOffset = res.NextOffset
		}
		if res.Truncated > 0 && i < len(bases)-1 {
			st.NextOffset = res.NextOffset
			if err := dropSegments(o, files, bases[i+1:], st); err != nil {
				return nil, err
			}
			break
		}
	}
	last := st.Segments[len(st.Segments)-1]
	if !last.Recovered {
		if st.NextOffset, err = nextOffset(o, last); err != nil {
			return nil, err
		}
	}
	st.LogStart = max(o.LogStart, st.Segments[0].Base)
	if st.LogStart > st.NextOffset {
		st.LogStart = st.NextOffset
	}
	st.RecoveryPoint = st.NextOffset
	if !o.Clean && o.RecoveryPoint >= 0 {
		st.RecoveryPoint = min(o.RecoveryPoint, st.NextOffset)
	} else if !o.Clean {
		st.RecoveryPoint = st.Segments[0].Base
	}
	return st, nil
}

// nextOffset finds the log end offset of a segment that was not scanned:
// the recovery point after a clean shutdown, else a walk of the batch
// headers from the last offset-index entry, as Kafka's readNextOffset.
func nextOffset(o PartitionOptions, last Segment) (record.Offset, error) {
	if o.Clean && o.RecoveryPoint >= last.Base {
		return o.RecoveryPoint, nil
	}
	start := record.Position(0)
	if !last.IndexMissing {
		idx, err := index.OpenOffsetIndex(layout.SegmentPath(o.Dir, last.Base, layout.IndexSuffix), last.Base, index.Options{LogSize: last.Size})
		if err == nil {
			if _, pos, err := idx.LastEntry(); err == nil {
				start = pos
			}
			idx.Close()
		}
	}
	logPath := layout.SegmentPath(o.Dir, last.Base, layout.LogSuffix)
	f, err := o.FS.OpenFile(logPath, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	next := last.Base
	sc := record.NewScanner(f, start, last.Size, record.ScanOptions{HeadersOnly: true})
	for sc.Next() {
		next = sc.Batch().NextOffset()
	}
	if err := sc.Err(); err != nil {
		return 0, record.WithFile(err, logPath)
	}
	return next, nil
}

// emptyPartition gives a partition with no segment an empty one at its log
// start (or recovery point), as Kafka does.
func emptyPartition(o PartitionOptions, st *PartitionState) (*PartitionState, error) {
	base := max(o.LogStart, o.RecoveryPoint, 0)
	if !o.ReadOnly {
		b, err := newIndexBuilder(o.Dir, base, o.IndexConfig)
		if err != nil {
			return nil, err
		}
		err = b.finish()
		b.close()
		if err != nil {
			return nil, err
		}
		f, err := o.FS.OpenFile(layout.SegmentPath(o.Dir, base, layout.LogSuffix), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := errors.Join(f.Sync(), f.Close(), o.FS.SyncDir(o.Dir)); err != nil {
			return nil, err
		}
	}
	st.Segments = []Segment{{Base: base, IndexMissing: o.ReadOnly}}
	st.LogStart, st.NextOffset, st.RecoveryPoint = base, base, base
	return st, nil
}

// dropSegments removes segments that follow a cut: what they hold cannot be
// reached without passing the hole.
func dropSegments(o PartitionOptions, files *segmentFiles, bases []record.Offset, st *PartitionState) error {
	for _, base := range bases {
		st.Dropped = append(st.Dropped, base)
		o.Logger.Warn("recovery dropped a segment after a cut", "segment", layout.SegmentPath(o.Dir, base, layout.LogSuffix), "read_only", o.ReadOnly)
		if o.ReadOnly {
			continue
		}
		for _, name := range files.segs[base].names {
			if err := o.FS.Remove(filepath.Join(o.Dir, name)); err != nil && !isNotExist(err) {
				return err
			}
		}
	}
	if o.ReadOnly {
		return nil
	}
	return o.FS.SyncDir(o.Dir)
}

// segmentFiles is what a partition folder holds, by base offset.
type segmentFiles struct {
	segs map[record.Offset]*segmentFile
}

type segmentFile struct {
	size         record.Position
	hasIndex     bool
	hasTimeIndex bool
	names        []string // every file of the segment
}

func (f *segmentFiles) bases() []record.Offset {
	out := make([]record.Offset, 0, len(f.segs))
	for b, s := range f.segs {
		if s.size >= 0 {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// listSegmentFiles lists the folder and handles the leftovers of deletes,
// cleanings and swaps (Kafka's removeTempFilesAndCollectSwapFiles and
// completion of swaps), then removes orphan index files.
func listSegmentFiles(o PartitionOptions) (*segmentFiles, error) {
	entries, err := o.FS.ReadDir(o.Dir)
	if err != nil {
		return nil, err
	}
	remove := func(name string) error {
		if o.ReadOnly {
			return nil
		}
		o.Logger.Info("removing leftover file", "file", filepath.Join(o.Dir, name))
		if err := o.FS.Remove(filepath.Join(o.Dir, name)); err != nil && !isNotExist(err) {
			return err
		}
		return nil
	}
	minCleaned := record.Offset(math.MaxInt64)
	var swaps []string
	var names []string
	for _, e := range entries {
		base, suffix, ok := layout.ParseSegmentFileName(e.Name())
		if !ok || e.IsDir() {
			continue // leader-epoch-checkpoint, partition.metadata, …
		}
		switch {
		case strings.HasSuffix(suffix, layout.DeletedSuffix):
			if err := remove(e.Name()); err != nil {
				return nil, err
			}
		case strings.HasSuffix(suffix, layout.CleanedSuffix):
			minCleaned = min(minCleaned, base)
			if err := remove(e.Name()); err != nil {
				return nil, err
			}
		case strings.HasSuffix(suffix, layout.SwapSuffix):
			swaps = append(swaps, e.Name())
		default:
			names = append(names, e.Name())
		}
	}
	var keptSwaps []string
	for _, name := range swaps {
		base, _, _ := layout.ParseSegmentFileName(name)
		if base >= minCleaned {
			// The swap belongs to a split that never finished (KAFKA-6264).
			if err := remove(name); err != nil {
				return nil, err
			}
			continue
		}
		keptSwaps = append(keptSwaps, name)
	}
	if len(keptSwaps) > 0 && !o.ReadOnly {
		var err error
		if names, err = completeSwaps(o, keptSwaps, names); err != nil {
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
		f := get(base)
		f.names = append(f.names, name)
		switch suffix {
		case layout.LogSuffix:
			info, err := o.FS.Stat(filepath.Join(o.Dir, name))
			if err != nil {
				return nil, err
			}
			f.size = record.Position(info.Size())
		case layout.IndexSuffix:
			f.hasIndex = true
		case layout.TimeIndexSuffix:
			f.hasTimeIndex = true
		}
	}
	for base, f := range files.segs {
		if f.size >= 0 {
			continue
		}
		for _, name := range f.names {
			if isIndexName(name) {
				if err := remove(name); err != nil {
					return nil, err
				}
			}
		}
		delete(files.segs, base)
	}
	return files, nil
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

// completeSwaps finishes a swap that a crash interrupted: the .swap
// segments replace every old segment whose base lies in the range they
// cover, then lose their suffix.
func completeSwaps(o PartitionOptions, swaps, names []string) ([]string, error) {
	lo, hi := record.Offset(math.MaxInt64), record.Offset(-1)
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
		hi = max(hi, next)
	}
	var kept []string
	for _, name := range names {
		base, _, _ := layout.ParseSegmentFileName(name)
		if base >= lo && base < hi && name != "" && (strings.HasSuffix(name, layout.LogSuffix) || isIndexName(name)) {
			o.Logger.Info("removing segment replaced by an interrupted swap", "file", filepath.Join(o.Dir, name))
			if err := o.FS.Remove(filepath.Join(o.Dir, name)); err != nil && !isNotExist(err) {
				return nil, err
			}
			continue
		}
		kept = append(kept, name)
	}
	for _, name := range swaps {
		final := strings.TrimSuffix(name, layout.SwapSuffix)
		if err := o.FS.Rename(filepath.Join(o.Dir, name), filepath.Join(o.Dir, final)); err != nil {
			return nil, err
		}
		kept = append(kept, final)
	}
	sort.Strings(kept)
	return kept, o.FS.SyncDir(o.Dir)
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
