package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/logfs/logfs/record"
)

var be = binary.BigEndian

// The validation rules, written once: the structural ones run over the
// entries alone whenever a file is first mapped (and by Check); the ones
// that need the log run in a Verifier, fed the segment's batches, by
// storage's Check, `logfs dump --verify`, recovery, and, over the last
// entries, when storage first uses a segment's indexes; lookups apply the
// per-entry ones to the entry they use (CheckEntryStart, TimeEntryScan).
// A CorruptError's Rule starts with one of these, followed by the entry
// and the values that broke it.
const (
	ruleLength         = "length is not a multiple of the entry size"
	ruleZeroEntry      = "all-zero entry followed by entries that are not"
	ruleRelRange       = "relative offset out of [0, MaxInt32]"
	rulePosZero        = "position 0 (Kafka never indexes a segment's first batch)"
	ruleKeyOrder       = "offsets not strictly increasing"
	rulePosOrder       = "positions not strictly increasing"
	rulePosLog         = "position at or past the end of the log"
	ruleTsNegative     = "negative timestamp"
	ruleTsOrder        = "timestamps not strictly increasing"
	ruleOffsetDecrease = "offsets decreasing"

	// Against the log.
	ruleNotBatch      = "position is not the start of a batch"
	ruleKeyBelowBatch = "offset below the base offset of the batch at its position"
	ruleFromAbove     = "the entry before claims offsets of the batch at this entry's position"
	ruleKeyPastSpan   = "offset beyond the last offset of the batches before the next entry's position"
	ruleTimeNoBatch   = "offset held by no batch of the log"
	ruleTimeMax       = "timestamp is not the largest timestamp up to its offset"
	ruleTimeReach     = "timestamp is first reached before where a lookup of its offset starts"
	ruleTimeFinal     = "last timestamp is not the segment's largest"
)

// checkOffsetEntries validates offset-index entries (data holds whole
// entries) and returns how many there are. A tail of all-zero entries
// ends them (a preallocated file that was not trimmed, as Kafka's active
// segment leaves it); a zero entry followed by one that is not is corrupt.
// Keys and positions must strictly increase, and a position must be
// neither 0 nor at or past the log's end (logSize < 0: unknown).
func checkOffsetEntries(data []byte, logSize int64) (int, string) {
	var prevRel, prevPos uint32
	for i := 0; i+OffsetEntrySize <= len(data); i += OffsetEntrySize {
		e := data[i : i+OffsetEntrySize]
		rel, pos := be.Uint32(e), be.Uint32(e[4:])
		n := i / OffsetEntrySize
		switch {
		case rel == 0 && pos == 0:
			if !allZero(data[i:]) {
				return n, fmt.Sprintf("%s: entry %d", ruleZeroEntry, n)
			}
			return n, ""
		case rel > math.MaxInt32:
			return n, fmt.Sprintf("%s: entry %d has %d", ruleRelRange, n, rel)
		case pos == 0:
			return n, fmt.Sprintf("%s: entry %d (relative offset %d)", rulePosZero, n, rel)
		case n > 0 && rel <= prevRel:
			return n, fmt.Sprintf("%s: entry %d has relative offset %d after %d", ruleKeyOrder, n, rel, prevRel)
		case n > 0 && pos <= prevPos:
			return n, fmt.Sprintf("%s: entry %d has position %d after %d", rulePosOrder, n, pos, prevPos)
		case logSize >= 0 && int64(pos) >= logSize:
			return n, fmt.Sprintf("%s: entry %d has position %d, the log has %d bytes", rulePosLog, n, pos, logSize)
		}
		prevRel, prevPos = rel, pos
	}
	return len(data) / OffsetEntrySize, ""
}

