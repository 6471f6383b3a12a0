package storage

import (
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
)

// RecoveryReport says what opening a partition found in its files. After a
// clean shutdown it is all zeros: nothing was scanned.
type RecoveryReport struct {
	// ScannedBytes is how much .log data was read to verify its batches.
	ScannedBytes int64
	// CutBytes counts the bytes from each scanned segment's first invalid
	// batch to its end: cut from the file, or on a read-only open left in
	// place and not read.
	CutBytes int64
	// Dropped lists the base offsets of the segments that followed a cut
	// or a hole: removed, or on a read-only open left in place and not
	// read.
	Dropped []record.Offset
}

// newRecoveryReport sums what recovery reported for one partition.
func newRecoveryReport(r *recovery.PartitionReport) RecoveryReport {
	out := RecoveryReport{ScannedBytes: r.ScannedBytes}
	for _, c := range r.Cuts {
		out.CutBytes += c.Bytes
	}
	for _, d := range r.Dropped {
		out.Dropped = append(out.Dropped, d.Base)
	}
	return out
}

// Recovery returns what opening the partition found and did: what `logfs
// check` reports, and with Options.ForceRecovery what `logfs check --repair`
// cut.
func (p *Partition) Recovery() RecoveryReport {
	r := p.recovered
	r.Dropped = append([]record.Offset(nil), r.Dropped...)
	return r
}
