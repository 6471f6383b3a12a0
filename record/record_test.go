package record

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fixtures"
)

type rec struct {
	ts      int64
	key     []byte
	value   []byte
	headers []Header
}

var sampleRecords = []rec{
	{ts: 1700000000000, key: nil, value: []byte("hello")},
	{ts: 1700000000005, key: []byte("k"), value: nil},
	{ts: 1699999999000, key: []byte{}, value: []byte{}},
	{ts: 1700000000001, key: []byte("key"), value: bytes.Repeat([]byte("v"), 300),
		headers: []Header{{Key: []byte("h1"), Value: []byte("x")}, {Key: []byte("h2"), Value: nil}, {Key: []byte{}, Value: []byte{}}}},
}

func buildBatch(t testing.TB, c Compression, recs []rec) []byte {
	t.Helper()
	var b Builder
	for _, r := range recs {
		b.Append(r.ts, r.key, r.value, r.headers)
	}
	out, err := b.BuildWith(BuildOptions{Compression: c})
	require.NoError(t, err)
	return bytes.Clone(out)
}

func TestRoundTripEveryCodec(t *testing.T) {
	for _, c := range []Compression{None, Gzip, Snappy, LZ4, Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			raw := buildBatch(t, c, sampleRecords)
			SetBaseOffset(raw, 42)
			batch, err := ParseBatch(raw, 0)
			require.NoError(t, err)
			require.Equal(t, Offset(42), batch.BaseOffset)
			require.Equal(t, Offset(45), batch.LastOffset())
			require.Equal(t, c, batch.Attributes.Compression())
			require.Equal(t, int64(1700000000005), batch.MaxTimestamp)
			var d Decoder
			it, err := d.Records(&batch)
			require.NoError(t, err)
			i := 0
			for it.Next() {
				r := it.Record()
				want := sampleRecords[i]
				require.Equal(t, Offset(42+i), r.Offset)
				require.Equal(t, want.ts, r.Timestamp)
				require.Equal(t, want.key == nil, r.Key == nil, "null key")
				require.Equal(t, want.value == nil, r.Value == nil, "null value")
				require.Equal(t, string(want.key), string(r.Key))
				require.Equal(t, string(want.value), string(r.Value))
				require.Len(t, r.Headers, len(want.headers))
				for j, h := range want.headers {
					require.Equal(t, string(h.Key), string(r.Headers[j].Key))
					require.Equal(t, h.Value == nil, r.Headers[j].Value == nil)
				}
				i++
			}
			require.NoError(t, it.Err())
			require.Equal(t, len(sampleRecords), i)
		})
	}
}

func TestAppendAtGapsAndAttributes(t *testing.T) {
	var b Builder
	b.AppendAt(0, 10, nil, []byte("a"), nil)
	b.AppendAt(7, 11, nil, []byte("b"), nil)
	raw, err := b.BuildWith(BuildOptions{
		Attributes: logAppendTimeBit | transactionalBit, LogAppendTime: 99,
		ProducerID: 5, ProducerEpoch: 1, BaseSequence: 3,
	})
	require.NoError(t, err)
	batch, err := ParseBatch(raw, 0)
	require.NoError(t, err)
	require.Equal(t, Offset(7), batch.LastOffset())
	require.True(t, batch.Attributes.Transactional())
	require.Equal(t, int64(5), batch.ProducerID)
	var d Decoder
	it, err := d.Records(&batch)
	require.NoError(t, err)
	var offsets, stamps []int64
	for it.Next() {
		offsets = append(offsets, int64(it.Record().Offset))
		stamps = append(stamps, it.Record().Timestamp)
	}
	require.NoError(t, it.Err())
	require.Equal(t, []int64{0, 7}, offsets)
	require.Equal(t, []int64{99, 99}, stamps, "LogAppendTime gives every record the batch time")
}

func TestEmptyBuilder(t *testing.T) {
	var b Builder
	_, err := b.Build()
	require.ErrorIs(t, err, ErrEmptyBatch)
}

func TestRecordSizeMatchesEncoding(t *testing.T) {
	var b Builder
	b.Reset()
	for i, r := range sampleRecords {
		before := b.Size()
		b.Append(r.ts, r.key, r.value, r.headers)
		require.Equal(t, RecordSize(r.ts-sampleRecords[0].ts, int32(i), r.key, r.value, r.headers), b.Size()-before)
	}
}

