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
// valid file).
type corruptCase struct {
	data    []byte
	logSize record.Position
	rule    string
}

func offsetCheckCases() map[string]corruptCase {
	valid := []oe{{3, 4100}, {9, 8200}, {15, 12300}}
	untrimmed := append(offsetBytes(valid...), make([]byte, 5*OffsetEntrySize)...)
	return map[string]corruptCase{
		"empty file":                       {nil, 0, ""},
		"one entry":                        {offsetBytes(oe{1, 100}), -1, ""},
		"three entries":                    {offsetBytes(valid...), 20000, ""},
		"position just below the log size": {offsetBytes(oe{1, 100}), 101, ""},
		"unknown log size skips the rule":  {offsetBytes(oe{1, 1 << 31}), -1, ""},
		"relative offset 0 at a position":  {offsetBytes(oe{0, 100}), 200, ""},
		"relative offset MaxInt32":         {offsetBytes(oe{0x7fffffff, 100}), 200, ""},

		"length not a multiple":            {offsetBytes(valid...)[:20], -1, ruleLength},
		"one byte":                         {[]byte{1}, -1, ruleLength},
		"a time index's length":            {make([]byte, 12), -1, ruleLength},
		"one zero entry":                   {make([]byte, 8), -1, ruleZeroEntry},
		"all zeros, many entries":          {make([]byte, 4096), -1, ruleZeroEntry},
		"untrimmed tail (KAFKA-7076)":      {untrimmed, 20000, ruleZeroEntry},
		"untrimmed, unknown log size":      {untrimmed, -1, ruleZeroEntry},
		"full untrimmed preallocated file": {make([]byte, 1<<20), -1, ruleZeroEntry},
		"position 0":                       {offsetBytes(oe{5, 0}), 100, rulePosZero},
		"position 0 after an entry":        {offsetBytes(oe{5, 100}, oe{6, 0}), 1000, rulePosZero},
		"keys equal":                       {offsetBytes(oe{5, 100}, oe{5, 200}), 1000, ruleKeyOrder},
		"keys decreasing":                  {offsetBytes(oe{5, 100}, oe{4, 200}), 1000, ruleKeyOrder},
		"positions equal":                  {offsetBytes(oe{5, 100}, oe{6, 100}), 1000, rulePosOrder},
		"positions decreasing":             {offsetBytes(oe{5, 100}, oe{6, 99}), 1000, rulePosOrder},
		"position equal to the log size":   {offsetBytes(oe{5, 100}), 100, rulePosLog},
		"position past the log end":        {offsetBytes(oe{5, 100}, oe{6, 5000}), 4096, rulePosLog},
		"any position in an empty log":     {offsetBytes(oe{5, 100}), 0, rulePosLog},
		"relative offset negative":         {offsetBytes(oe{0x80000000, 100}), -1, ruleRelRange},
		"relative offset 0xffffffff":       {offsetBytes(oe{1, 50}, oe{0xffffffff, 100}), -1, ruleRelRange},
	}
}

func timeCheckCases() map[string]corruptCase {
	valid := []te{{1600000000000, 3}, {1600000000500, 3}, {1600000009000, 40}}
	untrimmed := append(timeBytes(valid...), make([]byte, 4*TimeEntrySize)...)
	return map[string]corruptCase{
		"empty file":                        {nil, 0, ""},
		"one entry":                         {timeBytes(te{1600000000000, 0}), 0, ""},
		"equal offsets, rising timestamps":  {timeBytes(valid...), 0, ""},
		"one all-zero entry":                {make([]byte, 12), 0, ""},
		"timestamp 0, then later":           {timeBytes(te{0, 0}, te{5, 1}), 0, ""},
		"log size is not a time index rule": {timeBytes(valid...), 1, ""},

		"length not a multiple":           {timeBytes(valid...)[:30], 0, ruleLength},
		"an offset index's length":        {make([]byte, 8), 0, ruleLength},
		"all zeros, two entries":          {make([]byte, 24), 0, ruleZeroEntry},
		"all zeros, many entries":         {make([]byte, 12*1000), 0, ruleZeroEntry},
		"untrimmed tail (KAFKA-10207)":    {untrimmed, 0, ruleZeroEntry},
		"full, last timestamp 0 (19200)":  {timeBytes(te{100, 1}, te{200, 5}, te{0, 0}), 0, ruleZeroEntry},
		"last timestamp 0, offset kept":   {timeBytes(te{100, 1}, te{200, 5}, te{0, 5}), 0, ruleTsOrder},
		"timestamps equal":                {timeBytes(te{100, 1}, te{100, 2}), 0, ruleTsOrder},
		"timestamps decreasing":           {timeBytes(te{100, 1}, te{99, 2}), 0, ruleTsOrder},
		"offsets decreasing":              {timeBytes(te{100, 2}, te{101, 1}), 0, ruleOffsetDecrease},
		"negative timestamp":              {timeBytes(te{-1, 1}), 0, ruleTsNegative},
		"negative timestamp after others": {timeBytes(te{5, 1}, te{-5, 2}), 0, ruleTsNegative},
		"relative offset negative":        {timeBytes(te{100, 0x80000000}), 0, ruleRelRange},
		"relative offset 0xffffffff":      {timeBytes(te{100, 1}, te{200, 0xffffffff}), 0, ruleRelRange},
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
			require.Equal(t, int64(max(len(tc.data), 1<<20)), fileSize(t, p))
			require.NoError(t, w.Close())
			require.Equal(t, int64(len(tc.data)), fileSize(t, p))
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
			require.Equal(t, int64(1<<20-(1<<20)%TimeEntrySize), fileSize(t, p))
			require.NoError(t, w.Close())
			require.Equal(t, int64(len(tc.data)), fileSize(t, p))
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
		if checkOffsetEntries(off, -1) != "" || checkTimeEntries(tm, 0) != "" {
			panic("valid entries failed")
		}
	}))
}
