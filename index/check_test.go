package index

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// corruptCase is one file for the validation rules: its bytes, the log
// size it is opened with (offset index), and the rule it breaks ("" for a
// valid file). A valid file with a zero tail has fewer entries than its
// length holds: entries says how many, when not 0.
type corruptCase struct {
	data    []byte
	logSize record.Position
	rule    string
	entries int
}

// wantEntries returns how many entries a valid case holds.
func (c corruptCase) wantEntries(size int) int {
	if c.entries != 0 {
		return max(c.entries, 0)
	}
	return len(c.data) / size
}

func offsetCheckCases() map[string]corruptCase {
	valid := []oe{{3, 4100}, {9, 8200}, {15, 12300}}
	untrimmed := append(offsetBytes(valid...), make([]byte, 5*OffsetEntrySize)...)
	return map[string]corruptCase{
		"empty file":                       {nil, 0, "", 0},
		"one entry":                        {offsetBytes(oe{1, 100}), -1, "", 0},
		"three entries":                    {offsetBytes(valid...), 20000, "", 0},
		"position just below the log size": {offsetBytes(oe{1, 100}), 101, "", 0},
		"unknown log size skips the rule":  {offsetBytes(oe{1, 1 << 31}), -1, "", 0},
		"relative offset 0 at a position":  {offsetBytes(oe{0, 100}), 200, "", 0},
		"relative offset MaxInt32":         {offsetBytes(oe{0x7fffffff, 100}), 200, "", 0},

		"length not a multiple": {offsetBytes(valid...)[:20], -1, ruleLength, 0},
		"one byte":              {[]byte{1}, -1, ruleLength, 0},
		"a time index's length": {make([]byte, 12), -1, ruleLength, 0},
		// A zero tail ends the entries (Kafka's active segment, untrimmed).
		"one zero entry":                   {make([]byte, 8), -1, "", -1},
		"all zeros, many entries":          {make([]byte, 4096), -1, "", -1},
		"untrimmed tail (KAFKA-7076)":      {untrimmed, 20000, "", 3},
		"untrimmed, unknown log size":      {untrimmed, -1, "", 3},
		"full untrimmed preallocated file": {make([]byte, 1<<20), -1, "", -1},

		"zero entry, then an entry":      {append(offsetBytes(oe{3, 4100}, oe{0, 0}), offsetBytes(oe{9, 8200})...), -1, ruleZeroEntry, 0},
		"position 0":                     {offsetBytes(oe{5, 0}), 100, rulePosZero, 0},
		"position 0 after an entry":      {offsetBytes(oe{5, 100}, oe{6, 0}), 1000, rulePosZero, 0},
		"keys equal":                     {offsetBytes(oe{5, 100}, oe{5, 200}), 1000, ruleKeyOrder, 0},
		"keys decreasing":                {offsetBytes(oe{5, 100}, oe{4, 200}), 1000, ruleKeyOrder, 0},
		"positions equal":                {offsetBytes(oe{5, 100}, oe{6, 100}), 1000, rulePosOrder, 0},
		"positions decreasing":           {offsetBytes(oe{5, 100}, oe{6, 99}), 1000, rulePosOrder, 0},
		"position equal to the log size": {offsetBytes(oe{5, 100}), 100, rulePosLog, 0},
		"position past the log end":      {offsetBytes(oe{5, 100}, oe{6, 5000}), 4096, rulePosLog, 0},
		"any position in an empty log":   {offsetBytes(oe{5, 100}), 0, rulePosLog, 0},
		"relative offset negative":       {offsetBytes(oe{0x80000000, 100}), -1, ruleRelRange, 0},
		"relative offset 0xffffffff":     {offsetBytes(oe{1, 50}, oe{0xffffffff, 100}), -1, ruleRelRange, 0},
	}
}

