package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/internal/fixtures"
)

func TestCheckClean(t *testing.T) {
	dir := setupConsume(t)
	out := ok(t, dir, "", "check")
	require.Contains(t, out, "./logfs-data: 1 topic, 1 partition, ")
	require.Contains(t, out, ": OK")
	out = ok(t, dir, "", "check", "--repair", "--data", "./logfs-data")
	require.Contains(t, out, ": OK")
}

// TestCheckFixtures checks every data directory a Kafka broker wrote,
// read-only.
func TestCheckFixtures(t *testing.T) {
	dir := t.TempDir()
	for _, d := range fixtures.DataDirs(t) {
		t.Run(d.Set, func(t *testing.T) {
			require.Contains(t, ok(t, dir, "", "check", "--data", d.Path), ": OK")
		})
	}
}

func TestCheckTornTail(t *testing.T) {
	dir := setupConsume(t)
	logs, err := filepath.Glob(filepath.Join(dir, "logfs-data", "orders-0", "*.log"))
	require.NoError(t, err)
	last := logs[len(logs)-1]
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("half a batch")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	// A crash leaves no clean-shutdown marker.
	require.NoError(t, os.Remove(filepath.Join(dir, "logfs-data", ".kafka_cleanshutdown")))

	r := logfs(t, dir, "", "check")
	requireOneLineError(t, r, exitFailure, "1 problem in ./logfs-data (listed above); logfs check --repair")
	require.Contains(t, r.stdout, "orders-0: would cut "+filepath.Base(last))
	require.Contains(t, r.stdout, "(12 bytes)")
	st, err := os.Stat(last)
	require.NoError(t, err)
	require.Equal(t, "half a batch", tail(t, last, 12), "check must not change anything (size %d)", st.Size())

	out := ok(t, dir, "", "check", "--repair")
	require.Contains(t, out, "orders-0: cut "+filepath.Base(last))
	require.Contains(t, out, "(12 bytes), kept in "+filepath.Base(last)+".cut-")
	require.Contains(t, out, ": OK")
	aside, err := filepath.Glob(last + ".cut-*")
	require.NoError(t, err)
	require.Len(t, aside, 1)
	kept, err := os.ReadFile(aside[0])
	require.NoError(t, err)
	require.Equal(t, "half a batch", string(kept), "the torn tail is kept aside")
	require.FileExists(t, filepath.Join(dir, "logfs-data", ".kafka_cleanshutdown"))
	require.Contains(t, ok(t, dir, "", "check"), ": OK")
	require.Equal(t, viewBytes(t, filepath.Join(dir, "logfs-data"), "orders", 0, 0, 0), ok(t, dir, "", "consume", "--offset", "0", "orders", "0"))
}

// corruptMiddle makes setupConsume's data directory and breaks the CRC of
// the last batch of orders-0's second segment (flipping a byte inside
// its records). It returns the directory and orders-0's segment logs.
func corruptMiddle(t *testing.T) (string, []string) {
	t.Helper()
	dir := setupConsume(t)
	logs, err := filepath.Glob(filepath.Join(dir, "logfs-data", "orders-0", "*.log"))
	require.NoError(t, err)
	require.Greater(t, len(logs), 2)
	b, err := os.ReadFile(logs[1])
	require.NoError(t, err)
	b[len(b)-5] ^= 0xff
	require.NoError(t, os.WriteFile(logs[1], b, 0o644))
	return dir, logs
}

// TestCheckCorruptMiddle damages a batch of the second of several segments:
// check names it; --repair cuts that batch out, keeps it aside and keeps
// every later segment; the lost offsets are a hole that check (and a read
// that reaches it) reports, and reads after it work.
func TestCheckCorruptMiddle(t *testing.T) {
	dir, logs := corruptMiddle(t)

	r := logfs(t, dir, "", "check")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stdout, filepath.Base(logs[1]))
	require.Contains(t, r.stdout, "crc is")
	requireOneLineError(t, r, exitFailure, "in ./logfs-data (listed above)")

	r = logfs(t, dir, "", "check", "--repair")
	require.Equal(t, exitFailure, r.code, "the hole stays: %s", r.stdout)
	require.Regexp(t, `orders-0: cut `+filepath.Base(logs[1])+` bytes \d+ to \d+ \(\d+ bytes\), kept in `+filepath.Base(logs[1])+`\.cut-\d+-\d+`, r.stdout)
	require.Contains(t, r.stdout, "hole")
	for _, l := range logs {
		require.FileExists(t, l, "every segment stays")
	}
	// The bad batch was the last of its segment: the hole lies between
	// that segment and the next. consume from before it prints every
	// record before the hole, then fails there with a one-line error.
	base := strings.TrimLeft(strings.TrimSuffix(filepath.Base(logs[2]), ".log"), "0")
	next, err := strconv.Atoi(base)
	require.NoError(t, err)
	for _, from := range []string{"earliest", "3"} {
		got := fails(t, dir, exitFailure, "are missing", "consume", "--offset", from, "orders", "0")
		require.Contains(t, got.stderr, "offsets missing from a partition that is never compacted")
		lines := strings.Split(strings.TrimSuffix(got.stdout, "\n"), "\n")
		first := 0
		if from == "3" {
			first = 3
		}
		hole := first + len(lines) // the first offset missing
		require.Less(t, hole, next, "the hole lies before segment %d", next)
		require.Greater(t, hole, first+10)
		for i, l := range lines {
			require.Equal(t, fmt.Sprintf("value %d", first+i), l)
		}
		require.Contains(t, got.stderr, fmt.Sprintf("offsets %d to %d are missing", hole, next-1))
	}
	after := ok(t, dir, "", "consume", "--offset", base, "orders", "0")
	require.True(t, strings.HasPrefix(after, "value "+base+"\n"), "reads after the hole work: %q", after[:min(len(after), 40)])
	require.True(t, strings.HasSuffix(after, "value 199\n"))
}

