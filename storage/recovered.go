package storage

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
)

// RecoveryReport says what opening a partition found in its files. After a
// clean shutdown it is all zeros: nothing was scanned.
type RecoveryReport struct {
	// ScannedBytes is how much .log data was read to verify its batches.
	ScannedBytes int64
	// CutBytes counts the invalid bytes cut out of (or off) the scanned
	// segments, each range kept aside in a file beside its segment; on a
	// read-only open, what a writable one would cut.
	CutBytes int64
	// Dropped lists the base offsets of the segments set aside whole
	// (renamed *.log.stray, never deleted): stray, misnamed or
	// overlapping files, and segments past a loss above the recovery
	// point; on a read-only open left in place and not read.
	Dropped []record.Offset
	// Lines says each damage found, one line each: the cuts (with where
	// their bytes went), the segments set aside, the holes, and the files
	// removed on the word of the log start checkpoint or of a swap.
	Lines []string
}

// newRecoveryReport sums what recovery reported for one partition.
func newRecoveryReport(r *recovery.PartitionReport, readOnly bool) RecoveryReport {
	out := RecoveryReport{ScannedBytes: r.ScannedBytes}
	would := ""
	if readOnly {
		would = "would "
	}
	name := filepath.Base(r.Dir)
	for _, c := range r.Cuts {
		out.CutBytes += c.Bytes
		out.Lines = append(out.Lines, c.String(name, would))
	}
	for _, d := range r.Dropped {
		out.Dropped = append(out.Dropped, d.Base)
		out.Lines = append(out.Lines, d.String(name, would))
	}
	for _, h := range r.Holes {
		out.Lines = append(out.Lines, h.String(name))
	}
	// Files the open removes although their batches may pass their checks,
	// by the word of a checkpoint or of a swap: the user sees them before
	// a repair acts on them.
	for _, d := range r.Expired {
		out.Lines = append(out.Lines, d.ExpiredString(name, would))
	}
	if len(r.Swapped) > 0 {
		swapped := make([]string, len(r.Swapped))
		for i, f := range r.Swapped {
			swapped[i] = filepath.Base(f)
		}
		replaced := make([]string, len(r.Replaced))
		for i, f := range r.Replaced {
			replaced[i] = filepath.Base(f)
		}
		out.Lines = append(out.Lines, fmt.Sprintf("%s: %scomplete an interrupted swap of the log cleaner: %s in place of %s",
			name, would, strings.Join(swapped, ", "), orNone(strings.Join(replaced, ", "))))
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// Recovery returns what opening the partition found and did: what `logfs
// check` reports, and with Options.ForceRecovery what `logfs check --repair`
// cut.
func (p *Partition) Recovery() RecoveryReport {
	r := p.recovered
	r.Dropped = append([]record.Offset(nil), r.Dropped...)
	r.Lines = append([]string(nil), r.Lines...)
	return r
}
