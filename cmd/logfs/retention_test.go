package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// segmentBases lists the base offsets of the .log files in a partition
// folder, in order.
func segmentBases(t *testing.T, dir string) []int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var bases []int64
	for _, e := range entries {
		if base, suffix, ok := layout.ParseSegmentFileName(e.Name()); ok && suffix == layout.LogSuffix {
			bases = append(bases, int64(base))
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases
}

// logStart reads log_start_offset from a partition's info file.
func logStart(t *testing.T, part string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(part, "info"))
	require.NoError(t, err)
	var info struct {
		LogStartOffset int64 `json:"log_start_offset"`
	}
	require.NoError(t, json.Unmarshal(b, &info))
	return info.LogStartOffset
}

// waitFor polls cond for up to a minute: what it waits for may be a
// process start and a mount, which a loaded machine slows.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMountRetention runs a mount with a short retention check interval
// and watches retention delete segments by retention.bytes and by
// retention.ms, while readers that opened record files before keep
// reading what they hold: the whole segment they were in, then EIO where
// records they had not reached were deleted (never a silent jump).
func TestMountRetention(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// Segments of a few 100-byte records; retention.bytes keeps about five.
	ok(t, dir, "", "topic", "create", "--data", data, "--config", "segment.bytes=1200",
		"--config", "retention.bytes=6000", "--config", "file.delete.delay.ms=0", "bytes")
	// Records older than a minute go.
	ok(t, dir, "", "topic", "create", "--data", data, "--config", "segment.bytes=1200",
		"--config", "retention.ms=60000", "--config", "file.delete.delay.ms=0", "time")
	mp := filepath.Join(dir, "mnt")
	startMount(t, dir, mp, "--data", data, "-o", "log.retention.check.interval.ms=200")
	bytesPart, timePart := filepath.Join(mp, "bytes", "0"), filepath.Join(mp, "time", "0")

	value := func(i int) string { return fmt.Sprintf("%04d %s", i, strings.Repeat("v", 95)) }
	rendered := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			b.WriteString(value(i) + "\n")
		}
		return b.String()
	}
	// Retention by bytes. Below retention.bytes first, so nothing goes yet.
	for i := range 20 {
		appendLine(t, filepath.Join(bytesPart, "append"), value(i)+"\n")
	}
	bases := segmentBases(t, filepath.Join(data, "bytes-0"))
	require.Greater(t, len(bases), 2)
	var size int64
	for _, base := range bases {
		st, err := os.Stat(filepath.Join(data, "bytes-0", layout.SegmentFileName(record.Offset(base), layout.LogSuffix)))
		require.NoError(t, err)
		size += st.Size()
	}
	require.Less(t, size, int64(6000), "the first records must not reach retention.bytes")
	// A reader that has read the first record and holds the file open.
	held, err := os.Open(filepath.Join(bytesPart, "offset", "0"))
	require.NoError(t, err)
	defer held.Close()
	first := make([]byte, len(value(0))+1)
	_, err = io.ReadFull(held, first)
	require.NoError(t, err)
	require.Equal(t, value(0)+"\n", string(first))
	// Three times as much: the oldest segments go, down to retention.bytes.
	for i := 20; i < 60; i++ {
		appendLine(t, filepath.Join(bytesPart, "append"), value(i)+"\n")
	}
	waitFor(t, "retention by bytes", func() bool { return logStart(t, bytesPart) > bases[1] })
	waitFor(t, "the deleted segment files to go", func() bool { return segmentBases(t, filepath.Join(data, "bytes-0"))[0] > bases[1] })
	for _, name := range []string{"1", "0.jsonl"} { // names the kernel has not cached
		_, err = os.Stat(filepath.Join(bytesPart, "offset", name))
		require.ErrorIs(t, err, syscall.ENOENT, "offset/%s is gone for new opens", name)
	}
	// The held reader reads the rest of its segment, then gets EIO where
	// the records it had not reached were deleted. Through the page cache
	// the kernel read ahead when the file was opened, which had its views
	// pin the segments there were then: it may read on past the held
	// segment, to the end, but never past a gap.
	rest, err := io.ReadAll(held)
	all := rendered(1, 60)
	require.True(t, strings.HasPrefix(all, string(rest)), "the held reader reads on from record 1, whole records, no jump")
	require.GreaterOrEqual(t, len(rest), len(rendered(1, int(bases[1]))), "the rest of the held segment, whole")
	if len(rest) < len(all) {
		require.ErrorIs(t, err, syscall.EIO)
	} else {
		require.NoError(t, err)
	}
	// A new open from the log start reads what is left, to the end.
	start := logStart(t, bytesPart)
	b, err := os.ReadFile(filepath.Join(bytesPart, "offset", "earliest"))
	require.NoError(t, err)
	require.Equal(t, rendered(int(start), 60), string(b))

	// Retention by time: records stamped two hours ago fill several
	// segments; a reader opened before them holds the first one.
	heldTime, err := os.Open(filepath.Join(timePart, "offset", "0"))
	require.NoError(t, err)
	defer heldTime.Close()
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	for i := range 30 {
		appendLine(t, filepath.Join(timePart, "append.jsonl"),
			fmt.Sprintf(`{"timestamp":%d,"value":%q}`+"\n", old+int64(i), value(i)))
	}
	appendLine(t, filepath.Join(timePart, "append"), "now\n")
	// Every segment goes but the one "now" is in, which may begin with
	// the last old records (a segment goes when its newest record expires).
	var timeStart int64
	waitFor(t, "retention by time", func() bool {
		timeStart = logStart(t, timePart)
		return timeStart > 0 && reflect.DeepEqual(segmentBases(t, filepath.Join(data, "time-0")), []int64{timeStart})
	})
	b, err = os.ReadFile(filepath.Join(timePart, "offset", "earliest"))
	require.NoError(t, err)
	require.Equal(t, rendered(int(timeStart), 30)+"now\n", string(b))
	// The reader opened before them reads the records of the segment it
	// held (retention may have rolled it early), then gets EIO. It reads
	// as cat does, in big reads: through the page cache, a read(2) that
	// spans the gap while records before it are still to be read fails
	// whole (see fs/records.go, recordHandle.size).
	got, err := readAllBy(heldTime, 64<<10)
	require.ErrorIs(t, err, syscall.EIO)
	require.NotEmpty(t, got)
	require.True(t, strings.HasPrefix(rendered(0, 30), string(got)), "a prefix of the records: %q", got)
	require.True(t, strings.HasSuffix(string(got), "\n"), "whole records: %q", got)
}

// TestMountRetentionOption checks -o log.retention.check.interval.ms: its
// default, and that it is refused when it is not a positive number.
func TestMountRetentionOption(t *testing.T) {
	m := mountArgs{options: []string{"ro,segment.bytes=1048576"}}
	_, err := parseMountOptions(&m)
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, m.retentionCheck)
	m = mountArgs{options: []string{"log.retention.check.interval.ms=1500,retention.ms=10"}}
	o, err := parseMountOptions(&m)
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, m.retentionCheck)
	require.Equal(t, int64(10), o["retention.ms"])
	for _, bad := range []string{"0", "-1", "x", ""} {
		fails(t, t.TempDir(), exitUsage, "-o log.retention.check.interval.ms="+bad, "mount", "-o", "log.retention.check.interval.ms="+bad, "mnt")
	}
}

// readAllBy reads f to its end or first error in reads of size bytes.
func readAllBy(f *os.File, size int) ([]byte, error) {
	var out []byte
	buf := make([]byte, size)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}
