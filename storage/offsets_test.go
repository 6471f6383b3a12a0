package storage

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// TestOffsetsExhausted: a damaged recovery-point checkpoint that moves a
// partition's log end next to math.MaxInt64 (a crash, so recovery goes on
// at the recovery point past a hole) makes the appends that would pass
// the largest offset fail with ErrOffsetsExhausted, writing nothing; the
// ones that fit work, and the directory opens again. Before, the offsets
// wrapped to negative ones and the next open failed.
func TestOffsetsExhausted(t *testing.T) {
	dir := t.TempDir()
	l := reopen(t, dir, false)
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, _ := top.Partition(0)
	_, err = p.Append(values(10, "old"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, recovery.WriteCheckpoint(vfs.Default, filepath.Join(dir, layout.RecoveryPointFile),
		map[recovery.TopicPartition]record.Offset{{Topic: "t", Partition: 0}: math.MaxInt64 - 2}))
	require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))

	l = reopen(t, dir, false)
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, record.Offset(math.MaxInt64-2), p.EndOffset())
	_, err = p.Append(values(3, "over"))
	require.ErrorIs(t, err, ErrOffsetsExhausted)
	require.Equal(t, record.Offset(math.MaxInt64-2), p.EndOffset(), "nothing written")
	off, err := p.Append(values(2, "fits"))
	require.NoError(t, err)
	require.Equal(t, record.Offset(math.MaxInt64-2), off)
	require.Equal(t, record.Offset(math.MaxInt64), p.EndOffset())
	_, err = p.Append(values(1, "over"))
	require.ErrorIs(t, err, ErrOffsetsExhausted)
	require.NoError(t, l.Close())

	l = reopen(t, dir, false)
	defer l.Close()
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"9223372036854775805:fits-0", "9223372036854775806:fits-1"}, readAll(t, p, math.MaxInt64-2))
}
