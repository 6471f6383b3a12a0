package txn

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/record"
)

func TestIndexRoundTrip(t *testing.T) {
	want := []AbortedTxn{
		{ProducerID: 7, FirstOffset: 10, LastOffset: 20, LastStableOffset: 10},
		{ProducerID: 1 << 40, FirstOffset: 15, LastOffset: 21, LastStableOffset: 21},
	}
	var b []byte
	for _, a := range want {
		b = AppendIndexEntry(b, a)
	}
	require.Len(t, b, 2*IndexEntrySize)
	got, err := ParseIndex(append(b, 1, 2, 3)) // a torn tail is ignored, as Kafka ignores it
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NoError(t, CheckIndex(got, 10))
	require.ErrorIs(t, CheckIndex(got, 21), ErrCorrupt, "an entry ending below the segment's base")

	b[0], b[1] = 0, 1 // version 1: Kafka 3.7 throws
	_, err = ParseIndex(b)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestSnapshotRoundTrip(t *testing.T) {
	want := []ProducerEntry{
		{ProducerID: 4001, ProducerEpoch: 3, LastSequence: 11, LastOffset: 11, OffsetDelta: 2, Timestamp: 1_700_000_000_000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 4002, LastSequence: 1, LastOffset: 40, OffsetDelta: 5, CoordinatorEpoch: 2, CurrentTxnFirstOffset: 37},
	}
	b := EncodeSnapshot(want)
	require.Len(t, b, 10+2*SnapshotEntrySize)
	got, err := ParseSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, int32(9), want[0].FirstSequence())
	require.Equal(t, int32(2147483644), want[1].FirstSequence(), "Kafka's decrementSequence wraps")

	got, err = ParseSnapshot(EncodeSnapshot(nil))
	require.NoError(t, err)
	require.Empty(t, got)

	for name, bad := range map[string][]byte{
		"short":     b[:5],
		"crc":       append(append([]byte(nil), b[:len(b)-1]...), b[len(b)-1]^1),
		"version":   append([]byte{0, 2}, b[2:]...),
		"truncated": b[:len(b)-3],
	} {
		_, err := ParseSnapshot(bad)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}
}

// TestFixtureSnapshots decodes every producer snapshot Kafka brokers wrote
// in the fixtures.
func TestFixtureSnapshots(t *testing.T) {
	root := fixtures.Dir(t)
	var n int
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || filepath.Ext(p) != ".snapshot" {
			return err
		}
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		_, err = ParseSnapshot(data)
		require.NoError(t, err, p)
		n++
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, n, 20)

	data, err := os.ReadFile(filepath.Join(root, "kafka-2.7-multisegment-compacted/kafka-logs/myTopic-0/00000000000000000038.snapshot"))
	require.NoError(t, err)
	entries, err := ParseSnapshot(data)
	require.NoError(t, err)
	require.Equal(t, []ProducerEntry{
		{ProducerID: 4001, LastSequence: 11, LastOffset: 11, OffsetDelta: 2, Timestamp: 0x184d7d15005, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 4002, LastSequence: 11, LastOffset: 23, OffsetDelta: 11, Timestamp: 0x184d7da9d7c, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 4003, LastSequence: 13, LastOffset: 37, OffsetDelta: 13, Timestamp: 0x184d8011c10, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	}, entries)
}

func FuzzParse(f *testing.F) {
	f.Add(EncodeSnapshot([]ProducerEntry{{ProducerID: 1, CurrentTxnFirstOffset: 4}}))
	f.Add(AppendIndexEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 2, LastOffset: 3, LastStableOffset: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if entries, err := ParseSnapshot(b); err == nil {
			require.Equal(t, b, EncodeSnapshot(entries))
		}
		if entries, err := ParseIndex(b); err == nil {
			again := []byte{}
			for _, a := range entries {
				again = AppendIndexEntry(again, a)
			}
			require.Equal(t, b[:len(b)/IndexEntrySize*IndexEntrySize], again[:len(again):len(again)])
			_ = CheckIndex(entries, record.Offset(len(b)))
		}
	})
}