// checkTimeEntries validates time-index entries (data holds whole
// entries) and returns how many there are. Timestamps must strictly
// increase and offsets must not decrease; Kafka appends only timestamps
// above the previous one, starting from -1, so none is negative. A tail of
// all-zero entries ends them, as in an offset index; a first entry (0,
// base) that nothing follows reads as such a tail too, so an index with no
// entries does not say a segment with batches has no timestamp of 0 (its
// users learn that from the log). The log size is not used.
func checkTimeEntries(data []byte, _ int64) (int, string) {
	var prevTs int64
	var prevRel uint32
	for i := 0; i+TimeEntrySize <= len(data); i += TimeEntrySize {
		e := data[i : i+TimeEntrySize]
		ts, rel := int64(be.Uint64(e)), be.Uint32(e[8:])
		n := i / TimeEntrySize
		switch {
		case ts == 0 && rel == 0 && allZero(data[i:]):
			return n, ""
		case n > 0 && ts == 0 && rel == 0:
			return n, fmt.Sprintf("%s: entry %d", ruleZeroEntry, n)
		case rel > math.MaxInt32:
			return n, fmt.Sprintf("%s: entry %d has %d", ruleRelRange, n, rel)
		case ts < 0:
			return n, fmt.Sprintf("%s: entry %d has %d", ruleTsNegative, n, ts)
		case n > 0 && ts <= prevTs:
			return n, fmt.Sprintf("%s: entry %d has timestamp %d after %d", ruleTsOrder, n, ts, prevTs)
		case n > 0 && rel < prevRel:
			return n, fmt.Sprintf("%s: entry %d has relative offset %d after %d", ruleOffsetDecrease, n, rel, prevRel)
		}
		prevTs, prevRel = ts, rel
	}
	return len(data) / TimeEntrySize, ""
}

// OffsetEntry is a decoded offset-index entry.
type OffsetEntry struct {
	Offset record.Offset
	Pos    record.Position
}

// TimeEntry is a decoded time-index entry. SearchFrom is where a lookup
// by its timestamp starts scanning the log: the position the offset index
// gives for its offset (Kafka's findOffsetByTimestamp).
type TimeEntry struct {
	Timestamp  int64
	Offset     record.Offset
	SearchFrom record.Position
}

// DecodeOffsetEntries applies the structural rules to the bytes of an
// offset-index file and decodes its entries. logSize < 0 skips the
// position rule. A file that breaks a rule is a *CorruptError naming path.
func DecodeOffsetEntries(path string, data []byte, base record.Offset, logSize record.Position) ([]OffsetEntry, error) {
	if len(data)%OffsetEntrySize != 0 {
		return nil, &CorruptError{File: path, Rule: fmt.Sprintf("%s: %d bytes, entries are %d", ruleLength, len(data), OffsetEntrySize)}
	}
	n, rule := checkOffsetEntries(data, int64(logSize))
	if rule != "" {
		return nil, &CorruptError{File: path, Rule: rule}
	}
	out := make([]OffsetEntry, n)
	for i := range out {
		e := data[i*OffsetEntrySize:]
		out[i] = OffsetEntry{Offset: base + record.Offset(be.Uint32(e)), Pos: record.Position(be.Uint32(e[4:]))}
	}
	return out, nil
}

// DecodeTimeEntries is DecodeOffsetEntries for a time index; each entry's
// SearchFrom comes from offsets, the segment's offset-index entries.
func DecodeTimeEntries(path string, data []byte, base record.Offset, offsets []OffsetEntry) ([]TimeEntry, error) {
	if len(data)%TimeEntrySize != 0 {
		return nil, &CorruptError{File: path, Rule: fmt.Sprintf("%s: %d bytes, entries are %d", ruleLength, len(data), TimeEntrySize)}
	}
	n, rule := checkTimeEntries(data, -1)
	if rule != "" {
		return nil, &CorruptError{File: path, Rule: rule}
	}
	out := make([]TimeEntry, n)
	for i := range out {
		e := data[i*TimeEntrySize:]
		off := base + record.Offset(be.Uint32(e[8:]))
		out[i] = TimeEntry{Timestamp: int64(be.Uint64(e)), Offset: off, SearchFrom: SearchFrom(offsets, off)}
	}
	return out, nil
}

// Seen returns the entries, decoded from the files of a growing log's
// indexes (see Options.Growing), that are for the first logSize bytes of
// it, which end at offset logEnd: the offset entries at positions below
// logSize and the time entries at offsets below logEnd. Decode the offset
// entries with the log's size now, which the others point below.
func Seen(off []OffsetEntry, tim []TimeEntry, logSize record.Position, logEnd record.Offset) ([]OffsetEntry, []TimeEntry) {
	i := sort.Search(len(off), func(i int) bool { return off[i].Pos >= logSize })
	j := sort.Search(len(tim), func(j int) bool { return tim[j].Offset >= logEnd })
	return off[:i], tim[:j]
}

