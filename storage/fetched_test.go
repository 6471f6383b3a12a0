package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// leaderBatch encodes n records as a leader would have stored them from
// base on: a producer id, a sequence and the offsets already assigned.
func leaderBatch(t testing.TB, base record.Offset, n int, prefix string) []byte {
	t.Helper()
	var b record.Builder
	for i := 0; i < n; i++ {
		b.Append(1_700_000_000_000+int64(base)+int64(i), nil, []byte(fmt.Sprintf("%s-%d", prefix, int(base)+i)), nil)
	}
	raw, err := b.BuildWith(record.BuildOptions{ProducerID: 7, ProducerEpoch: 1, BaseSequence: int32(base)})
	require.NoError(t, err)
	raw = append([]byte(nil), raw...)
	record.SetBaseOffset(raw, base)
	return raw
}

func viewString(t testing.TB, p *Partition, from record.Offset) string {
	t.Helper()
	v, err := p.NewView(Values, from)
	require.NoError(t, err)
	defer v.Close()
	size, err := v.Size()
	require.NoError(t, err)
	buf := make([]byte, size+10)
	n, err := v.ReadAt(buf, 0)
	if !errors.Is(err, io.EOF) {
		require.NoError(t, err)
	}
	require.EqualValues(t, size, n)
	return string(buf[:n])
}

// Fetched batches are stored byte for byte, with the leader's offsets,
// and a copy begun inside a batch keeps that batch whole under a log
// start inside it.
func TestAppendFetchedKeepsLeaderBatches(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{Gaps: true})
	topic, err := l.CreateTopic("copy", 1, small("segment.bytes=200"))
	require.NoError(t, err)
	p, err := topic.Partition(0)
	require.NoError(t, err)

	b0, b1, b2 := leaderBatch(t, 10, 3, "v"), leaderBatch(t, 13, 2, "v"), leaderBatch(t, 20, 2, "v") // a gap, as after compaction
	require.NoError(t, p.ResetFetched(11, [][]byte{b0, b1}))
	require.EqualValues(t, 11, p.StartOffset())
	require.EqualValues(t, 15, p.EndOffset())
	require.Equal(t, "v-11\nv-12\nv-13\nv-14\n", viewString(t, p, 11))
	require.Equal(t, []record.Offset{10}, p.SegmentBases())

	require.NoError(t, p.AppendFetched([][]byte{b2}))
	require.EqualValues(t, 22, p.EndOffset())
	require.Equal(t, "v-14\nv-20\nv-21\n", viewString(t, p, 14))
	bases := p.SegmentBases()
	require.Len(t, bases, 2, "segment.bytes=200 rolled")
	require.EqualValues(t, 20, bases[1])

	// Not a continuation: refused, nothing appended.
	err = p.AppendFetched([][]byte{b1})
	require.ErrorIs(t, err, ErrNotFollowing)
	require.EqualValues(t, 22, p.EndOffset())
	bad := append([]byte(nil), leaderBatch(t, 22, 1, "v")...)
	bad[len(bad)-1] ^= 1
	require.True(t, IsCorruption(p.AppendFetched([][]byte{bad})))
	require.EqualValues(t, 22, p.EndOffset())

	// The bytes on disk are the leader's.
	seg := p.segments()[0]
	got := make([]byte, len(b0)+len(b1))
	_, err = seg.log.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, append(append([]byte(nil), b0...), b1...), got)
}

