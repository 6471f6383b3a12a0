package layout

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

func TestSegmentFileNames(t *testing.T) {
	cases := map[string]struct {
		base   record.Offset
		suffix string
	}{
		"00000000000000000000.log":                {0, LogSuffix},
		"00000000000000001234.index":              {1234, IndexSuffix},
		"09223372036854775807.timeindex":          {9223372036854775807, TimeIndexSuffix},
		"00000000000000000078.log.deleted":        {78, LogSuffix + DeletedSuffix},
		"00000000000000000005.timeindex.swap":     {5, TimeIndexSuffix + SwapSuffix},
		"00000000000000000011.viewindex":          {11, ViewIndexSuffix},
		"00000000000000000011.snapshot":           {11, ".snapshot"},
		"00000000000000000042.index.cleaned":      {42, IndexSuffix + CleanedSuffix},
		"00000000000000000000.log.swap.something": {0, ".log.swap.something"},
	}
	for name, want := range cases {
		base, suffix, ok := ParseSegmentFileName(name)
		require.True(t, ok, name)
		require.Equal(t, want.base, base, name)
		require.Equal(t, want.suffix, suffix, name)
		require.Equal(t, name, SegmentFileName(want.base, want.suffix), "names round-trip")
	}
	for _, bad := range []string{"", "leader-epoch-checkpoint", "0.log", "1234.log", "0000000000000000000a.log",
		"-0000000000000000001.log", "00000000000000000000", "00000000000000000000-0000000000.checkpoint",
		"99999999999999999999.log"} {
		_, _, ok := ParseSegmentFileName(bad)
		require.False(t, ok, bad)
	}
}

func TestPartitionDirNames(t *testing.T) {
	cases := map[string]struct {
		topic string
		part  int
	}{
		"orders-0":              {"orders", 0},
		"a-1-0":                 {"a-1", 0},
		"__consumer_offsets-49": {"__consumer_offsets", 49},
		"x.y_z-12":              {"x.y_z", 12},
		"orders--1":             {"orders-", 1}, // a topic may end in '-'; Kafka splits on the last
	}
	for name, want := range cases {
		topic, p, ok := ParsePartitionDirName(name)
		require.True(t, ok, name)
		require.Equal(t, want.topic, topic)
		require.Equal(t, want.part, p)
		require.Equal(t, name, PartitionDirName(topic, p))
	}
	for _, bad := range []string{"orders", "orders-", "-0", "orders-01", "orders-x",
		"orders-0.abc123-delete", "orders-0.abc-future", "a b-0", "orders-99999999999999999999"} {
		_, _, ok := ParsePartitionDirName(bad)
		require.False(t, ok, bad)
	}
}

func TestValidateTopic(t *testing.T) {
	for _, good := range []string{"a", "orders", "A.b_c-9", strings.Repeat("x", 249), "..."} {
		require.NoError(t, ValidateTopic(good), good)
	}
	for _, bad := range []string{"", ".", "..", strings.Repeat("x", 250), "a/b", "a b", "ü", "a\x00"} {
		require.ErrorIs(t, ValidateTopic(bad), ErrInvalidTopic, "%q", bad)
	}
	for _, good := range []string{"0", "7", "123"} {
		_, err := ParsePartition(good)
		require.NoError(t, err)
	}
	for _, bad := range []string{"", "-1", "07", "x", "1.0"} {
		_, err := ParsePartition(bad)
		require.ErrorIs(t, err, ErrInvalidPartition, bad)
	}
}

func TestDeletedPartitionDirName(t *testing.T) {
	name := DeletedPartitionDirName("orders", 3, 0xabc)
	require.Equal(t, "orders-3.00000000000000000000000000000abc-delete", name)
	_, _, ok := ParsePartitionDirName(name)
	require.False(t, ok, "a folder being deleted is not a partition")
}

// TestDeletedPartitionDirNameFits: the folder of a deleted partition of a
// topic of 249 characters still fits in a file name, as Kafka cuts it.
func TestDeletedPartitionDirNameFits(t *testing.T) {
	long := strings.Repeat("a", 249)
	for _, p := range []int{0, 7, 99999} {
		name := DeletedPartitionDirName(long, p, 1<<63)
		require.LessOrEqual(t, len(name), MaxNameLength, name)
		require.True(t, IsDeletedPartitionDir(name), name)
		require.True(t, strings.HasSuffix(name, fmt.Sprintf("-%d.%032x-delete", p, uint64(1<<63))), name)
	}
	require.True(t, IsDeletedPartitionDir("orders-3.0123456789abcdef0123456789abcdef-delete"), "Kafka's")
	for _, not := range []string{"orders-3", "orders-3.0123-delete", "x.0123456789abcdef0123456789abcdef-delete", "orders-3.0123456789abcdef0123456789abcdeg-delete"} {
		require.False(t, IsDeletedPartitionDir(not), not)
	}
}

func TestTopicsCollide(t *testing.T) {
	require.True(t, TopicsCollide("a.b", "a_b"))
	require.True(t, TopicsCollide("a_b.c", "a.b_c"))
	require.False(t, TopicsCollide("a.b", "a.b"), "the same name is not a collision")
	require.False(t, TopicsCollide("a.b", "a-b"))
}
