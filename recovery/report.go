package recovery

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/logfs/logfs/record"
)

// Report is what loading a data directory found and did; WriteText prints
// it for people. storage keeps it (Log.RecoveryReport) and sums each
// partition's part for Partition.Recovery, which `logfs check` prints.
// Every event in it was also logged when it happened.
type Report struct {
	// Clean says the clean-shutdown marker was found: the checkpoints were
	// trusted and no log data was read.
	Clean bool
	// Forced says every segment was scanned (storage.Options.ForceRecovery).
	Forced bool
	// ReadOnly says nothing was changed: the cuts, drops, removals and
	// rebuilds listed are what a writable open would do.
	ReadOnly   bool
	Partitions []PartitionReport // in the order they were given
	Duration   time.Duration
}

// PartitionReport is what loading one partition folder found and did.
type PartitionReport struct {
	Dir           string
	LogStart      record.Offset
	LogEnd        record.Offset
	RecoveryPoint record.Offset
	Segments      int // segments left in the partition

	// ScannedSegments and ScannedBytes count the segments whose every
	// batch was checked (size, magic, CRC-32C, offsets).
	ScannedSegments int
	ScannedBytes    int64

	// Cuts lists the ranges of invalid bytes cut out of (or off) .log
	// files, one per range, each kept aside in Cut.Aside.
	Cuts []Cut
	// Dropped lists whole segments left out of the log and set aside
	// (renamed to Dropped.AsideAs, never deleted): stray or misnamed
	// files, segments that overlap the one before, and segments past a
	// loss above the recovery point (a crash: never durable).
	Dropped []Dropped
	// Holes lists offsets a gapless partition (logfs's own: it never
	// compacts) lost to a cut, an emptied or set-aside segment: reads
	// that reach them fail, and Check reports them.
	Holes []Hole
	// Expired lists segments removed because they lie entirely below the
	// checkpointed log start: retention had deleted them, but a crash
	// brought some back. Housekeeping, not lost data.
	Expired []Dropped
	// Corrupt lists invalid batches found in segments that are not cut: a
	// segment below the recovery point whose indexes were rebuilt. Reads
	// that reach them fail with a *record.CorruptError.
	Corrupt []Corruption
	// Removed lists leftover files removed: *.deleted, *.cleaned, a *.swap
	// of an unfinished split, index files with no .log, *.tmp.
	Removed []string
	// Swapped lists the *.swap files of an interrupted swap that were
	// renamed into place, and Replaced the files they replaced.
	Swapped  []string
	Replaced []string
	// Rebuilt lists the segments (their .log) whose index files were
	// rebuilt without a scan: they were missing below the recovery point.
	// Scanned segments always get new indexes and are not listed here.
	Rebuilt []string
	// Created is the .log of the empty segment made for a partition that
	// had none.
	Created string
	// Warnings are other findings, e.g. a recovery point beyond the data.
	Warnings []string
}

// Cut is a range of invalid bytes cut out of a .log.
type Cut struct {
	File   string          // the .log
	Base   record.Offset   // the segment's base offset
	At     record.Position // where the range started in the .log as it was
	Bytes  int64           // bytes cut
	Reason string          // the rule the first invalid byte broke
	// Aside is the file that keeps the bytes cut (layout.CutFileName), or
	// "" when they were all zero or the load was read-only.
	Aside string
}

// Dropped is a whole segment left out of the log and set aside.
type Dropped struct {
	File    string // the .log
	Base    record.Offset
	Bytes   int64
	Why     string
	AsideAs string // the name it was renamed to ("" on a read-only load)
}

// Hole is a range of offsets [From, To) lost from a gapless partition.
type Hole struct {
	From, To record.Offset
	Why      string
}

// Corruption is an invalid batch left in place.
type Corruption struct {
	File   string
	At     record.Position
	Reason string
}

// Changed reports whether loading cut, dropped, removed, renamed or
// rebuilt anything (or, read-only, would have).
func (r *PartitionReport) Changed() bool {
	return len(r.Cuts)+len(r.Dropped)+len(r.Expired)+len(r.Removed)+len(r.Swapped)+len(r.Rebuilt) > 0 || r.Created != ""
}

// Changed reports whether any partition changed.
func (r *Report) Changed() bool {
	for i := range r.Partitions {
		if r.Partitions[i].Changed() {
			return true
		}
	}
	return false
}

