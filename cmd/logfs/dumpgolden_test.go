package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/txn"
)

// goldenPartition writes the partition folder the golden dump tests read,
// with a Kafka 3.7 broker's layout (internal/broker): every batch byte is
// fixed, so sizes and CRCs in the expected lines are too.
//
//	offset 0-1  plain batch, keys and null, a header, UTF-8 and invalid UTF-8 values
//	offset 2-4  transactional batch of producer 7, epoch 3, sequences 5-7, gzip
//	offset 5    its COMMIT marker, coordinator epoch 0
//	offset 6    a LEADER_CHANGE control record (a KRaft controller's)
//	offset 7    a LogAppendTime batch, a null key and a null value (a tombstone)
func goldenPartition(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	p, err := broker.Create(dir, "golden", 0, broker.Options{SegmentBytes: 1 << 20, IndexInterval: 100, LeaderEpoch: 4})
	require.NoError(t, err)
	const ts = 1700000000000
	build := func(o record.BuildOptions, recs ...[3][]byte) []byte {
		var b record.Builder
		for i, r := range recs {
			var hs []record.Header
			if r[2] != nil {
				hs = []record.Header{{Key: r[2], Value: []byte("hv")}, {Key: []byte("trace"), Value: nil}}
			}
			b.Append(ts+int64(i)*10, r[0], r[1], hs)
		}
		o.PartitionLeaderEpoch = 4
		raw, err := b.BuildWith(o)
		require.NoError(t, err)
		return append([]byte(nil), raw...)
	}
	for _, raw := range [][]byte{
		build(record.BuildOptions{},
			[3][]byte{[]byte("k0"), []byte("héllo wörld"), []byte("h1")},
			[3][]byte{nil, []byte("bad \xff\xe2\x82 utf-8"), nil}),
		build(record.BuildOptions{ProducerID: 7, ProducerEpoch: 3, BaseSequence: 5, Attributes: 0x10, Compression: record.Gzip},
			[3][]byte{[]byte("a"), []byte("one"), nil}, [3][]byte{[]byte("b"), []byte("two"), nil}, [3][]byte{[]byte("c"), []byte("three"), nil}),
		build(record.BuildOptions{ProducerID: 7, ProducerEpoch: 3, BaseSequence: -1, Attributes: 0x30},
			[3][]byte{record.MarkerKey(record.ControlCommit), record.MarkerValue(0), nil}),
		build(record.BuildOptions{Attributes: 0x20},
			[3][]byte{record.MarkerKey(record.ControlLeaderChange), []byte{0, 0, 0, 0, 0, 1, 0}, nil}),
		build(record.BuildOptions{Attributes: 0x08, LogAppendTime: ts + 500},
			[3][]byte{nil, nil, nil}),
	} {
		_, err := p.Append(raw)
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())
	return p.Dir()
}

// The expected lines below are Kafka 3.7.1's DumpLogSegments.scala
// ("DLS:NN" are its line numbers) applied to goldenPartition's bytes:
// batch lines DLS:334-347 (fields in that order, nothing after isvalid),
// record lines DLS:284-323, the "Log starting offset" DLS:255-257.
const (
	goldenBatch0 = "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 4 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000010 size: 116 magic: 2 compresscodec: none crc: 613102460 isvalid: true\n"
	// lastSequence is incrementSequence(baseSequence, lastOffsetDelta)
	// (DefaultRecordBatch.lastSequence); codec names are
	// CompressionType.name.
	goldenBatch1 = "baseOffset: 2 lastOffset: 4 count: 3 baseSequence: 5 lastSequence: 7 producerId: 7 producerEpoch: 3 partitionLeaderEpoch: 4 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 116 CreateTime: 1700000000020 size: 121 magic: 2 compresscodec: gzip crc: 3654210765 isvalid: true\n"
	goldenBatch2 = "baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 producerEpoch: 3 partitionLeaderEpoch: 4 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 237 CreateTime: 1700000000000 size: 78 magic: 2 compresscodec: none crc: 2602897334 isvalid: true\n"
	goldenBatch3 = "baseOffset: 6 lastOffset: 6 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 4 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 315 CreateTime: 1700000000000 size: 79 magic: 2 compresscodec: none crc: 1743586023 isvalid: true\n"
	// The timestamp type is the batch's (TimestampType.toString); a
	// LogAppendTime batch's records carry its max timestamp.
	goldenBatch4 = "baseOffset: 7 lastOffset: 7 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 4 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 394 LogAppendTime: 1700000000500 size: 68 magic: 2 compresscodec: none crc: 2387613019 isvalid: true\n"

	goldenLogHead = "Dumping 00000000000000000000.log\nLog starting offset: 0\n"
)