// SearchFrom returns the position of the entry with the largest offset at
// or below off, or 0: where a scan for off starts.
func SearchFrom(offsets []OffsetEntry, off record.Offset) record.Position {
	i := sort.Search(len(offsets), func(i int) bool { return offsets[i].Offset > off })
	if i == 0 {
		return 0
	}
	return offsets[i-1].Pos
}

// CheckEntryStart applies the rule of an offset-index entry to the batch
// that starts at its position, the first one a lookup walks: sp.From <=
// its base offset <= sp.Off (the entry's offset is the largest offset of
// the append that began with this batch, or its first or last: every
// Kafka version keys it so). It returns the broken rule, or "". A span
// with no entry (Pos 0) has nothing to check.
func CheckEntryStart(sp Span, batchBase record.Offset) string {
	switch {
	case sp.Pos <= 0:
		return ""
	case batchBase > sp.Off:
		return fmt.Sprintf("%s: the entry (%d at %d) names a batch with base offset %d", ruleKeyBelowBatch, sp.Off, sp.Pos, batchBase)
	case batchBase < sp.From:
		return fmt.Sprintf("%s: offsets up to %d, the batch at %d has base offset %d", ruleFromAbove, sp.From-1, sp.Pos, batchBase)
	}
	return ""
}

// Batch is what the rules need to know of one batch of a segment's log.
type Batch struct {
	Pos          record.Position
	Base         record.Offset
	Last         record.Offset
	MaxTimestamp int64
}

// BatchOf returns what the rules need of a batch header at pos.
func BatchOf(h *record.BatchHeader, pos record.Position) Batch {
	return Batch{Pos: pos, Base: h.BaseOffset, Last: h.LastOffset(), MaxTimestamp: h.MaxTimestamp}
}

// Verifier checks a segment's offset and time indexes against its log,
// fed the log's valid batches in order. The rule is the one every Kafka
// writer since 0.10.1 satisfies, and logfs's own:
//
//   - offset entry i, (K_i, P_i): P_i is the start of a batch B_i, and
//     base(B_i) <= K_i <= the last offset of the last batch that starts
//     before P_(i+1) (for the last entry, the segment's last offset).
//     Kafka 0.10-1.1 keyed an entry by the first offset of an append, 2.0
//     to 3.9 by its largest offset, at the append's first batch (an
//     append of several batches happens on followers, in the log cleaner
//     and when a segment is split), 4.0 by each batch's last offset.
//   - time entry (T, O): O >= the segment's base and within its batches,
//     T equals the running maximum of the batches' max timestamps up to
//     the last batch that starts at or below O, and the first batch that
//     reaches T starts at or after SearchFrom, where a lookup of T starts
//     scanning (writers put O at the last offset of the batch that reaches
//     T, at the first record carrying T (Kafka 2.x-3.6 leaders), or at the
//     last offset of the append that does).
//   - sealed: the last time entry holds the segment's largest timestamp
//     (Kafka and logfs write it when a segment rolls or closes), and a
//     segment with a timestamp has at least one entry.
//
// With a start position above 0, only the entries at or after it are
// checked (offset entries at P >= start, time entries whose SearchFrom >=
// start): the first-use check of the last entries of each index.
type Verifier struct {
	offPath, timePath string
	start             record.Position
	off               []OffsetEntry
	tim               []TimeEntry

	nextOff int // first offset entry no batch has reached
	openOff int // the entry whose batch was seen and whose span is open, or -1
	nextTim int // first time entry whose batch is not behind
	prev    Batch
	batches int
	runMax  int64           // running max timestamp of the batches fed
	reached record.Position // start of the first batch that reached runMax
	stopped bool            // the valid batches ended before the log did
	// lastTimeFailed says the last time entry broke a rule already.
	lastTimeFailed bool
	errs           []error
	// offFaults and timeFaults are the entries that broke a rule, in the
	// order found (logfs dump reports them as Kafka's tool does).
	offFaults, timeFaults []int
}

