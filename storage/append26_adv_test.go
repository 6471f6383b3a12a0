package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// fits26 is the exact rule, measured independently of CheckRecord and
// SureFit: the batch that holds the record alone is at most maxMessage
// bytes.
func fits26(r *Record, maxMessage int64) bool {
	return int64(record.HeaderSize+record.RecordSize(0, 0, r.Key, r.Value, r.Headers)) <= maxMessage
}

// largestFit26 is the longest value that, with key and headers, fits a
// batch of its own under maxMessage, or -1 if not even an empty one does.
func largestFit26(key []byte, headers []record.Header, maxMessage int64, buf []byte) int {
	for n := int(maxMessage); n >= 0; n-- {
		if fits26(&Record{Key: key, Value: buf[:n], Headers: headers}, maxMessage) {
			return n
		}
	}
	return -1
}

// segmentState is what an append must leave alone when it is refused.
type segmentState struct {
	end      record.Offset
	segs     int
	size     int64
	fileSize int64
}

func stateOf(t *testing.T, p *Partition) segmentState {
	t.Helper()
	s := p.active()
	st, err := s.log.Stat()
	require.NoError(t, err)
	return segmentState{end: p.EndOffset(), segs: len(p.segments()), size: s.size.Load(), fileSize: st.Size()}
}

// requireBatchesWithin requires every batch of p to be at most maxMessage
// bytes (max.message.bytes as it was when each was written) and to be the
// batch that Builder.Append makes of the same records.
func requireBatchesLikeAppend(t *testing.T, p *Partition) {
	t.Helper()
	var d record.Decoder
	for _, seg := range p.segments() {
		for _, b := range batchesOf(t, seg, true) {
			it, err := d.Records(&b)
			require.NoError(t, err)
			var bl record.Builder
			bl.Reset()
			for it.Next() {
				r := it.Record()
				bl.AppendAt(int32(r.Offset-b.BaseOffset), r.Timestamp, r.Key, r.Value, r.Headers)
			}
			require.NoError(t, it.Err())
			want, err := bl.Build()
			require.NoError(t, err)
			record.SetBaseOffset(want, b.BaseOffset)
			require.True(t, bytes.Equal(want, b.Bytes), "batch at %d (offset %d) is not Append's", b.Pos, b.BaseOffset)
		}
	}
}