func TestCheckErrors(t *testing.T) {
	dir := t.TempDir()
	fails(t, dir, exitFailure, "data directory ./logfs-data does not exist", "check")
	fails(t, dir, exitUsage, `unexpected argument "./logfs-data"`, "check", "./logfs-data")
	fails(t, dir, exitUsage, "unknown flag: --fix", "check", "--fix")
}

// tail returns the last n bytes of a file.
func tail(t *testing.T, path string, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b[len(b)-n:])
}

// TestCheckAfterCrash: a directory logfs wrote, in the state a kill -9
// leaves it (no clean-shutdown marker; the active segment's time index
// without the final entry that only a roll or a close writes, as Kafka's
// after a crash) is not corrupt: check says OK and dump --verify reports
// nothing. The same file in a sealed segment (issue 12.4's time index cut
// at an entry boundary) is still reported by both.
func TestCheckAfterCrash(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--config", "segment.bytes=2048", "orders")
	for b := range 8 {
		var in strings.Builder
		for i := range 30 {
			n := b*30 + i
			fmt.Fprintf(&in, `{"value":"value %d","timestamp":%d}`+"\n", n, 1700000000000+int64(n)*1000)
		}
		ok(t, dir, in.String(), "produce", "--format", "jsonl", "orders")
	}
	data := filepath.Join(dir, "logfs-data")
	tix, err := filepath.Glob(filepath.Join(data, "orders-0", "*.timeindex"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(tix), 3)
	// cut drops the last entry of a time index and returns the file as it was.
	cut := func(path string) []byte {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(b), index.TimeEntrySize)
		require.NoError(t, os.WriteFile(path, b[:len(b)-index.TimeEntrySize], 0o600))
		return b
	}
	require.NoError(t, os.Remove(filepath.Join(data, ".kafka_cleanshutdown")))
	active := tix[len(tix)-1]
	was := cut(active)
	require.Contains(t, ok(t, dir, "", "check"), ": OK")
	r := logfs(t, dir, "", "dump", "--verify", active)
	require.Equal(t, 0, r.code, "dump --verify of the crashed active segment's time index: %s%s", r.stdout, r.stderr)
	require.NotContains(t, r.stdout+r.stderr, "largest")

	require.NoError(t, os.WriteFile(active, was, 0o600))
	sealed := tix[len(tix)-2]
	cut(sealed)
	for _, args := range [][]string{{"check"}, {"dump", "--verify", sealed}} {
		r := logfs(t, dir, "", args...)
		require.Equal(t, exitFailure, r.code, "logfs %v: %s%s", args, r.stdout, r.stderr)
		require.Contains(t, r.stdout+r.stderr, "last timestamp is not the segment's largest", "logfs %v", args)
		require.Contains(t, r.stdout+r.stderr, filepath.Base(sealed), "logfs %v", args)
	}
}

// TestCheckHoleNeedsNoRepair: after --repair cut a bad batch out, check
// still reports the hole it left (the records are gone), and its error line
// must not send the reader back to --repair, which cannot change that.
func TestCheckHoleNeedsNoRepair(t *testing.T) {
	dir, _ := corruptMiddle(t)
	r := logfs(t, dir, "", "check")
	requireOneLineError(t, r, exitFailure, "(listed above); logfs check --repair cuts bad bytes out")

	r = logfs(t, dir, "", "check", "--repair")
	require.Equal(t, exitFailure, r.code, "the hole stays: %s", r.stdout)
	for range 2 {
		r = logfs(t, dir, "", "check")
		requireOneLineError(t, r, exitFailure, "1 problem in ./logfs-data (listed above); a hole's offsets are lost for good, --repair cannot bring them back")
		require.Contains(t, r.stdout, "hole")
		require.NotContains(t, r.stderr, "logfs check --repair cuts")
		logfs(t, dir, "", "check", "--repair")
	}
}