// NewVerifier returns a verifier of the given entries (decoded with
// DecodeOffsetEntries and DecodeTimeEntries), for batches fed from start
// on. The paths name the files in the errors.
func NewVerifier(offPath string, off []OffsetEntry, timePath string, tim []TimeEntry, start record.Position) *Verifier {
	v := &Verifier{offPath: offPath, timePath: timePath, start: start, off: off, tim: tim, openOff: -1, runMax: -1}
	for v.nextOff < len(off) && off[v.nextOff].Pos < start {
		v.nextOff++
	}
	for v.nextTim < len(tim) && tim[v.nextTim].SearchFrom < start {
		v.nextTim++
	}
	return v
}

func (v *Verifier) offFail(i int, rule string) {
	v.offFaults = append(v.offFaults, i)
	v.errs = append(v.errs, &CorruptError{File: v.offPath, Rule: fmt.Sprintf("%s: entry %d (offset %d at position %d)", rule, i, v.off[i].Offset, v.off[i].Pos)})
}

func (v *Verifier) timeFail(j int, rule string) {
	v.timeFaults = append(v.timeFaults, j)
	if j == len(v.tim)-1 {
		v.lastTimeFailed = true
	}
	e := v.tim[j]
	v.errs = append(v.errs, &CorruptError{File: v.timePath, Rule: fmt.Sprintf("%s: entry %d (timestamp %d, offset %d)", rule, j, e.Timestamp, e.Offset)})
}

// closeOff ends the span of the open offset entry at a batch boundary:
// last is the last offset of the batch before the boundary.
func (v *Verifier) closeOff(last record.Offset) {
	if v.openOff >= 0 && v.off[v.openOff].Offset > last {
		v.offFail(v.openOff, fmt.Sprintf("%s (%d)", ruleKeyPastSpan, last))
	}
	v.openOff = -1
}

// checkTime checks time entry j against the batches fed so far, the last
// of which is the last batch starting at or below its offset.
func (v *Verifier) checkTime(j int) {
	e := v.tim[j]
	switch {
	case v.batches == 0:
		v.timeFail(j, ruleTimeNoBatch)
	case v.runMax != e.Timestamp:
		v.timeFail(j, fmt.Sprintf("%s (%d)", ruleTimeMax, v.runMax))
	case v.reached < e.SearchFrom:
		v.timeFail(j, fmt.Sprintf("%s (%d reached at %d, lookups start at %d)", ruleTimeReach, e.Timestamp, v.reached, e.SearchFrom))
	}
}

// Batch feeds the next valid batch of the log.
func (v *Verifier) Batch(b Batch) {
	for v.nextTim < len(v.tim) && v.tim[v.nextTim].Offset < b.Base {
		v.checkTime(v.nextTim)
		v.nextTim++
	}
	if b.MaxTimestamp > v.runMax {
		v.runMax, v.reached = b.MaxTimestamp, b.Pos
	}
	for v.nextOff < len(v.off) && v.off[v.nextOff].Pos < b.Pos {
		// A batch began before this entry's position and ran past it.
		v.closeOff(v.prev.Last)
		v.offFail(v.nextOff, ruleNotBatch)
		v.nextOff++
	}
	if v.nextOff < len(v.off) && v.off[v.nextOff].Pos == b.Pos {
		v.closeOff(v.prev.Last)
		if b.Base > v.off[v.nextOff].Offset {
			v.offFail(v.nextOff, fmt.Sprintf("%s (%d)", ruleKeyBelowBatch, b.Base))
		}
		v.openOff = v.nextOff
		v.nextOff++
	}
	v.prev = b
	v.batches++
}

// Stop says the log's valid batches end before the log does (at a bad
// batch): Finish checks only the entries the batches fed cover, and not
// the final-entry rule.
func (v *Verifier) Stop() { v.stopped = true }