// TestAppend26MaxMessageEdges appends single records at the edges of
// max.message.bytes: a value of SureFit bytes and one either side, the
// longest value that fits a batch of its own and one byte more, with no
// key, an empty key or a key, and with nil, empty or one header, under
// limits from 0 (SureFit far below zero) to Kafka's default. A record is
// taken exactly when its batch alone fits, measured here by
// record.RecordSize; a refused one wraps ErrRecordTooLarge and leaves the
// partition as it was; a taken one reads back as given, in a batch no
// larger than the limit.
func TestAppend26MaxMessageEdges(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	buf := make([]byte, 1<<21)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	limits := []int64{0, 1, record.HeaderSize - 1, record.HeaderSize, record.HeaderSize + 6, record.HeaderSize + 7,
		record.HeaderSize + 8, record.HeaderSize + maxFraming - 1, record.HeaderSize + maxFraming,
		record.HeaderSize + maxFraming + 1, 100, 200, 8192 + 80, 1048588}
	type shape struct {
		key     []byte
		headers []record.Header
	}
	shapes := map[string]shape{
		"value only":          {},
		"empty key":           {key: []byte{}},
		"key":                 {key: []byte("key")},
		"empty headers":       {headers: []record.Header{}},
		"one header":          {headers: []record.Header{{Key: []byte("h"), Value: []byte("v")}}},
		"key and header":      {key: []byte("k"), headers: []record.Header{{Key: []byte("h")}}},
		"empty key, headers":  {key: []byte{}, headers: []record.Header{}},
		"key, a null value":   {key: []byte("k")},
		"null value, headers": {headers: []record.Header{}},
	}
	for ti, limit := range limits {
		name := fmt.Sprintf("t%d", ti)
		top, err := l.CreateTopic(name, 1, Overrides{"max.message.bytes": limit})
		require.NoError(t, err)
		p, err := top.Partition(0)
		require.NoError(t, err)
		cfg := top.Config()
		require.Equal(t, limit, cfg.MaxMessageBytes)
		for sname, sh := range shapes {
			t.Run(fmt.Sprintf("max.message.bytes=%d/%s", limit, sname), func(t *testing.T) {
				fit := cfg.SureFit()
				exact := largestFit26(sh.key, sh.headers, limit, buf)
				var lens []int
				for _, n := range []int{0, 1, fit - 1, fit, fit + 1, exact - 1, exact, exact + 1} {
					if n >= 0 && n <= len(buf) {
						lens = append(lens, n)
					}
				}
				if exact >= 0 {
					// the exact rule's own edge, as a sanity check of the oracle
					require.True(t, fits26(&Record{Key: sh.key, Value: buf[:exact], Headers: sh.headers}, limit))
					require.False(t, fits26(&Record{Key: sh.key, Value: buf[:exact+1], Headers: sh.headers}, limit))
				}
				values := [][]byte{nil}
				for _, n := range lens {
					values = append(values, buf[:n:n])
				}
				if sname == "key, a null value" || sname == "null value, headers" {
					values = values[:1]
				}
				for _, v := range values {
					r := Record{Timestamp: 1_700_000_000_000, Key: sh.key, Value: v, Headers: sh.headers}
					before := stateOf(t, p)
					off, err := p.Append([]Record{r})
					if !fits26(&r, limit) {
						require.ErrorIs(t, err, ErrRecordTooLarge, "value %d B (SureFit %d, exact %d)", len(v), fit, exact)
						require.Equal(t, before, stateOf(t, p), "a refused record changed the partition")
						require.ErrorIs(t, cfg.CheckRecord(&r), ErrRecordTooLarge)
						continue
					}
					require.NoError(t, err, "value %d B (SureFit %d, exact %d)", len(v), fit, exact)
					require.NoError(t, cfg.CheckRecord(&r))
					require.Equal(t, before.end, off)
					rd, err := p.NewReader(off)
					require.NoError(t, err)
					got, err := rd.Next()
					require.NoError(t, err)
					require.Equal(t, off, got.Offset)
					require.Equal(t, r.Timestamp, got.Timestamp)
					require.Equal(t, r.Key == nil, got.Key == nil, "null key")
					require.True(t, bytes.Equal(r.Key, got.Key))
					require.Equal(t, r.Value == nil, got.Value == nil, "null value")
					require.True(t, bytes.Equal(r.Value, got.Value))
					require.Len(t, got.Headers, len(r.Headers))
					_, err = rd.Next()
					require.ErrorIs(t, err, io.EOF)
					require.NoError(t, rd.Close())
					last := lastBatch26(t, p)
					require.Equal(t, off, last.BaseOffset)
					require.Equal(t, int32(0), last.LastOffsetDelta)
					require.LessOrEqual(t, last.Size(), limit, "a batch over max.message.bytes")
				}
			})
		}
		requireBatchesLikeAppend(t, p)
	}
}

// lastBatch26 is the header of the last batch of p's active segment.
func lastBatch26(t *testing.T, p *Partition) record.BatchHeader {
	t.Helper()
	bs := batchesOf(t, p.active(), false)
	require.NotEmpty(t, bs)
	return bs[len(bs)-1].BatchHeader
}

// TestAppend26RefusedRecordAmongOthers: one record over the limit refuses
// the whole append, wherever it is among records that fit and whatever
// makes it too big (value, key, headers), and names it.
func TestAppend26RefusedRecordAmongOthers(t *testing.T) {
	const limit = 300
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, Overrides{"max.message.bytes": limit})
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	big := bytes.Repeat([]byte("b"), limit)
	exact := largestFit26(nil, nil, limit, big)
	hdrs := []record.Header{{Key: []byte("h"), Value: big[:limit-record.HeaderSize-5]}}
	tooBig := map[string]Record{
		"value one byte over":          {Value: big[:exact+1]},
		"a big key":                    {Key: big[:limit-record.HeaderSize], Value: []byte("v")},
		"a big key, no value":          {Key: big[:limit-record.HeaderSize]},
		"a key and a value":            {Key: big[:100], Value: big[:exact-99]},
		"big headers":                  {Value: []byte("v"), Headers: hdrs},
		"big headers, no key or value": {Headers: []record.Header{{Key: big[:limit-record.HeaderSize]}}},
	}
	ok := func(i int) Record { return Record{Timestamp: int64(1000 + i), Value: big[:exact-i%2]} }
	for name, bad := range tooBig {
		for _, at := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("%s/at %d", name, at), func(t *testing.T) {
				require.False(t, fits26(&bad, limit))
				recs := []Record{ok(0), ok(1), ok(2)}
				recs = append(recs[:at], append([]Record{bad}, recs[at:]...)...)
				before := stateOf(t, p)
				_, err := p.Append(recs)
				require.ErrorIs(t, err, ErrRecordTooLarge)
				require.Contains(t, err.Error(), "record "+strconv.Itoa(at))
				require.Equal(t, before, stateOf(t, p))
			})
		}
	}
	// The same records without the bad one go in, one batch each.
	before := stateOf(t, p)
	off, err := p.Append([]Record{ok(0), ok(1), ok(2)})
	require.NoError(t, err)
	require.Equal(t, before.end, off)
	require.Equal(t, off+3, p.EndOffset())
	for _, b := range batchesOf(t, p.active(), false) {
		require.LessOrEqual(t, b.Size(), int64(limit))
	}
	requireBatchesLikeAppend(t, p)
}

