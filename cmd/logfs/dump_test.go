package main

import (
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/internal/kafkaindex"
	"github.com/logfs/logfs/record"
)

// decodeCounts counts the batches and records of a .log through package
// record directly.
func decodeCounts(t *testing.T, path string) (batches, records int) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	var dec record.Decoder
	sc := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{})
	for sc.Next() {
		batches++
		it, err := dec.Records(sc.Batch())
		require.NoError(t, err)
		for it.Next() {
			records++
		}
		require.NoError(t, it.Err())
	}
	require.NoError(t, sc.Err())
	return batches, records
}

// TestDumpFixtures dumps every segment file Kafka brokers wrote and checks
// that every batch and every record is printed, and that every index
// verifies against its log.
func TestDumpFixtures(t *testing.T) {
	logs := fixtures.Files(t, ".log")
	require.NotEmpty(t, logs)
	dir := t.TempDir()
	for _, path := range logs {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			wantBatches, wantRecords := decodeCounts(t, path)
			out := ok(t, dir, "", "dump", "--print-data", path)
			var batches, records int
			for _, line := range strings.Split(out, "\n") {
				switch {
				case strings.HasPrefix(line, "baseOffset: "):
					batches++
					require.Contains(t, line, "isvalid: true")
				case strings.HasPrefix(line, "| offset: "):
					records++
					require.Regexp(t, `( payload: | endTxnMarker: | controlType: )`, line)
				}
			}
			require.Equal(t, wantBatches, batches, "batches of %s", path)
			require.Equal(t, wantRecords, records, "records of %s", path)
		})
	}
	var indexes []string
	indexes = append(indexes, fixtures.Files(t, ".index")...)
	indexes = append(indexes, fixtures.Files(t, ".timeindex")...)
	require.NotEmpty(t, indexes)
	out := ok(t, dir, "", append([]string{"dump", "--verify"}, indexes...)...)
	require.Equal(t, len(indexes), strings.Count(out, "Verified "), out)
	require.NotContains(t, out, "ERROR")
}

// TestDumpFormats checks the lines of a dump of files logfs wrote.
func TestDumpFormats(t *testing.T) {
	dir := setupConsume(t) // 2 KiB segments of JSON-produced records
	seg := filepath.Join(dir, "logfs-data", "orders-0")
	logs, err := filepath.Glob(filepath.Join(seg, "*.log"))
	require.NoError(t, err)
	require.Greater(t, len(logs), 1)

	out := ok(t, dir, "", "dump", logs[0])
	require.Contains(t, out, "Dumping "+logs[0]+"\nLog starting offset: 0\nbaseOffset: 0 lastOffset: ")
	require.Contains(t, out, "| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 7 sequence: -1 headerKeys: []\n")
	require.NotContains(t, out, "payload:")
	out = ok(t, dir, "", "dump", "--print-data", logs[0])
	require.Contains(t, out, "headerKeys: [] key: k0 payload: value 0\n")

	out = ok(t, dir, "", "dump", "--verify", filepath.Join(seg, "00000000000000000000.index"), filepath.Join(seg, "00000000000000000000.timeindex"))
	require.Regexp(t, `timestamp: 17000000\d+000 offset: \d+\n`, out)
	require.Equal(t, 2, strings.Count(out, "Verified "))
	// Everything in the folder, .viewindex included, dumps cleanly.
	all, err := filepath.Glob(filepath.Join(seg, "*"))
	require.NoError(t, err)
	ok(t, dir, "", append([]string{"dump", "--verify"}, all...)...)
}