// goldenRecords are the record lines of each batch: metadata (DLS:286-291,
// sequence = incrementSequence(baseSequence, offset delta) or -1, header
// keys in brackets), then for a control batch the marker (DLS:301-303) or
// "controlType: NAME(id)" (DLS:310-311: Kafka 3.7 does not decode
// LEADER_CHANGE), then with --print-data-log "key:" when the key is not
// null and "payload:" when the value is not null (DLS:315-322), both made
// by new String(bytes, UTF-8): raw text, each ill-formed sequence one
// U+FFFD.
var goldenRecords = [5][][2]string{
	{
		{"| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 13 sequence: -1 headerKeys: [h1,trace]", " key: k0 payload: héllo wörld"},
		{"| offset: 1 CreateTime: 1700000000010 keySize: -1 valueSize: 13 sequence: -1 headerKeys: []", " payload: bad \uFFFD\uFFFD utf-8"},
	},
	{
		{"| offset: 2 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 5 headerKeys: []", " key: a payload: one"},
		{"| offset: 3 CreateTime: 1700000000010 keySize: 1 valueSize: 3 sequence: 6 headerKeys: []", " key: b payload: two"},
		{"| offset: 4 CreateTime: 1700000000020 keySize: 1 valueSize: 5 sequence: 7 headerKeys: []", " key: c payload: three"},
	},
	{{"| offset: 5 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0", ""}},
	{{"| offset: 6 CreateTime: 1700000000000 keySize: 4 valueSize: 7 sequence: -1 headerKeys: [] controlType: LEADER_CHANGE(2)", ""}},
	{{"| offset: 7 LogAppendTime: 1700000000500 keySize: -1 valueSize: -1 sequence: -1 headerKeys: []", ""}},
}

func goldenLog(records, data bool) string {
	out := goldenLogHead
	for i, b := range []string{goldenBatch0, goldenBatch1, goldenBatch2, goldenBatch3, goldenBatch4} {
		out += b
		if !records {
			continue
		}
		for _, r := range goldenRecords[i] {
			out += r[0]
			if data {
				out += r[1]
			}
			out += "\n"
		}
	}
	return out
}

func TestDumpGoldenLog(t *testing.T) {
	seg := goldenPartition(t)
	const log = "00000000000000000000.log"
	// Batches only by default; records with --deep-iteration (DLS:273),
	// keys and payloads with --print-data-log, which implies it
	// (DLS:488-496).
	require.Equal(t, goldenLog(false, false), ok(t, seg, "", "dump", "--files", log))
	require.Equal(t, goldenLog(true, false), ok(t, seg, "", "dump", "--deep-iteration", "--files", log))
	require.Equal(t, goldenLog(true, true), ok(t, seg, "", "dump", "--print-data-log", "--files", log))
	require.Equal(t, goldenLog(true, true), ok(t, seg, "", "dump", "--print-data-log", "--deep-iteration", log))

	// --skip-record-metadata leaves the metadata out: "| key: …", and a
	// record without a key starts with " payload:" (DLS:284-321).
	out := ok(t, seg, "", "dump", "--print-data-log", "--skip-record-metadata", "--files", log)
	require.Equal(t, goldenLogHead+goldenBatch0+"| key: k0 payload: héllo wörld\n payload: bad \uFFFD\uFFFD utf-8\n"+
		goldenBatch1+"| key: a payload: one\n| key: b payload: two\n| key: c payload: three\n"+
		goldenBatch2+"\n"+goldenBatch3+"\n"+goldenBatch4+"\n", out)

	// Files from --files, split on commas, then the arguments; the last
	// dot names the kind, so a .deleted file is ignored, on stderr
	// (DLS:57-77).
	require.NoError(t, os.WriteFile(filepath.Join(seg, log+".deleted"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(seg, "partition.metadata"), []byte("version: 0\n"), 0o644))
	r := logfs(t, seg, "", "dump", "--files", log+","+log+".deleted", "partition.metadata")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, goldenLog(false, false)+"Dumping "+log+".deleted\nDumping partition.metadata\n", r.stdout)
	require.Equal(t, "Ignoring unknown file "+log+".deleted\nIgnoring unknown file partition.metadata\n", r.stderr)

	// logfs's own additions stay behind their own flags.
	out = ok(t, seg, "", "dump", "--batch-details", log)
	require.Contains(t, out, "isvalid: true baseTimestamp: 1700000000000 batchLength: 104 attributes: 0\n")
}