// TestAppend26ConfigChanges: max.message.bytes is the topic's at each
// append, SureFit with it: a record taken under one limit is refused
// under a lower one set since, down to limits where SureFit is negative,
// and taken again when it is raised.
func TestAppend26ConfigChanges(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	buf := bytes.Repeat([]byte("v"), 4096)
	set := func(limit int64) {
		t.Helper()
		require.NoError(t, top.SetConfig(Overrides{"max.message.bytes": limit}))
	}
	steps := []struct {
		limit int64
		value []byte
		key   []byte
	}{
		{200, buf[:largestFit26(nil, nil, 200, buf)], nil},
		{199, buf[:largestFit26(nil, nil, 200, buf)], nil},
		{199, buf[:largestFit26(nil, nil, 199, buf)], nil},
		{1048588, buf[:4096], nil},
		{4096, buf[:4096], nil},
		{4096 + record.HeaderSize + maxFraming, buf[:4096], nil},
		{record.HeaderSize + 7, nil, nil},
		{record.HeaderSize + 7, []byte{}, nil},
		{record.HeaderSize + 7, []byte("a"), nil},
		{record.HeaderSize + 7, []byte{}, []byte{}},
		{record.HeaderSize + 8, []byte("a"), nil},
		{record.HeaderSize + 8, []byte{}, []byte{}},
		{record.HeaderSize + 8, nil, []byte("k")},
		{record.HeaderSize + 6, nil, nil},
		{0, nil, nil},
		{1048588, buf[:200], nil},
	}
	var want []string
	for i, s := range steps {
		set(s.limit)
		r := Record{Timestamp: 1_700_000_000_000, Key: s.key, Value: s.value}
		before := stateOf(t, p)
		_, err := p.Append([]Record{r})
		if fits26(&r, s.limit) {
			require.NoError(t, err, "step %d: max.message.bytes %d, key %d B, value %d B", i, s.limit, len(s.key), len(s.value))
			want = append(want, fmt.Sprintf("%d:%s", before.end, s.value))
		} else {
			require.ErrorIs(t, err, ErrRecordTooLarge, "step %d: max.message.bytes %d, key %d B, value %d B", i, s.limit, len(s.key), len(s.value))
			require.Equal(t, before, stateOf(t, p))
		}
	}
	require.Equal(t, want, readAll(t, p, 0))
	// the steps cross the edge both ways
	require.Less(t, len(want), len(steps))
	require.Greater(t, len(want), len(steps)/2)
	requireBatchesLikeAppend(t, p)
}

