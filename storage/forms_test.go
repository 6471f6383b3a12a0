package storage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSONRecordTimestampForms: append.jsonl takes "timestamp" as the
// milliseconds .jsonl prints, and as a string in the forms time/ takes.
func TestJSONRecordTimestampForms(t *testing.T) {
	for line, want := range map[string]int64{
		`{"value":"v","timestamp":1700000000000}`:                 1700000000000,
		`{"value":"v","timestamp":"2023-11-14T22:13:20Z"}`:        1700000000000,
		`{"value":"v","timestamp":"2023-11-14T23:13:20.5+01:00"}`: 1700000000500,
		`{"value":"v","timestamp":"2023-11-14"}`:                  1699920000000,
		`{"value":"v","timestamp":"1700000000"}`:                  1700000000000,
		`{"value":"v","timestamp":"1700000000000"}`:               1700000000000,
		`{"value":"v","timestamp":null}`:                          0,
		`{"value":"v"}`:                                           0,
	} {
		r, err := ParseJSONRecord([]byte(line))
		require.NoError(t, err, line)
		require.Equal(t, want, r.Timestamp, line)
	}
	for line, msg := range map[string]string{
		`{"timestamp":-5}`:                     "after 1970",
		`{"timestamp":0}`:                      "after 1970",
		`{"timestamp":1.5}`:                    "whole number",
		`{"timestamp":"yesterday"}`:            "RFC 3339",
		`{"timestamp":"1969-12-31"}`:           "after 1970",
		`{"timestamp":"2023-11-14T25:00:00Z"}`: "RFC 3339",
		`{"timestamp":true}`:                   "whole number",
	} {
		_, err := ParseJSONRecord([]byte(line))
		require.ErrorIs(t, err, ErrInvalidRecord, line)
		require.ErrorContains(t, err, msg, line)
	}
}

// TestConfigRangeErrors: an out-of-range setting names the range, and -1
// where -1 is allowed.
func TestConfigRangeErrors(t *testing.T) {
	o := Overrides{}
	err := o.Set("retention.ms", "-2")
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.EqualError(t, err, "logfs/storage: invalid config: retention.ms=-2 is outside [0, 9223372036854775807], and not -1 (which turns it off)")
	err = o.Set("segment.bytes", "-1")
	require.ErrorContains(t, err, "segment.bytes=-1 is outside [14, 2147483647]")
	require.NotContains(t, err.Error(), "not -1")
	require.NoError(t, o.Set("flush.ms", "-1"))
}