func TestDumpGoldenIndexes(t *testing.T) {
	seg := goldenPartition(t)
	// DLS:147-163: entries as "offset: N position: P"; DLS:186-217: time
	// entries as "timestamp: T offset: N".
	require.Equal(t, "Dumping 00000000000000000000.index\noffset: 4 position: 116\noffset: 5 position: 237\noffset: 7 position: 394\n"+
		"Dumping 00000000000000000000.timeindex\ntimestamp: 1700000000020 offset: 4\ntimestamp: 1700000000500 offset: 7\n",
		ok(t, seg, "", "dump", "00000000000000000000.index", "00000000000000000000.timeindex"))
	// --verify-index-only prints no entry (DLS:161, 215); nothing disagrees.
	require.Equal(t, "Dumping 00000000000000000000.index\nDumping 00000000000000000000.timeindex\n",
		ok(t, seg, "", "dump", "--verify-index-only", "00000000000000000000.index", "00000000000000000000.timeindex"))
	// --index-sanity-check (DLS:141-145, 180-184).
	require.Equal(t, "Dumping 00000000000000000000.index\n00000000000000000000.index passed sanity check.\n"+
		"Dumping 00000000000000000000.timeindex\n00000000000000000000.timeindex passed sanity check.\n",
		ok(t, seg, "", "dump", "--index-sanity-check", "00000000000000000000.index", "00000000000000000000.timeindex"))

	entries := func(name string, pairs ...[2]uint32) {
		var b []byte
		for _, p := range pairs {
			b = binary.BigEndian.AppendUint32(b, p[0])
			b = binary.BigEndian.AppendUint32(b, p[1])
		}
		require.NoError(t, os.WriteFile(filepath.Join(seg, name), b, 0o644))
	}
	// An empty index (DLS:135-138); the zero tail of a preallocated one
	// ends its entries (DLS:150-152).
	entries("00000000000000000000.index")
	require.Equal(t, "Dumping 00000000000000000000.index\n00000000000000000000.index is empty.\n", ok(t, seg, "", "dump", "00000000000000000000.index"))
	entries("00000000000000000000.index", [2]uint32{4, 116}, [2]uint32{0, 0}, [2]uint32{0, 0})
	require.Equal(t, "Dumping 00000000000000000000.index\noffset: 4 position: 116\n", ok(t, seg, "", "dump", "00000000000000000000.index"))

	// An entry keyed by an offset inside the batch at its position, as an
	// append of several batches is keyed: Kafka's 3.7 tool calls it a
	// mismatch (DLS:155-160), the rule every Kafka writer keeps does not.
	entries("00000000000000000000.index", [2]uint32{3, 116}, [2]uint32{7, 394})
	require.Equal(t, "Dumping 00000000000000000000.index\noffset: 3 position: 116\noffset: 7 position: 394\n", ok(t, seg, "", "dump", "00000000000000000000.index"))
	// Entries that break it: on stderr after the files, "Mismatches in
	// :ABSOLUTE PATH", the last found first (DLS:80-85, 157-159), the log
	// offset that of the batch at the entry's position.
	entries("00000000000000000000.index", [2]uint32{6, 116}, [2]uint32{7, 300})
	r := logfs(t, seg, "", "dump", "00000000000000000000.index")
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "Dumping 00000000000000000000.index\noffset: 6 position: 116\noffset: 7 position: 300\n", r.stdout)
	require.Equal(t, "Mismatches in :"+filepath.Join(seg, "00000000000000000000.index")+"\n  Index offset: 7, log offset: -1\n  Index offset: 6, log offset: 4\n", r.stderr)

	// A time index entry whose timestamp is not the largest up to its
	// offset, and one past the log (DLS:199-210, 375-399).
	var tb []byte
	for _, e := range [][2]uint64{{1700000000015, 4}, {1700000000500, 7}, {1700000000600, 99}} {
		tb = binary.BigEndian.AppendUint64(tb, e[0])
		tb = binary.BigEndian.AppendUint32(tb, uint32(e[1]))
	}
	require.NoError(t, os.WriteFile(filepath.Join(seg, "00000000000000000000.timeindex"), tb, 0o644))
	r = logfs(t, seg, "", "dump", "--verify-index-only", "00000000000000000000.timeindex")
	require.Equal(t, exitFailure, r.code)
	require.Equal(t, "Dumping 00000000000000000000.timeindex\n", r.stdout)
	require.Equal(t, "Found timestamp mismatch in :"+filepath.Join(seg, "00000000000000000000.timeindex")+"\n  Index timestamp: 1700000000015, log timestamp: 1700000000020\n"+
		"The following indexed offsets are not found in the log.\nIndexed offset: 99, found log offset: -1\n", r.stderr)
}