func TestCorruption(t *testing.T) {
	good := buildBatch(t, None, sampleRecords)
	cases := map[string]struct {
		mutate func([]byte) []byte
		want   error
	}{
		"crc flip":        {func(b []byte) []byte { b[17] ^= 1; return b }, ErrCorrupt},
		"payload flip":    {func(b []byte) []byte { b[len(b)-3] ^= 0x40; return b }, ErrCorrupt},
		"attributes flip": {func(b []byte) []byte { b[22] ^= 0x80; return b }, ErrCorrupt},
		"magic":           {func(b []byte) []byte { b[16] = 1; return b }, ErrUnsupportedMagic},
		"short length":    {func(b []byte) []byte { b[8], b[9], b[10], b[11] = 0, 0, 0, 10; return b }, ErrCorrupt},
		"truncated":       {func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncated},
		"header only":     {func(b []byte) []byte { return b[:30] }, ErrTruncated},
		"negative length": {func(b []byte) []byte { b[8] = 0xff; return b }, ErrCorrupt},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b := c.mutate(bytes.Clone(good))
			s := NewScanner(bytes.NewReader(b), 0, Position(len(b)), ScanOptions{})
			require.False(t, s.Next())
			require.ErrorIs(t, s.Err(), c.want)
			var ce *CorruptError
			require.ErrorAs(t, s.Err(), &ce)
			require.Equal(t, Position(0), s.Pos())
		})
	}
}

func TestRecordCorruptionIsAnError(t *testing.T) {
	// A record whose declared length overruns the batch, with a valid CRC:
	// the batch parses, the record does not.
	var b Builder
	b.Append(1, nil, []byte("abc"), nil)
	raw, err := b.Build()
	require.NoError(t, err)
	raw = bytes.Clone(raw)
	raw[HeaderSize] = 0x7e // record length 63, far beyond the batch
	binaryFixCRC(raw)
	batch, err := ParseBatch(raw, 0)
	require.NoError(t, err)
	var d Decoder
	it, err := d.Records(&batch)
	require.NoError(t, err)
	require.False(t, it.Next())
	require.ErrorIs(t, it.Err(), ErrCorrupt)
}

func binaryFixCRC(b []byte) {
	c := crc32.Checksum(b[crcStart:], castagnoli)
	b[17], b[18], b[19], b[20] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
}

func TestScannerStopsAtTornTail(t *testing.T) {
	var log []byte
	for i := 0; i < 5; i++ {
		raw := buildBatch(t, None, sampleRecords)
		SetBaseOffset(raw, Offset(i*4))
		log = append(log, raw...)
	}
	size := len(log) / 5
	for cut := 0; cut <= len(log); cut += 7 {
		s := NewScanner(bytes.NewReader(log[:cut]), 0, Position(cut), ScanOptions{ReadAhead: 100})
		n := 0
		for s.Next() {
			n++
		}
		require.Equal(t, cut/size, n, "cut %d", cut)
		require.Equal(t, Position(n*size), s.Pos())
		if cut%size == 0 {
			require.NoError(t, s.Err())
		} else {
			require.ErrorIs(t, s.Err(), ErrTruncated)
		}
	}
}

func TestScannerHeadersOnly(t *testing.T) {
	var log []byte
	for i := 0; i < 3; i++ {
		raw := buildBatch(t, None, sampleRecords)
		SetBaseOffset(raw, Offset(i*4))
		log = append(log, raw...)
	}
	s := NewScanner(bytes.NewReader(log), 0, Position(len(log)), ScanOptions{HeadersOnly: true, ReadAhead: 64})
	var last []Offset
	for s.Next() {
		require.Nil(t, s.Batch().Bytes)
		last = append(last, s.Batch().LastOffset())
	}
	require.NoError(t, s.Err())
	require.Equal(t, []Offset{3, 7, 11}, last)
}

func TestDecompressLimit(t *testing.T) {
	big := bytes.Repeat([]byte("z"), 1<<20)
	for _, c := range []Compression{Gzip, Snappy, LZ4, Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			raw := buildBatch(t, c, []rec{{ts: 1, value: big}})
			batch, err := ParseBatch(raw, 0)
			require.NoError(t, err)
			d := Decoder{Limit: 64 << 10}
			_, err = d.Records(&batch)
			require.ErrorIs(t, err, ErrTooLarge)
			var ok Decoder
			it, err := ok.Records(&batch)
			require.NoError(t, err)
			require.True(t, it.Next())
			require.Equal(t, len(big), len(it.Record().Value))
		})
	}
}

