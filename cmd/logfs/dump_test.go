package main

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/internal/kafkaindex"
	"github.com/logfs/logfs/record"
)

// decodeCounts counts the batches and records of a .log through package
// record directly.
func decodeCounts(t *testing.T, path string) (batches, records, payloads int) {
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
			if it.Record().Value != nil && !sc.Batch().Attributes.Control() {
				payloads++
			}
		}
		require.NoError(t, it.Err())
	}
	require.NoError(t, sc.Err())
	return batches, records, payloads
}

// TestDumpFixtures dumps every segment file Kafka brokers wrote: every
// batch valid, every record printed, a payload exactly for the records
// whose value is not null, markers and KRaft control records decoded, and
// every index agreeing with its log; the compacted fixture's gaps are
// Kafka's "Non-consecutive offsets" report.
func TestDumpFixtures(t *testing.T) {
	logs := fixtures.Files(t, ".log")
	require.NotEmpty(t, logs)
	dir := t.TempDir()
	for _, path := range logs {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			wantBatches, wantRecords, wantPayloads := decodeCounts(t, path)
			r := logfs(t, dir, "", "dump", "--print-data-log", path)
			require.Equal(t, 0, r.code, r.stderr)
			var batches, records, payloads int
			for _, line := range strings.Split(r.stdout, "\n") {
				switch {
				case strings.HasPrefix(line, "baseOffset: "):
					batches++
					require.True(t, strings.HasSuffix(line, " isvalid: true"), line)
				case strings.HasPrefix(line, "| offset: "):
					records++
				}
			}
			payloads = strings.Count(r.stdout, " payload: ") // a raw key or payload may hold a newline
			require.Equal(t, wantBatches, batches, "batches of %s", path)
			require.Equal(t, wantRecords, records, "records of %s", path)
			require.Equal(t, wantPayloads, payloads, "records with a value in %s", path)
			if strings.Contains(path, "__consumer_offsets-39/00000000000000000000.log") {
				// Offsets 4, 16, 17: compaction left a gap (DLS:275-281).
				require.Equal(t, "Non-consecutive offsets in "+path+"\n  4 is followed by 16\n", r.stderr)
			} else {
				require.Empty(t, r.stderr)
			}
		})
	}
	var indexes []string
	indexes = append(indexes, fixtures.Files(t, ".index")...)
	indexes = append(indexes, fixtures.Files(t, ".timeindex")...)
	require.NotEmpty(t, indexes)
	r := logfs(t, dir, "", append([]string{"dump", "--verify-index-only"}, indexes...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	out := ok(t, dir, "", append([]string{"dump", "--verify"}, indexes...)...)
	require.Equal(t, len(indexes), strings.Count(out, "Verified "), out)

	// The 3.7 fixture's transaction, its marker, its producer snapshot
	// and the KRaft bootstrap snapshot, line for line (DLS:334-347,
	// 284-313, 105-121, 258-261).
	data := filepath.Join(fixtures.Dir(t), "kafka-3.7-kraft-transactions", "kafka-data")
	part := filepath.Join(data, "_confluent-ksql-default__command_topic-0")
	out = ok(t, part, "", "dump", "--deep-iteration", "00000000000000000000.log", "00000000000000000002.snapshot")
	require.Equal(t, "Dumping 00000000000000000000.log\nLog starting offset: 0\n"+
		"baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1728561475261 size: 7525 magic: 2 compresscodec: none crc: 1002262746 isvalid: true\n"+
		"| offset: 0 CreateTime: 1728561475261 keySize: 37 valueSize: 7418 sequence: 0 headerKeys: []\n"+
		"baseOffset: 1 lastOffset: 1 count: 1 baseSequence: -1 lastSequence: -1 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 7525 CreateTime: 1728561475581 size: 78 magic: 2 compresscodec: none crc: 3174640246 isvalid: true\n"+
		"| offset: 1 CreateTime: 1728561475581 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0\n"+
		"Dumping 00000000000000000002.snapshot\n"+
		"producerId: 0 producerEpoch: 0 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 1728561475581 firstSequence: 0 lastSequence: 0 lastOffset: 0 offsetDelta: 0 timestamp: 1728561475581\n", out)
	out = ok(t, data, "", "dump", "--deep-iteration", "bootstrap.checkpoint")
	require.True(t, strings.HasPrefix(out, "Dumping bootstrap.checkpoint\nKRaft bootstrap snapshot\nbaseOffset: 0 lastOffset: 0 count: 1 "), out)
	require.Contains(t, out, "headerKeys: [] SnapshotHeader {\"version\":0,\"lastContainedLogTimestamp\":0}\n")
	require.Contains(t, out, "headerKeys: [] SnapshotFooter {\"version\":0}\n")
}

// TestDumpErrors: what Kafka's tool dies on is one line on stderr and
// status 1; what it reports (invalid batches, invalid bytes at the end)
// it reports, and logfs's status is 1 then too.
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
	fails(t, dir, exitUsage, "unknown flag: --offsets-decoder", "dump", "--offsets-decoder", logPath)
	fails(t, dir, exitFailure, "no such file or directory", "dump", filepath.Join(bad, "00000000000000000000.log"))
	fails(t, dir, exitFailure, "an index file is named by its segment's base offset", "dump", write("foo.index", []byte{1, 2, 3, 4, 5, 6, 7, 8}))
	fails(t, dir, exitFailure, "a .log is named by its base offset", "dump", write("foo.log", nil))

	// A flipped byte inside the first batch: its CRC fails.
	flipped := append([]byte(nil), logBytes...)
	flipped[100] ^= 0xff
	r := logfs(t, dir, "", "dump", write("00000000000000000000.log", flipped))
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stdout, "isvalid: false\n")
	require.Empty(t, r.stderr)

	// A torn tail (DLS:328-330), and with --max-bytes none is reported.
	torn := write("00000000000000000000.log", logBytes[:len(logBytes)-7])
	r = logfs(t, dir, "", "dump", torn)
	require.Equal(t, exitFailure, r.code)
	require.True(t, strings.HasSuffix(r.stdout, "\nFound "+strconv.Itoa(len(logBytes)-7-lastBatchEnd(t, logBytes[:len(logBytes)-7]))+" invalid bytes at the end of 00000000000000000000.log\n"), r.stdout)
	out := ok(t, dir, "", "dump", "--max-bytes", "100", torn)
	require.Equal(t, "Dumping "+torn+"\nLog starting offset: 0\n", out, "no whole batch within 100 bytes, and no invalid bytes reported")

	// A zero tail, as a preallocated .log leaves: Kafka's
	// CorruptRecordException (size 0 < 14).
	zeros := write("00000000000000000000.log", append(append([]byte(nil), logBytes...), make([]byte, 100)...))
	r = logfs(t, dir, "", "dump", zeros)
	requireOneLineError(t, r, exitFailure, "found record size 0 smaller than minimum record overhead (14) at position "+strconv.Itoa(len(logBytes)))

	// An index entry at a position no batch starts at: Kafka's report.
	write("00000000000000000000.log", logBytes)
	entry := make([]byte, 8)
	binary.BigEndian.PutUint32(entry, 3)
	binary.BigEndian.PutUint32(entry[4:], 1)
	idx := write("00000000000000000000.index", entry)
	r = logfs(t, dir, "", "dump", idx)
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "Mismatches in :"+idx+"\n  Index offset: 3, log offset: -1\n", r.stderr)
	r = logfs(t, dir, "", "dump", "--verify", idx)
	require.Contains(t, r.stderr, "position is not the start of a batch: entry 0 (offset 3 at position 1)")
	// A structure that breaks the rule: one line, and
	// --index-sanity-check says so too.
	binary.BigEndian.PutUint32(entry[4:], 0)
	write("00000000000000000000.index", append(append([]byte(nil), entry...), entry...))
	fails(t, dir, exitFailure, "position 0", "dump", "--index-sanity-check", idx)

	// A time index whose timestamps go back: Kafka's out-of-order report.
	var tb []byte
	for _, ts := range []uint64{1700000001000, 1700000000500} {
		tb = binary.BigEndian.AppendUint64(tb, ts)
		tb = binary.BigEndian.AppendUint32(tb, 1)
	}
	write("00000000000000000000.index", nil)
	tidx := write("00000000000000000000.timeindex", tb)
	r = logfs(t, dir, "", "dump", tidx)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "Found out of order timestamp in :"+tidx+"\n  Index timestamp: 1700000000500, Previously indexed timestamp: 1700000001000\n")

	// An index with no log beside it.
	lone := filepath.Join(t.TempDir(), "00000000000000000000.index")
	require.NoError(t, os.WriteFile(lone, entry, 0o644))
	fails(t, dir, exitFailure, "no 00000000000000000000.log beside it", "dump", lone)
}

// lastBatchEnd is where the last whole batch of a log ends.
func lastBatchEnd(t *testing.T, b []byte) int {
	sc := record.NewScanner(bytes.NewReader(b), 0, record.Position(len(b)), record.ScanOptions{HeadersOnly: true})
	for sc.Next() {
	}
	return int(sc.Pos())
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