// Sealed reports whether a segment's time index must end with its final
// entry, the segment's largest timestamp: whether Finish applies the
// sealed rules. Kafka writes that entry only when a segment stops being
// the active one (LogSegment.onBecomeInactiveSegment, on roll, before the
// next segment is created) and when the log closes (LogSegment.close, on
// a clean shutdown, before .kafka_cleanshutdown is written); logfs does the
// same. So:
//
//   - a segment that is not its partition's last one was rolled: sealed
//     (a process killed at any point keeps the entry, written through the
//     mapping before the next segment exists);
//   - the last one is sealed only when closedCleanly: its directory had
//     .kafka_cleanshutdown when it was opened and nothing was appended to
//     the segment since. After a crash (a broker or a logfs killed with
//     -9) the active segment's time index lacks the entry; that is the
//     state Kafka leaves, not damage, and Kafka's own load accepts it.
//
// A sealed time index cut at an entry boundary breaks the rule (lookups by
// time would skip the segment); an unsealed one is judged by its entries.
// Storage's Check, the first-use check of a segment's indexes, and
// `logfs dump --verify` all decide by this.
func Sealed(last, closedCleanly bool) bool { return !last || closedCleanly }

// Finish ends the log and returns what broke the rules, one
// *CorruptError per entry at fault (the first max of them), or nil.
// sealed applies the rules of a segment whose time index got its final
// entry (see Sealed).
func (v *Verifier) Finish(sealed bool, max int) []error {
	if v.stopped {
		return v.cap(max)
	}
	last := v.prev.Last
	for ; v.nextTim < len(v.tim); v.nextTim++ {
		if v.batches > 0 && v.tim[v.nextTim].Offset > last {
			v.timeFail(v.nextTim, fmt.Sprintf("%s (the segment's last offset is %d)", ruleTimeNoBatch, last))
			continue
		}
		v.checkTime(v.nextTim)
	}
	v.closeOff(last)
	for ; v.nextOff < len(v.off); v.nextOff++ {
		v.offFail(v.nextOff, ruleNotBatch)
	}
	if sealed {
		switch n := len(v.tim); {
		case n > 0 && v.tim[n-1].SearchFrom >= v.start && v.tim[n-1].Timestamp != v.runMax && !v.lastTimeFailed:
			v.timeFail(n-1, fmt.Sprintf("%s (%d)", ruleTimeFinal, v.runMax))
		case n == 0 && v.runMax > 0: // (0, base) reads as an empty file
			v.errs = append(v.errs, &CorruptError{File: v.timePath, Rule: fmt.Sprintf("%s: no entry, the segment's largest timestamp is %d", ruleTimeFinal, v.runMax)})
		}
	}
	return v.cap(max)
}

// Faults returns the offset and time entries that broke a rule, by index,
// once Finish has run (all of them, whatever Finish's max).
func (v *Verifier) Faults() (offsets, times []int) { return v.offFaults, v.timeFaults }

func (v *Verifier) cap(max int) []error {
	if len(v.errs) > max {
		v.errs = v.errs[:max]
	}
	return v.errs
}

// TimeEntryScan checks, for a lookup by time, the time-index entry (ts,
// off) that the lookup started from against the batch headers it scans
// from the entry's SearchFrom on: it calls Batch for each header until it
// returns false, and Err says whether one broke the entry's rule (a batch
// at or below off with a larger timestamp, or none reaching ts by the
// batch holding off). It does not allocate.
type TimeEntryScan struct {
	ts      int64
	off     record.Offset
	done    bool
	reached bool
	rule    string
}

// NewTimeEntryScan starts the check of the entry (ts, off); ts < 0 (no
// entry) checks nothing.
func NewTimeEntryScan(ts int64, off record.Offset) TimeEntryScan {
	return TimeEntryScan{ts: ts, off: off, done: ts < 0}
}

// Batch feeds the next batch header scanned and reports whether the scan
// still needs more.
func (c *TimeEntryScan) Batch(base record.Offset, maxTimestamp int64) bool {
	if c.done {
		return false
	}
	if base > c.off {
		c.done = true
		if !c.reached {
			c.rule = fmt.Sprintf("%s: no batch up to offset %d reaches timestamp %d", ruleTimeMax, c.off, c.ts)
		}
		return false
	}
	switch {
	case maxTimestamp > c.ts:
		c.done = true
		c.rule = fmt.Sprintf("%s: a batch at or below offset %d has timestamp %d above the entry's %d", ruleTimeMax, c.off, maxTimestamp, c.ts)
	case maxTimestamp == c.ts:
		c.reached = true
	}
	return !c.done
}

// Rule returns the broken rule, or "".
func (c *TimeEntryScan) Rule() string { return c.rule }