func TestDumpErrors(t *testing.T) {
	dir := setupConsume(t)
	seg := filepath.Join(dir, "logfs-data", "orders-0")
	logPath := filepath.Join(seg, "00000000000000000000.log")
	logBytes, err := os.ReadFile(logPath)
	require.NoError(t, err)
	bad := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(bad, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}

	fails(t, dir, exitUsage, "missing FILE", "dump")
	fails(t, dir, exitUsage, "unknown flag: --deep-iteration", "dump", "--deep-iteration", logPath)
	fails(t, dir, exitFailure, "no such file or directory", "dump", filepath.Join(bad, "00000000000000000000.log"))
	fails(t, dir, exitFailure, "not a .log, .index or .timeindex file", "dump", filepath.Join(dir, "logfs-data", "orders.props"))
	fails(t, dir, exitFailure, "must be named by its segment's base offset", "dump", write("foo.index", nil))

	// A flipped byte inside the first batch: its CRC fails.
	flipped := append([]byte(nil), logBytes...)
	flipped[100] ^= 0xff
	p := write("00000000000000000000.log", flipped)
	r := logfs(t, dir, "", "dump", p)
	requireOneLineError(t, r, exitFailure, "fails its CRC-32C check")
	require.Contains(t, r.stdout, "isvalid: false")

	// A torn tail.
	torn := logBytes[:len(logBytes)-7]
	r = logfs(t, dir, "", "dump", write("00000000000000000000.log", torn))
	requireOneLineError(t, r, exitFailure, "invalid bytes from position")
	require.Contains(t, r.stdout, "Found ")

	// Garbage.
	r = logfs(t, dir, "", "dump", write("00000000000000000100.log", []byte(strings.Repeat("garbage!", 20))))
	requireOneLineError(t, r, exitFailure, "invalid bytes")

	// An index whose length is not whole entries.
	fails(t, dir, exitFailure, "not a whole number of 8-byte entries", "dump", write("00000000000000000000.index", []byte{1, 2, 3}))

	// An offset index entry that does not match the log: the .log above
	// (torn) is beside it; point an entry at position 1.
	write("00000000000000000000.log", logBytes)
	entry := make([]byte, 8)
	binary.BigEndian.PutUint32(entry, 3)
	binary.BigEndian.PutUint32(entry[4:], 1)
	idx := write("00000000000000000000.index", entry)
	ok(t, dir, "", "dump", idx) // decoding alone is fine
	r = logfs(t, dir, "", "dump", "--verify", idx)
	requireOneLineError(t, r, exitFailure, "position is not the start of a batch: entry 0 (offset 3 at position 1)")

	// A time index entry with a wrong timestamp.
	tentry := make([]byte, 12)
	binary.BigEndian.PutUint64(tentry, 1600000000000)
	binary.BigEndian.PutUint32(tentry[8:], 0)
	tidx := write("00000000000000000000.timeindex", tentry)
	r = logfs(t, dir, "", "dump", "--verify", tidx)
	requireOneLineError(t, r, exitFailure, "timestamp is not the largest timestamp up to its offset")

	// An index with no log beside it.
	lone := filepath.Join(t.TempDir(), "00000000000000000000.index")
	require.NoError(t, os.WriteFile(lone, nil, 0o644))
	fails(t, dir, exitFailure, "cannot verify: no 00000000000000000000.log beside it", "dump", "--verify", lone)

	// Several problems: one summary line.
	r = logfs(t, dir, "", "dump", "--verify", idx, tidx)
	requireOneLineError(t, r, exitFailure, "2 problems in 2 files")
}

// TestDumpVerifiesKafkaIndexes writes the fixtures' indexes the way each
// Kafka version writes them (kafkaindex.Write) and runs dump
// --verify and check over them: both accept every one.
func TestDumpVerifiesKafkaIndexes(t *testing.T) {
	dir := t.TempDir()
	styles := []struct {
		style kafkaindex.Style
		at    kafkaindex.MaxTimestampAt
	}{
		{kafkaindex.Kafka11, kafkaindex.AtBatchLast},
		{kafkaindex.Kafka2x, kafkaindex.AtFirstRecord},
		{kafkaindex.Kafka2x, kafkaindex.AtAppendLast},
		{kafkaindex.Kafka40, kafkaindex.AtBatchLast},
	}
	for i, s := range styles {
		for _, d := range fixtures.DataDirs(t) {
			data := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.CopyFS(data, os.DirFS(d.Path)))
			parts, err := filepath.Glob(filepath.Join(data, "*-[0-9]*"))
			require.NoError(t, err)
			rng := rand.New(rand.NewSource(int64(i)))
			var indexes []string
			for _, p := range parts {
				require.NoError(t, kafkaindex.Write(p, s.style, s.at, 0, rng))
				for _, suffix := range []string{".index", ".timeindex"} {
					m, err := filepath.Glob(filepath.Join(p, "*"+suffix))
					require.NoError(t, err)
					indexes = append(indexes, m...)
				}
			}
			out := ok(t, dir, "", append([]string{"dump", "--verify"}, indexes...)...)
			require.Equal(t, len(indexes), strings.Count(out, "Verified "), "%v %v %s", s.style, s.at, d.Set)
			require.Contains(t, ok(t, dir, "", "check", "--data", data), ": OK", "%v %v %s", s.style, s.at, d.Set)
		}
	}
}