func timeCheckCases() map[string]corruptCase {
	valid := []te{{1600000000000, 3}, {1600000000500, 3}, {1600000009000, 40}}
	untrimmed := append(timeBytes(valid...), make([]byte, 4*TimeEntrySize)...)
	return map[string]corruptCase{
		"empty file":                        {nil, 0, "", 0},
		"one entry":                         {timeBytes(te{1600000000000, 0}), 0, "", 0},
		"equal offsets, rising timestamps":  {timeBytes(valid...), 0, "", 0},
		"one all-zero entry":                {make([]byte, 12), 0, "", -1},
		"timestamp 0, then later":           {timeBytes(te{0, 0}, te{5, 1}), 0, "", 0},
		"log size is not a time index rule": {timeBytes(valid...), 1, "", 0},

		"length not a multiple":    {timeBytes(valid...)[:30], 0, ruleLength, 0},
		"an offset index's length": {make([]byte, 8), 0, ruleLength, 0},
		// A zero tail after the first entry ends the entries; storage's
		// final-entry rule catches a sealed segment's lost entries.
		"all zeros, two entries":          {make([]byte, 24), 0, "", -1},
		"all zeros, many entries":         {make([]byte, 12*1000), 0, "", -1},
		"untrimmed tail (KAFKA-10207)":    {untrimmed, 0, "", 3},
		"full, last timestamp 0 (19200)":  {timeBytes(te{100, 1}, te{200, 5}, te{0, 0}), 0, "", 2},
		"zero entry, then an entry":       {timeBytes(te{100, 1}, te{0, 0}, te{200, 5}), 0, ruleZeroEntry, 0},
		"last timestamp 0, offset kept":   {timeBytes(te{100, 1}, te{200, 5}, te{0, 5}), 0, ruleTsOrder, 0},
		"timestamps equal":                {timeBytes(te{100, 1}, te{100, 2}), 0, ruleTsOrder, 0},
		"timestamps decreasing":           {timeBytes(te{100, 1}, te{99, 2}), 0, ruleTsOrder, 0},
		"offsets decreasing":              {timeBytes(te{100, 2}, te{101, 1}), 0, ruleOffsetDecrease, 0},
		"negative timestamp":              {timeBytes(te{-1, 1}), 0, ruleTsNegative, 0},
		"negative timestamp after others": {timeBytes(te{5, 1}, te{-5, 2}), 0, ruleTsNegative, 0},
		"relative offset negative":        {timeBytes(te{100, 0x80000000}), 0, ruleRelRange, 0},
		"relative offset 0xffffffff":      {timeBytes(te{100, 1}, te{200, 0xffffffff}), 0, ruleRelRange, 0},
	}
}

// requireRule checks err against a case's rule.
func requireRule(t *testing.T, err error, rule, path string) {
	t.Helper()
	if rule == "" {
		require.NoError(t, err)
		return
	}
	require.ErrorIs(t, err, ErrCorrupt)
	var ce *CorruptError
	require.True(t, errors.As(err, &ce), "a *CorruptError: %v", err)
	require.Equal(t, path, ce.File)
	require.True(t, strings.HasPrefix(ce.Rule, rule), "rule %q, want %q", ce.Rule, rule)
}

func TestOffsetValidation(t *testing.T) {
	for name, tc := range offsetCheckCases() {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, "00000000000000000100.index", tc.data)
			o := Options{LogSize: tc.logSize, MaxBytes: 1 << 20}

			// Lazy: opening reads nothing, first use validates.
			x, err := OpenOffsetIndex(p, 100, o)
			require.NoError(t, err)
			require.False(t, x.Mapped())
			requireRule(t, x.Check(), tc.rule, p)
			_, _, lerr := x.Lookup(105)
			requireRule(t, lerr, tc.rule, p)
			_, eerr := x.Entries()
			requireRule(t, eerr, tc.rule, p)
			if tc.rule != "" {
				require.False(t, x.Mapped(), "a corrupt index is unmapped")
				_, _, err := x.LastEntry()
				requireRule(t, err, tc.rule, p)
				require.True(t, x.IsFull())
				require.Equal(t, 0, x.MaxEntries())
			}
			require.NoError(t, x.Close())

			// Writable: validated before the file is touched.
			w, err := OpenOffsetIndex(p, 100, Options{LogSize: tc.logSize, MaxBytes: 1 << 20, Writable: true})
			requireRule(t, err, tc.rule, p)
			if tc.rule != "" {
				require.Nil(t, w)
				got, rerr := os.ReadFile(p)
				require.NoError(t, rerr)
				require.True(t, bytes.Equal(tc.data, got), "a corrupt file is left as it was")
				return
			}
			require.Equal(t, int64(len(tc.data)), fileSize(t, p), "nothing is preallocated")
			n, err := w.Entries()
			require.NoError(t, err)
			require.Equal(t, tc.wantEntries(OffsetEntrySize), n)
			require.NoError(t, w.Close())
			require.Equal(t, int64(n*OffsetEntrySize), fileSize(t, p))
		})
	}
}