// DeleteRecords on the cluster: the start moves, whole segments below go,
// an open view finishes what it holds, and a reset starts elsewhere with
// readers of the old copy told so.
func TestFetchedStartMovesAndReset(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{Gaps: true})
	topic, err := l.CreateTopic("copy", 1, small("segment.bytes=200"))
	require.NoError(t, err)
	p, err := topic.Partition(0)
	require.NoError(t, err)
	var batches [][]byte
	for off := record.Offset(0); off < 12; off += 2 {
		batches = append(batches, leaderBatch(t, off, 2, "a"))
	}
	require.NoError(t, p.ResetFetched(0, batches))
	require.Greater(t, len(p.SegmentBases()), 2)
	old, err := p.NewView(Values, 0)
	require.NoError(t, err)
	defer old.Close()

	_, err = p.AdvanceStart(5)
	require.NoError(t, err)
	require.EqualValues(t, 5, p.StartOffset())
	require.LessOrEqual(t, p.SegmentBases()[0], record.Offset(5))
	_, err = p.NewView(Values, 4)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	require.Equal(t, "a-5\na-6\na-7\na-8\na-9\na-10\na-11\n", viewString(t, p, 5))
	_, err = p.AdvanceStart(13)
	require.ErrorIs(t, err, ErrNotFollowing)

	require.NoError(t, p.ResetFetched(101, [][]byte{leaderBatch(t, 100, 3, "b")}))
	require.EqualValues(t, 101, p.StartOffset())
	require.Equal(t, []record.Offset{100}, p.SegmentBases())
	// A start after the first batch kept (the one before it left out).
	require.NoError(t, p.ResetFetched(200, [][]byte{leaderBatch(t, 203, 1, "b")}))
	require.Equal(t, []record.Offset{200}, p.SegmentBases())
	require.Equal(t, "b-203\n", viewString(t, p, 200))
	require.NoError(t, p.ResetFetched(101, [][]byte{leaderBatch(t, 100, 3, "b")}))
	require.Equal(t, "b-101\nb-102\n", viewString(t, p, 101))
	// The view opened before reads what it pinned, then learns the rest
	// is gone instead of running on into the new copy.
	buf := make([]byte, 1000)
	n, err := old.ReadAt(buf, 0)
	require.Positive(t, n)
	for err == nil {
		var k int
		k, err = old.ReadAt(buf, int64(n))
		n += k
	}
	require.ErrorIs(t, err, ErrDeleted)
	require.Contains(t, string(buf[:n]), "a-0\n")
	require.NotContains(t, string(buf[:n]), "b-")
}

// A copy closed and opened again is where it was.
func TestFetchedCopyReopens(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	topic, err := l.CreateTopic("copy", 1, nil)
	require.NoError(t, err)
	p, _ := topic.Partition(0)
	require.NoError(t, p.ResetFetched(52, [][]byte{leaderBatch(t, 50, 4, "c"), leaderBatch(t, 54, 1, "c")}))
	require.NoError(t, l.Close())

	l2 := openLog(t, dir, Options{Gaps: true})
	p2, err := l2.Partition("copy", 0)
	require.NoError(t, err)
	require.EqualValues(t, 52, p2.StartOffset())
	require.EqualValues(t, 55, p2.EndOffset())
	require.Equal(t, "c-52\nc-53\nc-54\n", viewString(t, p2, 52))
	require.NoError(t, p2.AppendFetched([][]byte{leaderBatch(t, 55, 1, "c")}))
	require.Equal(t, "c-54\nc-55\n", viewString(t, p2, 54))
}

// newCopy opens a log in a new folder with a topic "copy" of one
// partition and 200-byte segments, for a follower's batches.
func newCopy(t *testing.T) (string, *Log, *Partition) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	topic, err := l.CreateTopic("copy", 1, small("segment.bytes=200"))
	require.NoError(t, err)
	p, err := topic.Partition(0)
	require.NoError(t, err)
	return dir, l, p
}

