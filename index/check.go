package index

import (
	"encoding/binary"
	"fmt"
	"math"
)

var be = binary.BigEndian

// The validation rules. A CorruptError's Rule starts with one of these,
// followed by the entry and the values that broke it. Each rule is checked
// in one pass over the entries, without allocating.
const (
	ruleLength         = "length is not a multiple of the entry size"
	ruleZeroEntry      = "all-zero entry (an untrimmed, preallocated tail)"
	ruleRelRange       = "relative offset out of [0, MaxInt32]"
	rulePosZero        = "position 0 (Kafka never indexes a segment's first batch)"
	ruleKeyOrder       = "offsets not strictly increasing"
	rulePosOrder       = "positions not strictly increasing"
	rulePosLog         = "position at or past the end of the log"
	ruleTsNegative     = "negative timestamp"
	ruleTsOrder        = "timestamps not strictly increasing"
	ruleOffsetDecrease = "offsets decreasing"
)

// checkOffsetEntries validates offset-index entries (data holds whole
// entries). Keys and positions must both strictly increase, so a
// zero-padded tail breaks them at its first entry, and a position must be
// neither 0 nor at or past the log's end (logSize < 0: unknown).
func checkOffsetEntries(data []byte, logSize int64) string {
	var prevRel, prevPos uint32
	for i := 0; i+OffsetEntrySize <= len(data); i += OffsetEntrySize {
		e := data[i : i+OffsetEntrySize]
		rel, pos := be.Uint32(e), be.Uint32(e[4:])
		n := i / OffsetEntrySize
		switch {
		case rel == 0 && pos == 0:
			return fmt.Sprintf("%s: entry %d", ruleZeroEntry, n)
		case rel > math.MaxInt32:
			return fmt.Sprintf("%s: entry %d has %d", ruleRelRange, n, rel)
		case pos == 0:
			return fmt.Sprintf("%s: entry %d (relative offset %d)", rulePosZero, n, rel)
		case n > 0 && rel <= prevRel:
			return fmt.Sprintf("%s: entry %d has relative offset %d after %d", ruleKeyOrder, n, rel, prevRel)
		case n > 0 && pos <= prevPos:
			return fmt.Sprintf("%s: entry %d has position %d after %d", rulePosOrder, n, pos, prevPos)
		case logSize >= 0 && int64(pos) >= logSize:
			return fmt.Sprintf("%s: entry %d has position %d, the log has %d bytes", rulePosLog, n, pos, logSize)
		}
		prevRel, prevPos = rel, pos
	}
	return ""
}

// checkTimeEntries validates time-index entries (data holds whole
// entries). Timestamps must strictly increase and offsets must not
// decrease, so an untrimmed tail (timestamp 0 after larger ones: KAFKA-10207,
// KAFKA-19200) breaks them. Kafka appends only timestamps above the
// previous one, starting from -1, so none is negative. The log size is not
// used.
func checkTimeEntries(data []byte, _ int64) string {
	var prevTs int64
	var prevRel uint32
	for i := 0; i+TimeEntrySize <= len(data); i += TimeEntrySize {
		e := data[i : i+TimeEntrySize]
		ts, rel := int64(be.Uint64(e)), be.Uint32(e[8:])
		n := i / TimeEntrySize
		switch {
		case n > 0 && ts == 0 && rel == 0:
			return fmt.Sprintf("%s: entry %d", ruleZeroEntry, n)
		case rel > math.MaxInt32:
			return fmt.Sprintf("%s: entry %d has %d", ruleRelRange, n, rel)
		case ts < 0:
			return fmt.Sprintf("%s: entry %d has %d", ruleTsNegative, n, ts)
		case n > 0 && ts <= prevTs:
			return fmt.Sprintf("%s: entry %d has timestamp %d after %d", ruleTsOrder, n, ts, prevTs)
		case n > 0 && rel < prevRel:
			return fmt.Sprintf("%s: entry %d has relative offset %d after %d", ruleOffsetDecrease, n, rel, prevRel)
		}
		prevTs, prevRel = ts, rel
	}
	return ""
}