func TestTimeValidation(t *testing.T) {
	for name, tc := range timeCheckCases() {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, "00000000000000000100.timeindex", tc.data)
			o := Options{LogSize: tc.logSize, MaxBytes: 1 << 20}

			x, err := OpenTimeIndex(p, 100, o)
			require.NoError(t, err)
			require.False(t, x.Mapped())
			requireRule(t, x.Check(), tc.rule, p)
			_, _, lerr := x.Lookup(1600000000600)
			requireRule(t, lerr, tc.rule, p)
			_, _, eerr := x.LastEntry()
			requireRule(t, eerr, tc.rule, p)
			require.NoError(t, x.Close())

			o.Writable = true
			w, err := OpenTimeIndex(p, 100, o)
			requireRule(t, err, tc.rule, p)
			if tc.rule != "" {
				require.Nil(t, w)
				got, rerr := os.ReadFile(p)
				require.NoError(t, rerr)
				require.True(t, bytes.Equal(tc.data, got), "a corrupt file is left as it was")
				return
			}
			require.Equal(t, int64(len(tc.data)), fileSize(t, p), "nothing is preallocated")
			n, err := w.Entries()
			require.NoError(t, err)
			require.Equal(t, tc.wantEntries(TimeEntrySize), n)
			require.NoError(t, w.Close())
			require.Equal(t, int64(n*TimeEntrySize), fileSize(t, p))
		})
	}
}

func TestCheckLogSize(t *testing.T) {
	// A new index knows no log size beyond what it is told, and every
	// append proves the log reaches past its position.
	x, err := CreateOffsetIndex(t.TempDir()+"/a.index", 0, Options{MaxBytes: 1024})
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Append(5, 4000))
	require.NoError(t, x.Check())
	require.NoError(t, x.CheckLogSize(4001))
	requireRule(t, x.CheckLogSize(4000), rulePosLog, x.Path())
	require.NoError(t, x.CheckLogSize(-1))
}

func TestValidationDoesNotAllocate(t *testing.T) {
	var off, tm []byte
	for i := 1; i <= 10000; i++ {
		off = append(off, offsetBytes(oe{uint32(i), uint32(i * 10)})...)
		tm = append(tm, timeBytes(te{int64(i), uint32(i)})...)
	}
	require.Zero(t, testing.AllocsPerRun(10, func() {
		if _, r := checkOffsetEntries(off, -1); r != "" {
			panic("valid entries failed")
		}
		if _, r := checkTimeEntries(tm, 0); r != "" {
			panic("valid entries failed")
		}
	}))
}

// TestVerifierRules runs the rule against the log (Verifier) over one small
// segment: base 100, four batches.
func TestVerifierRules(t *testing.T) {
	batches := []Batch{
		{Pos: 0, Base: 100, Last: 104, MaxTimestamp: 1000},
		{Pos: 200, Base: 105, Last: 109, MaxTimestamp: 3000},
		{Pos: 400, Base: 110, Last: 114, MaxTimestamp: 2000},
		{Pos: 600, Base: 117, Last: 119, MaxTimestamp: 4000}, // a compaction gap before it
	}
	type o = OffsetEntry
	type tm = TimeEntry
	cases := map[string]struct {
		off    []OffsetEntry
		tim    []TimeEntry
		sealed bool
		rule   string
	}{
		"none":                                {nil, nil, false, ""},
		"final only":                          {nil, []tm{{4000, 119, 0}}, true, ""},
		"per batch (logfs, Kafka 4.0)":        {[]o{{109, 200}, {114, 400}, {119, 600}}, []tm{{3000, 109, 200}, {4000, 119, 600}}, true, ""},
		"first offset of the append (1.1)":    {[]o{{105, 200}, {117, 600}}, []tm{{3000, 109, 200}, {4000, 119, 600}}, true, ""},
		"largest offset of the append (2.x)":  {[]o{{114, 200}, {119, 600}}, []tm{{3000, 109, 200}, {4000, 119, 600}}, true, ""},
		"record carrying the max (2.x lead)":  {[]o{{114, 200}}, []tm{{3000, 107, 200}, {4000, 118, 200}}, true, ""},
		"append's last offset":                {[]o{{114, 200}}, []tm{{3000, 114, 200}, {4000, 119, 200}}, true, ""},
		"offset in a compaction gap":          {nil, []tm{{3000, 115, 0}, {4000, 119, 0}}, true, ""},
		"active: no final entry yet":          {nil, []tm{{3000, 109, 0}}, false, ""},
		"position inside a batch":             {[]o{{109, 250}}, nil, false, ruleNotBatch},
		"position past the last batch":        {[]o{{119, 700}}, nil, false, ruleNotBatch},
		"key below the batch's base":          {[]o{{104, 200}}, nil, false, ruleKeyBelowBatch},
		"key past the span":                   {[]o{{115, 200}, {119, 600}}, nil, false, ruleKeyPastSpan},
		"last key past the segment":           {[]o{{120, 600}}, nil, false, ruleKeyPastSpan},
		"timestamp not reached by its offset": {nil, []tm{{3000, 104, 0}}, false, ruleTimeMax},
		"timestamp below the max so far":      {nil, []tm{{2000, 114, 0}}, false, ruleTimeMax},
		"timestamp reached before the search": {[]o{{109, 200}, {114, 400}}, []tm{{3000, 114, 400}}, false, ruleTimeReach},
		"offset past the segment":             {nil, []tm{{4000, 120, 0}}, false, ruleTimeNoBatch},
		"truncated: final entry lost":         {nil, []tm{{3000, 109, 0}}, true, ruleTimeFinal},
		"sealed, no entry at all":             {nil, nil, true, ruleTimeFinal},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			v := NewVerifier("x.index", c.off, "x.timeindex", c.tim, 0)
			for _, b := range batches {
				v.Batch(b)
			}
			errs := v.Finish(c.sealed, 10)
			if c.rule == "" {
				require.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			requireRule(t, errs[0], c.rule, map[bool]string{true: "x.timeindex", false: "x.index"}[strings.HasPrefix(c.rule, "timestamp") || strings.HasPrefix(c.rule, "last timestamp") || c.rule == ruleTimeNoBatch])
		})
	}
}