func TestDumpGoldenTransactionFiles(t *testing.T) {
	dir := t.TempDir()
	// DLS:97-103.
	var b []byte
	b = txn.AppendIndexEntry(b, txn.AbortedTxn{ProducerID: 7, FirstOffset: 2, LastOffset: 5, LastStableOffset: 2})
	b = txn.AppendIndexEntry(b, txn.AbortedTxn{ProducerID: 9, FirstOffset: 3, LastOffset: 8, LastStableOffset: 6})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.txnindex"), b, 0o644))
	require.Equal(t, "Dumping 00000000000000000000.txnindex\n"+
		"version: 0 producerId: 7 firstOffset: 2 lastOffset: 5 lastStableOffset: 2\n"+
		"version: 0 producerId: 9 firstOffset: 3 lastOffset: 8 lastStableOffset: 6\n",
		ok(t, dir, "", "dump", "00000000000000000000.txnindex"))

	// DLS:105-121: a producer with an open transaction and one that never
	// wrote a batch (no batch metadata: the line ends after lastTimestamp
	// and a space); currentTxnFirstOffset is an OptionalLong.
	snap := txn.EncodeSnapshot([]txn.ProducerEntry{
		{ProducerID: 7, ProducerEpoch: 3, LastSequence: 7, LastOffset: 4, OffsetDelta: 2, Timestamp: 1700000000020, CoordinatorEpoch: 1, CurrentTxnFirstOffset: 2},
		{ProducerID: 8, LastSequence: -1, LastOffset: -1, Timestamp: -1, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000009.snapshot"), snap, 0o644))
	require.Equal(t, "Dumping 00000000000000000009.snapshot\n"+
		"producerId: 7 producerEpoch: 3 coordinatorEpoch: 1 currentTxnFirstOffset: OptionalLong[2] lastTimestamp: 1700000000020 firstSequence: 5 lastSequence: 7 lastOffset: 4 offsetDelta: 2 timestamp: 1700000000020\n"+
		"producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: -1 \n",
		ok(t, dir, "", "dump", "00000000000000000009.snapshot"))
	// A corrupt one: Kafka's CorruptSnapshotException message on stderr
	// (DLS:117-119).
	snap[len(snap)-1] ^= 1
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000009.snapshot"), snap, 0o644))
	r := logfs(t, dir, "", "dump", "00000000000000000009.snapshot")
	require.Equal(t, exitFailure, r.code)
	require.Regexp(t, `^Snapshot is corrupt \(CRC is no longer valid\). Stored crc: \d+. Computed crc: \d+\n$`, r.stderr)
}
