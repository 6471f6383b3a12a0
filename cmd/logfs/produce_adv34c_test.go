package main

import (
	"fmt"
	"os"
	"os/exec"
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

// When produce fails after earlier reads went in (a bad line in a later
// read of stdin, a full disk), its one error line says what did go in, so
// that the user knows where to go on from: the summary it prints on
// success is not printed then.
func TestProduceFailureSaysWhatWentInAdv34c(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "orders")
	// A regular file as stdin: each read takes 1 MiB (produceChunk), so
	// the good lines before the bad one make at least one batch of their
	// own.
	var in strings.Builder
	n := 0
	for in.Len() <= produceChunk {
		in.WriteString(`{"value":"a line of the first read"}` + "\n")
		n++
	}
	in.WriteString("not json\n")
	path := filepath.Join(dir, "in.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(in.String()), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command(logfsBin, "produce", "--format", "jsonl", "orders")
	cmd.Dir, cmd.Stdin = dir, f
	var stderr strings.Builder
	cmd.Stderr = &stderr
	r := result{stderr: "", code: exitCode(t, cmd.Run())}
	r.stderr = stderr.String()
	requireOneLineError(t, r, exitFailure, fmt.Sprintf("line %d", n+1))
	got := len(readAll(t, filepath.Join(dir, "logfs-data"), "orders", 0))
	require.Positive(t, got)
	require.Contains(t, r.stderr, fmt.Sprintf("appended %d records", got), "the error says what went in")
	require.Contains(t, r.stderr, fmt.Sprintf("offsets 0 to %d", got-1))
}