// manifest holds what ../shared/kafka-fixtures/MANIFEST.md says of each
// segment: batches, records, first and last offset.
var manifest = map[string][4]int64{
	"kafka-3.7-kraft-transactions/kafka-data/__consumer_offsets-29/00000000000000000000.log":                                            {45, 45, 0, 44},
	"kafka-3.7-kraft-transactions/kafka-data/__consumer_offsets-37/00000000000000000000.log":                                            {44, 44, 0, 43},
	"kafka-3.7-kraft-transactions/kafka-data/__transaction_state-44/00000000000000000000.log":                                           {4, 4, 0, 3},
	"kafka-3.7-kraft-transactions/kafka-data/_confluent-ksql-default__command_topic-0/00000000000000000000.log":                         {2, 2, 0, 1},
	"kafka-3.7-kraft-transactions/kafka-data/_schemas-0/00000000000000000000.log":                                                       {42, 42, 0, 41},
	"kafka-3.7-kraft-transactions/kafka-data/docker-connect-configs-0/00000000000000000000.log":                                         {10, 10, 0, 9},
	"kafka-2.1-lz4-logappendtime/kafka-data/__consumer_offsets-9/00000000000000000000.log":                                              {29, 46, 0, 45},
	"kafka-2.1-lz4-logappendtime/kafka-data/_confluent-command-0/00000000000000000000.log":                                              {1, 2, 0, 1},
	"kafka-2.1-lz4-logappendtime/kafka-data/_confluent-controlcenter-5-1-2-1-actual-group-consumption-rekey-0/00000000000000000000.log": {12, 14, 0, 13},
	"kafka-2.1-lz4-logappendtime/kafka-data/_confluent-controlcenter-5-1-2-1-monitoring-trigger-event-rekey-0/00000000000000000000.log": {11, 22, 0, 21},
	"kafka-2.1-lz4-logappendtime/kafka-data/docker-connect-configs-0/00000000000000000000.log":                                          {45, 54, 0, 53},
	"kafka-2.1-lz4-logappendtime/kafka-data/teamMembers7-0/00000000000000000000.log":                                                    {2, 4, 0, 3},
	"kafka-2.1-lz4-logappendtime/kafka-data/test10-0/00000000000000000000.log":                                                          {4, 8, 0, 7},
	"kafka-2.7-multisegment-compacted/kafka-logs/__consumer_offsets-17/00000000000000000000.log":                                        {1, 1, 0, 0},
	"kafka-2.7-multisegment-compacted/kafka-logs/__consumer_offsets-17/00000000000000000001.log":                                        {2, 2, 1, 2},
	"kafka-2.7-multisegment-compacted/kafka-logs/__consumer_offsets-28/00000000000000000000.log":                                        {1, 1, 1, 1},
	"kafka-2.7-multisegment-compacted/kafka-logs/__consumer_offsets-28/00000000000000000002.log":                                        {1, 1, 2, 2},
	"kafka-2.7-multisegment-compacted/kafka-logs/__consumer_offsets-33/00000000000000000000.log":                                        {3, 3, 0, 2},
	"kafka-2.7-multisegment-compacted/kafka-logs/__consumer_offsets-39/00000000000000000000.log":                                        {3, 3, 4, 17},
	"kafka-2.7-multisegment-compacted/kafka-logs/__consumer_offsets-39/00000000000000000018.log":                                        {1, 2, 18, 19},
	"kafka-2.7-multisegment-compacted/kafka-logs/__consumer_offsets-8/00000000000000000000.log":                                         {3, 3, 0, 2},
	"kafka-2.7-multisegment-compacted/kafka-logs/myTopic-0/00000000000000000038.log":                                                    {0, 0, -1, -1},
	"kafka-0.11-clean-shutdown/data/mac_test-0/00000000000000000078.log":                                                                {0, 0, -1, -1},
	"kafka-0.11-clean-shutdown/data/test0-0/00000000000000000000.log":                                                                   {11, 11, 0, 10},
	"kafka-0.11-clean-shutdown/data/test0-1/00000000000000000000.log":                                                                   {11, 11, 0, 10},
	"kafka-0.11-clean-shutdown/data/test0-2/00000000000000000000.log":                                                                   {10, 11, 0, 10},
}