// Problems returns how many cuts, segments set aside, holes and
// corruptions the report holds:
// findings that lose or hide data, as opposed to housekeeping.
func (r *Report) Problems() int {
	n := 0
	for i := range r.Partitions {
		p := &r.Partitions[i]
		n += len(p.Cuts) + len(p.Dropped) + len(p.Corrupt) + len(p.Holes)
	}
	return n
}

// ScannedBytes sums the bytes scanned over every partition.
func (r *Report) ScannedBytes() int64 {
	var n int64
	for i := range r.Partitions {
		n += r.Partitions[i].ScannedBytes
	}
	return n
}

// WriteText prints the report for people, one line per event and a
// summary line, e.g.
//
//	orders-0: cut 00000000000000000000.log at 4096 (512 bytes): crc is 1c2d3e4f, header says 00000000
//	orders-0: dropped 00000000000000000100.log (2048 bytes): follows a cut
//	recovered 3 partitions: scanned 3 segments (10240 bytes), 1 cut, 1 dropped, 0 corrupt, 2 files removed
//
// With ReadOnly the verbs say what would be done ("would cut").
func (r *Report) WriteText(w io.Writer) error {
	would := ""
	if r.ReadOnly {
		would = "would "
	}
	var err error
	line := func(format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format+"\n", args...)
		}
	}
	var cuts, drops, corrupt, removed, segs int
	for i := range r.Partitions {
		p := &r.Partitions[i]
		name := filepath.Base(p.Dir)
		for _, c := range p.Cuts {
			line("%s", c.String(name, would))
		}
		for _, d := range p.Dropped {
			line("%s", d.String(name, would))
		}
		for _, h := range p.Holes {
			line("%s", h.String(name))
		}
		for _, d := range p.Expired {
			line("%s", d.ExpiredString(name, would))
		}
		for _, c := range p.Corrupt {
			line("%s: corrupt batch in %s at %d: %s", name, filepath.Base(c.File), c.At, c.Reason)
		}
		for _, f := range p.Removed {
			line("%s: %sremove leftover %s", name, would, filepath.Base(f))
		}
		for _, f := range p.Swapped {
			line("%s: %scomplete swap %s", name, would, filepath.Base(f))
		}
		for _, f := range p.Rebuilt {
			line("%s: %srebuild indexes of %s", name, would, filepath.Base(f))
		}
		if p.Created != "" {
			line("%s: %screate empty segment %s", name, would, filepath.Base(p.Created))
		}
		for _, s := range p.Warnings {
			line("%s: %s", name, s)
		}
		cuts += len(p.Cuts)
		drops += len(p.Dropped)
		corrupt += len(p.Corrupt)
		removed += len(p.Removed) + len(p.Expired)
		segs += p.ScannedSegments
	}
	what := "recovered"
	if r.Clean {
		what = "loaded (clean shutdown)"
	}
	line("%s %d partitions: scanned %d segments (%d bytes), %d cut, %d dropped, %d corrupt, %d files removed, in %v",
		what, len(r.Partitions), segs, r.ScannedBytes(), cuts, drops, corrupt, removed, r.Duration.Round(time.Millisecond))
	return err
}

// String is the report's line for the cut: "orders-0: cut
// 00000000000000000500.log bytes 4096 to 8192 (4096 bytes), kept in
// 00000000000000000500.log.cut-4096-8192: crc is …".
func (c *Cut) String(partition, would string) string {
	kept := ""
	if c.Aside != "" {
		kept = ", kept in " + filepath.Base(c.Aside)
	}
	return fmt.Sprintf("%s: %scut %s bytes %d to %d (%d bytes)%s: %s", partition, would, filepath.Base(c.File), c.At, int64(c.At)+c.Bytes, c.Bytes, kept, c.Reason)
}

// String is the report's line for the segment set aside.
func (d *Dropped) String(partition, would string) string {
	as := ""
	if d.AsideAs != "" {
		as = " as " + filepath.Base(d.AsideAs)
	}
	return fmt.Sprintf("%s: %sset aside %s (%d bytes)%s: %s", partition, would, filepath.Base(d.File), d.Bytes, as, d.Why)
}

// ExpiredString is the report's line for a segment removed as expired
// (PartitionReport.Expired).
func (d *Dropped) ExpiredString(partition, would string) string {
	return fmt.Sprintf("%s: %sremove %s (%d bytes): %s", partition, would, filepath.Base(d.File), d.Bytes, d.Why)
}

// String is the report's line for the hole.
func (h *Hole) String(partition string) string {
	return fmt.Sprintf("%s: offsets %d to %d are lost (a hole in a partition that is never compacted): %s", partition, h.From, h.To-1, h.Why)
}
