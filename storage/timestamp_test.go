package storage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseTimestampZones: RFC 3339's zone offsets are -23:59 to +23:59;
// Go's parser also takes +24:00 and +12:60, which are refused here. A
// lower-case t and z, which RFC 3339 allows, are taken.
func TestParseTimestampZones(t *testing.T) {
	for in, want := range map[string]int64{
		"2023-11-14T22:13:20+23:59": 1700000000000 - (23*60+59)*60_000,
		"2023-11-14T22:13:20-23:59": 1700000000000 + (23*60+59)*60_000,
		"2023-11-14T22:13:20+00:00": 1700000000000,
		"2023-11-14t22:13:20z":      1700000000000,
		"2023-11-14T22:13:20.25Z":   1700000000250,
	} {
		got, err := ParseTimestamp(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{
		"2023-11-14T22:13:20+24:00", "2023-11-14T22:13:20-24:00", "2023-11-14T22:13:20+12:60",
		"2023-11-14T22:13:20+99:00", "2023-11-14T22:13:20+0100", "2023-11-14T22:13:20",
	} {
		_, err := ParseTimestamp(bad)
		require.ErrorIs(t, err, ErrInvalidTimestamp, bad)
	}
}

// TestJSONRecordRefusesWhatWouldChange: lines that encoding/json would
// take and silently turn into something else are refused: not an object,
// no "value", text that is not UTF-8, lone surrogates.
func TestJSONRecordRefusesWhatWouldChange(t *testing.T) {
	for line, msg := range map[string]string{
		`null`:                                  "a record is a JSON object",
		`  null  `:                              "a record is a JSON object",
		`"hello"`:                               "a record is a JSON object",
		`[]`:                                    "a record is a JSON object",
		`{}`:                                    `a record needs "value"`,
		`{"key":"k"}`:                           `a record needs "value"`,
		`{"value":"\ud800"}`:                    "lone high surrogate \\ud800",
		`{"value":"a\udc00"}`:                   "lone low surrogate \\udc00",
		`{"value":"\ud800\u0041"}`:              "lone high surrogate",
		`{"key":"\ud83d","value":"x"}`:          "lone high surrogate",
		`{"headers":{"h":"\udfff"},"value":""}`: "lone low surrogate",
		"{\"value\":\"\xff\"}":                  "not UTF-8",
	} {
		_, err := ParseJSONRecord([]byte(line))
		require.ErrorIs(t, err, ErrInvalidRecord, line)
		require.ErrorContains(t, err, msg, line)
	}
	for line, want := range map[string]string{
		`{"value":null}`:               "",
		`{"value":"\ud83d\ude00"}`:     "\U0001F600",
		`{"value":"\\ud800"}`:          `\ud800`, // an escaped backslash, not an escape
		`{"value":"\"\ud83d\ude00\""}`: "\"\U0001F600\"",
		`{"value":"é"}`:                "é",
	} {
		r, err := ParseJSONRecord([]byte(line))
		require.NoError(t, err, line)
		require.Equal(t, want, string(r.Value), line)
	}
	r, err := ParseJSONRecord([]byte(`{"value":null}`))
	require.NoError(t, err)
	require.Nil(t, r.Value, "an explicit null is a null value")
}
