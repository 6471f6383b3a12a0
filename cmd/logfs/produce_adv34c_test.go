package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A JSON line may be up to six times longer than the record it encodes
// (\u0000 escapes, as consume --format jsonl prints NULs): produce --format
// jsonl must judge the record, not the line's length, or what consume
// printed cannot be produced again. The line has no final newline, so it is
// still unfinished when produce measures it.
func TestProduceJSONLEscapedLineLongerThanLimitAdv34c(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--config", "max.message.bytes=1000", "src")
	ok(t, dir, "", "topic", "create", "--config", "max.message.bytes=1000", "dst")
	ok(t, dir, strings.Repeat("\x00", 300), "produce", "src")
	line := ok(t, dir, "", "consume", "--offset", "earliest", "--format", "jsonl", "src", "0")
	require.Greater(t, len(line), 1000, "the JSON line is longer than max.message.bytes")
	ok(t, dir, strings.TrimSuffix(line, "\n"), "produce", "--format", "jsonl", "dst")
	recs := readAll(t, filepath.Join(dir, "logfs-data"), "dst", 0)
	require.Len(t, recs, 1)
	require.Equal(t, strings.Repeat("\x00", 300), string(recs[0].Value))
}