// TestTimeEntryScan checks a lookup's own check of the time entry it used.
func TestTimeEntryScan(t *testing.T) {
	type h struct {
		base record.Offset
		ts   int64
	}
	cases := map[string]struct {
		ts      int64
		off     record.Offset
		headers []h
		rule    string
	}{
		"reached at its offset":      {3000, 109, []h{{105, 3000}, {110, 2000}}, ""},
		"reached before its offset":  {3000, 112, []h{{105, 3000}, {110, 2000}, {115, 5000}}, ""},
		"no entry":                   {-1, 100, []h{{100, 9000}}, ""},
		"a larger timestamp before":  {3000, 112, []h{{105, 3500}}, ruleTimeMax},
		"never reached by its batch": {3000, 112, []h{{105, 1000}, {110, 2000}, {115, 3000}}, ruleTimeMax},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewTimeEntryScan(c.ts, c.off)
			for _, x := range c.headers {
				if !s.Batch(x.base, x.ts) {
					break
				}
			}
			if c.rule == "" {
				require.Empty(t, s.Rule())
			} else {
				require.True(t, strings.HasPrefix(s.Rule(), c.rule), s.Rule())
			}
		})
	}
}

// TestSealedRule: the final time entry is required of every segment but
// the last, and of the last only after a clean shutdown; a Verifier then
// reports a time index that lacks it, and otherwise does not.
func TestSealedRule(t *testing.T) {
	require.True(t, Sealed(false, false), "a rolled segment")
	require.True(t, Sealed(false, true))
	require.False(t, Sealed(true, false), "the active segment after a crash")
	require.True(t, Sealed(true, true), "the last segment of a cleanly closed log")

	// Two batches; the time index has the first one's entry only.
	batches := []Batch{{Pos: 0, Base: 0, Last: 9, MaxTimestamp: 100}, {Pos: 500, Base: 10, Last: 19, MaxTimestamp: 200}}
	tim := []TimeEntry{{Timestamp: 100, Offset: 9}}
	for _, last := range []bool{false, true} {
		for _, clean := range []bool{false, true} {
			v := NewVerifier("x.index", nil, "x.timeindex", tim, 0)
			for _, b := range batches {
				v.Batch(b)
			}
			errs := v.Finish(Sealed(last, clean), 10)
			if Sealed(last, clean) {
				require.Len(t, errs, 1, "last=%v clean=%v", last, clean)
				require.ErrorContains(t, errs[0], ruleTimeFinal)
			} else {
				require.Empty(t, errs, "last=%v clean=%v", last, clean)
			}
		}
	}
}