// TestAppend26ReadBackShapes appends records of every shape Partition.Append
// sorts between AppendValue and Append (null, empty and set keys and
// values, nil, empty and set headers, timestamps before and after the
// batch's first, 0 for the clock), many to a call under limits that split
// them over batches and segments. Each reads back as given, and every
// batch is the one Builder.Append makes of the same records.
func TestAppend26ReadBackShapes(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("max.message.bytes=400", "segment.bytes=2000"))
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	keys := [][]byte{nil, {}, []byte("k")}
	vals := [][]byte{nil, {}, []byte("v"), bytes.Repeat([]byte("w"), 63), bytes.Repeat([]byte("x"), 64), bytes.Repeat([]byte("y"), 200)}
	hdrs := [][]record.Header{nil, {}, {{Key: []byte("h"), Value: nil}}, {{Key: []byte{}, Value: []byte{}}}}
	stamps := []int64{1_700_000_000_000, 1_699_999_999_000, 1_700_000_000_064, 1, 0}
	var recs []Record
	i := 0
	for _, k := range keys {
		for _, v := range vals {
			for _, h := range hdrs {
				recs = append(recs, Record{Timestamp: stamps[i%len(stamps)], Key: k, Value: v, Headers: h})
				i++
			}
		}
	}
	for round := 0; round < 3; round++ {
		off, err := p.Append(recs)
		require.NoError(t, err)
		rd, err := p.NewReader(off)
		require.NoError(t, err)
		for j, r := range recs {
			got, err := rd.Next()
			require.NoError(t, err)
			require.Equal(t, off+record.Offset(j), got.Offset)
			if r.Timestamp != 0 {
				require.Equal(t, r.Timestamp, got.Timestamp, "record %d", j)
			} else {
				require.Greater(t, got.Timestamp, int64(1_000_000_000_000), "record %d: the clock's time", j)
			}
			require.Equal(t, r.Key == nil, got.Key == nil, "record %d: null key", j)
			require.True(t, bytes.Equal(r.Key, got.Key), "record %d key", j)
			require.Equal(t, r.Value == nil, got.Value == nil, "record %d: null value", j)
			require.True(t, bytes.Equal(r.Value, got.Value), "record %d value", j)
			require.Len(t, got.Headers, len(r.Headers), "record %d headers", j)
			for hi, h := range r.Headers {
				require.True(t, bytes.Equal(h.Key, got.Headers[hi].Key))
				require.Equal(t, h.Value == nil, got.Headers[hi].Value == nil)
				require.True(t, bytes.Equal(h.Value, got.Headers[hi].Value))
			}
		}
		_, err = rd.Next()
		require.True(t, errors.Is(err, io.EOF), "%v", err)
		require.NoError(t, rd.Close())
	}
	require.Greater(t, len(p.segments()), 1)
	for _, seg := range p.segments() {
		for _, b := range batchesOf(t, seg, false) {
			require.LessOrEqual(t, b.Size(), int64(400))
		}
	}
	requireBatchesLikeAppend(t, p)
}

// TestAppend26SureFitIsTheMost: SureFit is what its comment says, the
// most bytes of key and value that fit whatever their framing. At its
// tightest (key, value and record lengths each a 5-byte varint, from 2^27
// bytes on) a record of SureFit bytes fits and one of SureFit+1 does not,
// so a SureFit one byte larger would let through a record the exact size
// refuses; and CheckRecord agrees with the exact size on both. Only the
// lengths are read: the buffer is never touched, and takes no memory.
func TestAppend26SureFitIsTheMost(t *testing.T) {
	buf := make([]byte, 1<<29)
	for _, limit := range []int64{1<<28 + 100, 1<<28 + 1000, 1<<29 - 7, math.MaxInt32} {
		cfg := Config{MaxMessageBytes: limit}
		fit := cfg.SureFit()
		require.Equal(t, int(limit)-record.HeaderSize-maxFraming, fit)
		for _, n := range []int{fit, fit + 1} {
			key := 1<<27 + 5
			if n > len(buf) {
				continue
			}
			r := Record{Key: buf[:key:key], Value: buf[key:n:n]}
			require.Equal(t, n <= fit, fits26(&r, limit), "max.message.bytes %d: key and value of %d bytes", limit, n)
			require.Equal(t, n <= fit, cfg.CheckRecord(&r) == nil, "max.message.bytes %d: key and value of %d bytes", limit, n)
		}
	}
	// Below the batch header and the framing SureFit is negative: no
	// record is sure to fit, and even an empty one is sized.
	for _, limit := range []int64{0, 1, record.HeaderSize, record.HeaderSize + maxFraming - 1} {
		cfg := Config{MaxMessageBytes: limit}
		require.Negative(t, cfg.SureFit())
		for _, r := range []Record{{}, {Value: []byte{}}, {Key: []byte{}, Value: []byte{}}} {
			require.Equal(t, fits26(&r, limit), cfg.CheckRecord(&r) == nil, "max.message.bytes %d", limit)
		}
	}
}