// TestFixturesDecode reads every segment a real broker wrote and checks the
// counts MANIFEST.md gives for it: every batch verifies and every record
// decodes, compressed or not.
func TestFixturesDecode(t *testing.T) {
	root := fixtures.Dir(t)
	files := fixtures.Files(t, ".log")
	require.Len(t, files, len(manifest))
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		require.NoError(t, err)
		want, ok := manifest[rel]
		require.True(t, ok, "segment %s is not in the manifest", rel)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			s := NewScanner(bytes.NewReader(data), 0, Position(len(data)), ScanOptions{})
			var d Decoder
			var batches, records int64
			first, last := int64(-1), int64(-1)
			for s.Next() {
				batches++
				b := s.Batch()
				it, err := d.Records(b)
				require.NoError(t, err)
				for it.Next() {
					r := it.Record()
					if first < 0 {
						first = int64(r.Offset)
					}
					require.Greater(t, int64(r.Offset), last)
					last = int64(r.Offset)
					records++
				}
				require.NoError(t, it.Err())
			}
			require.NoError(t, s.Err())
			require.Equal(t, want, [4]int64{batches, records, first, last})
		})
	}
}

func TestFixtureControlBatch(t *testing.T) {
	root := fixtures.Dir(t)
	f := filepath.Join(root, "kafka-3.7-kraft-transactions/kafka-data/_confluent-ksql-default__command_topic-0/00000000000000000000.log")
	data, err := os.ReadFile(f)
	require.NoError(t, err)
	s := NewScanner(bytes.NewReader(data), 0, Position(len(data)), ScanOptions{})
	var control []bool
	for s.Next() {
		control = append(control, s.Batch().Attributes.Control())
		require.True(t, s.Batch().Attributes.Transactional())
	}
	require.NoError(t, s.Err())
	require.Equal(t, []bool{false, true}, control)
}

// FuzzScan feeds arbitrary bytes to the scanner and the record decoder:
// whatever the input, the answer is batches or an error, never a panic.
func FuzzScan(f *testing.F) {
	for _, c := range []Compression{None, Gzip, Snappy, LZ4, Zstd} {
		f.Add(buildBatch(f, c, sampleRecords))
	}
	for _, p := range globFixtures() {
		if data, err := os.ReadFile(p); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewScanner(bytes.NewReader(data), 0, Position(len(data)), ScanOptions{ReadAhead: 512})
		d := Decoder{Limit: 1 << 20}
		for s.Next() {
			b := s.Batch()
			it, err := d.Records(b)
			if err != nil {
				continue
			}
			for it.Next() {
				_ = it.Record().String()
			}
		}
		if s.Err() == nil && s.Pos() != Position(len(data)) {
			t.Fatalf("clean end at %d of %d", s.Pos(), len(data))
		}
	})
}

// globFixtures lists fixture segments to seed the fuzzer, if they are there.
func globFixtures() []string {
	root := os.Getenv(fixtures.EnvDir)
	if root == "" {
		root = "../../shared/kafka-fixtures"
	}
	var out []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".log") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

var sink int