// A copy grows backwards: the prepended segments come before the first,
// in one step, and a view opened before goes on undisturbed.
func TestPrependFetched(t *testing.T) {
	dir, l, p := newCopy(t)
	require.NoError(t, p.ResetFetched(11, [][]byte{leaderBatch(t, 10, 2, "p"), leaderBatch(t, 12, 2, "p")}))
	v, err := p.NewView(Values, 12)
	require.NoError(t, err)
	defer v.Close()

	pp, err := p.BeginPrepend(3)
	require.NoError(t, err)
	require.EqualValues(t, 10, pp.Limit())
	require.Error(t, pp.Append([][]byte{leaderBatch(t, 9, 2, "p")}), "a batch reaching the copy")
	for off := record.Offset(2); off < 10; off += 2 {
		require.NoError(t, pp.Append([][]byte{leaderBatch(t, off, 2, "p")}))
	}
	require.EqualValues(t, 11, p.StartOffset(), "nothing visible before Commit")
	require.NoError(t, pp.Commit())
	require.EqualValues(t, 3, p.StartOffset())
	require.Equal(t, "p-3\np-4\np-5\np-6\np-7\np-8\np-9\np-10\np-11\np-12\np-13\n", viewString(t, p, 3))
	require.NoError(t, p.AppendFetched([][]byte{leaderBatch(t, 14, 1, "p")}))
	buf := make([]byte, 100)
	n, _ := v.ReadAt(buf, 0)
	require.Equal(t, "p-12\np-13\np-14\n", string(buf[:n]))
	require.NoError(t, l.Check())

	// The copy changed under a prepend: nothing of it stays.
	pp, err = p.BeginPrepend(0)
	require.NoError(t, err)
	require.NoError(t, pp.Append([][]byte{leaderBatch(t, 0, 2, "p")}))
	_, err = p.AdvanceStart(10)
	require.NoError(t, err)
	require.ErrorIs(t, pp.Commit(), ErrNotFollowing)
	require.EqualValues(t, 10, p.StartOffset())
	require.NoError(t, l.Close())

	l2 := openLog(t, dir, Options{Gaps: true})
	p2, err := l2.Partition("copy", 0)
	require.NoError(t, err)
	require.EqualValues(t, 10, p2.StartOffset())
	require.Equal(t, "p-10\np-11\np-12\np-13\np-14\n", viewString(t, p2, 10))
}

// LastBatch names the batch that holds the copy's last offset, with the
// leader epoch a follower's fetch names (LastFetchedEpoch), across rolls
// and a reopen, and nothing for an empty copy.
func TestLastBatchOfCopy(t *testing.T) {
	dir, l, p := newCopy(t)
	_, ok, err := p.LastBatch()
	require.NoError(t, err)
	require.False(t, ok, "an empty copy has no last batch")

	inEpoch := func(raw []byte, epoch int32) []byte {
		binary.BigEndian.PutUint32(raw[12:16], uint32(epoch)) // not under the CRC
		return raw
	}
	require.NoError(t, p.ResetFetched(0, [][]byte{inEpoch(leaderBatch(t, 0, 3, "v"), 1), inEpoch(leaderBatch(t, 3, 2, "v"), 4)}))
	h, ok, err := p.LastBatch()
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 3, h.BaseOffset)
	require.EqualValues(t, 4, h.PartitionLeaderEpoch)

	for base := record.Offset(5); base < 40; base += 5 {
		require.NoError(t, p.AppendFetched([][]byte{inEpoch(leaderBatch(t, base, 5, "v"), int32(base))}))
	}
	require.Greater(t, len(p.SegmentBases()), 2, "the copy rolled")
	h, ok, err = p.LastBatch()
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 35, h.BaseOffset)
	require.EqualValues(t, 35, h.PartitionLeaderEpoch)
	require.NoError(t, l.Close())

	l2 := openLog(t, dir, Options{Gaps: true})
	p2, err := l2.Partition("copy", 0)
	require.NoError(t, err)
	h, ok, err = p2.LastBatch()
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 39, h.LastOffset())
	require.EqualValues(t, 35, h.PartitionLeaderEpoch)

	require.NoError(t, p2.ResetFetched(100, nil))
	_, ok, err = p2.LastBatch()
	require.NoError(t, err)
	require.False(t, ok, "a copy started again with nothing has no last batch")
}