func BenchmarkDecode(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			var bl Builder
			val := bytes.Repeat([]byte("x"), size)
			var log []byte
			for len(log) < 8<<20 {
				bl.Reset()
				for i := 0; i < 64; i++ {
					bl.Append(int64(i), nil, val, nil)
				}
				raw, _ := bl.Build()
				log = append(log, raw...)
			}
			b.SetBytes(int64(len(log)))
			b.ReportAllocs()
			b.ResetTimer()
			var d Decoder
			for i := 0; i < b.N; i++ {
				s := NewScanner(bytes.NewReader(log), 0, Position(len(log)), ScanOptions{})
				for s.Next() {
					it, err := d.Records(s.Batch())
					if err != nil {
						b.Fatal(err)
					}
					for it.Next() {
						sink += len(it.Record().Value)
					}
				}
				if s.Err() != nil {
					b.Fatal(s.Err())
				}
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	val := bytes.Repeat([]byte("x"), 1024)
	b.SetBytes(64 * 1024)
	b.ReportAllocs()
	var bl Builder
	for i := 0; i < b.N; i++ {
		bl.Reset()
		for j := 0; j < 64; j++ {
			bl.Append(int64(j), nil, val, nil)
		}
		if _, err := bl.Build(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildLines builds what a 1 MiB write of 100-byte lines to an
// append file becomes: one batch of ten thousand records with values only.
func BenchmarkBuildLines(b *testing.B) {
	val := bytes.Repeat([]byte("x"), 99)
	const n = (1 << 20) / 100
	b.SetBytes(n * 100)
	b.ReportAllocs()
	var bl Builder
	for i := 0; i < b.N; i++ {
		bl.Reset()
		for j := 0; j < n; j++ {
			bl.Append(1_700_000_000_000, nil, val, nil)
		}
		if _, err := bl.Build(); err != nil {
			b.Fatal(err)
		}
	}
}

// countingReader counts ReadAt calls.
type countingReader struct {
	r     *bytes.Reader
	calls int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.calls++
	return c.r.ReadAt(p, off)
}

func TestScannerSeekReusesWindowAndGrows(t *testing.T) {
	var log []byte
	for i := 0; i < 200; i++ {
		raw := buildBatch(t, None, sampleRecords[:1])
		SetBaseOffset(raw, Offset(i))
		log = append(log, raw...)
	}
	size := len(log) / 200
	cr := &countingReader{r: bytes.NewReader(log)}
	s := NewScanner(cr, 0, Position(len(log)/2), ScanOptions{HeadersOnly: true, ReadAhead: 8 * size})
	for s.Next() && s.Batch().LastOffset() < 3 {
	}
	require.Equal(t, 1, cr.calls)
	s.Seek(s.Batch().Pos, ScanOptions{ReadAhead: 4 * size, MaxReadAhead: 64 * size})
	require.True(t, s.Next())
	require.Equal(t, Offset(3), s.Batch().BaseOffset)
	require.NotNil(t, s.Batch().Bytes)
	require.Equal(t, 1, cr.calls, "the batch was in the window the lookup read")
	n := 1
	for s.Next() {
		n++
	}
	require.NoError(t, s.Err())
	require.Equal(t, 97, n)
	require.LessOrEqual(t, cr.calls, 6, "windows double: 1+4+8+16+32+64 batches")
	s.Extend(Position(len(log)))
	for s.Next() {
		n++
	}
	require.NoError(t, s.Err())
	require.Equal(t, 197, n)
}

// TestScannerReadsEachByteOnce scans batches as large as the read-ahead,
// which the header peek cannot take whole: the part it read is kept, not
// read again.
func TestScannerReadsEachByteOnce(t *testing.T) {
	val := bytes.Repeat([]byte("v"), 4000)
	var log []byte
	for i := 0; i < 50; i++ {
		var bl Builder
		for j := 0; j < 4; j++ {
			bl.Append(int64(j), nil, val, nil)
		}
		raw, err := bl.Build()
		require.NoError(t, err)
		SetBaseOffset(raw, Offset(4*i))
		log = append(log, raw...)
	}
	size := len(log) / 50
	cases := map[string]ScanOptions{
		"read-ahead below a batch":    {ReadAhead: size / 3},
		"read-ahead of about a batch": {ReadAhead: size - 100},
		"read-ahead growing":          {ReadAhead: 512, MaxReadAhead: 4 * size},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			br := &byteCountingReader{r: bytes.NewReader(log)}
			s := NewScanner(br, 0, Position(len(log)), opts)
			n := 0
			for s.Next() {
				require.Equal(t, Offset(4*n), s.Batch().BaseOffset)
				n++
			}
			require.NoError(t, s.Err())
			require.Equal(t, 50, n)
			require.EqualValues(t, len(log), br.bytes, "every byte of the log read once")
		})
	}
}

// byteCountingReader counts the bytes read.
type byteCountingReader struct {
	r     *bytes.Reader
	bytes int64
}

func (c *byteCountingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.bytes += int64(n)
	return n, err
}

func TestVarintMatchesEncodingBinary(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 127, 128, 1 << 20, -(1 << 20), 1<<31 - 1, -(1 << 31), 1<<62 + 5, -(1 << 62)} {
		enc := appendVarint(nil, v)
		require.Equal(t, varintLen(v), len(enc))
		got, n := varint(enc, 10)
		require.Equal(t, len(enc), n, "%d", v)
		require.Equal(t, v, got)
	}
	_, n := varint([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 5)
	require.Zero(t, n, "a varint longer than its limit")
	_, n = varint([]byte{0x80}, 5)
	require.Zero(t, n, "a varint cut short")
}

// BenchmarkVerify is the CRC-32C check of a batch already in memory (hot
// in cache), the part of a read that no layout change removes.
func BenchmarkVerify(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("batch=%dKiB", size>>10), func(b *testing.B) {
			var bl Builder
			bl.Append(0, nil, bytes.Repeat([]byte("x"), size), nil)
			raw, err := bl.Build()
			require.NoError(b, err)
			batch, err := ParseBatch(raw, 0)
			require.NoError(b, err)
			b.SetBytes(int64(len(raw)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := batch.Verify(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRecordsIn decodes a batch from any of its records on, through data
// windows cut anywhere, and gets the same records as a whole decode.
func TestRecordsIn(t *testing.T) {
	var recs []rec
	for i := range 200 {
		recs = append(recs, rec{ts: 1700000000000 + int64(i), key: []byte(fmt.Sprint("k", i)), value: bytes.Repeat([]byte{byte('a' + i%26)}, i*7%300),
			headers: []Header{{Key: []byte("h"), Value: []byte(fmt.Sprint(i))}}})
	}
	raw := buildBatch(t, None, recs)
	b, err := ParseBatch(raw, 0)
	require.NoError(t, err)
	var dec Decoder
	it, err := dec.Records(&b)
	require.NoError(t, err)
	var want []Record
	var offs []int
	for offs = append(offs, it.Off()); it.Next(); offs = append(offs, it.Off()) {
		r := *it.Record()
		r.Key, r.Value, r.Headers = bytes.Clone(r.Key), bytes.Clone(r.Value), append([]Header(nil), r.Headers...)
		want = append(want, r)
	}
	require.NoError(t, it.Err())
	data := raw[HeaderSize:]
	for _, start := range []int{0, 1, 57, 199} {
		for _, window := range []int{1, 40, 333, 4096, len(data)} {
			t.Run(fmt.Sprintf("from=%d/window=%d", start, window), func(t *testing.T) {
				index, off := int32(start), offs[start]
				var got []Record
				for {
					it := RecordsIn(&b.BatchHeader, 0, data[off:min(off+window, len(data))], index)
					for it.Next() {
						r := *it.Record()
						require.Equal(t, want[it.Index()-1].Offset, r.Offset)
						require.Equal(t, want[it.Index()-1].Value, r.Value)
						require.Equal(t, want[it.Index()-1].Key, r.Key)
						got = append(got, r)
					}
					require.NoError(t, it.Err())
					if !it.Cut() {
						break
					}
					require.Less(t, off+window, len(data), "cut before the end of the batch's data")
					index, off = it.Index(), off+it.Off()
					if it.Off() == 0 {
						window *= 2 // a record longer than the window: read more
					}
				}
				require.Len(t, got, len(want)-start)
			})
		}
	}
	// A record that is bad, not cut, is an error.
	bad := bytes.Clone(data[offs[10]:offs[12]])
	bad[1] = 0x7f // the attributes byte follows the length; corrupt the timestamp delta varint
	it = RecordsIn(&b.BatchHeader, 0, append(bytes.Repeat([]byte{0xff}, 6), bad...), 10)
	require.False(t, it.Next())
	require.Error(t, it.Err())
}

// TestHeaderOffsetsPastTheLargest: a batch whose last offset would pass
// math.MaxInt64 - 1 (the offset after it would not be an int64) is
// corrupt, not a batch whose next offset wraps to a negative one.
func TestHeaderOffsetsPastTheLargest(t *testing.T) {
	raw := buildBatch(t, None, sampleRecords) // last offset delta 3
	const largest = Offset(1<<63 - 1)
	for base, ok := range map[Offset]bool{largest - 4: true, largest - 3: false, largest: false} {
		SetBaseOffset(raw, base)
		h, err := ParseHeader(raw, 0)
		if ok {
			require.NoError(t, err, "base %d", base)
			require.Equal(t, largest, h.NextOffset())
			continue
		}
		require.ErrorIs(t, err, ErrCorrupt, "base %d", base)
		require.ErrorContains(t, err, "pass the largest offset")
	}
}
