package storage

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// LastBatch after the mount died mid-append (a torn batch at the end of
// the last segment) and with the last segment's index overwritten: the
// batch it names is the one that ends at the copy's end, with its epoch,
// so that the first fetch names the epoch of what the copy really holds.
func TestLastBatchAfterTornAppendAndBadIndexAdv34e(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	topic, err := l.CreateTopic("copy", 1, small("segment.bytes=300", "index.interval.bytes=1"))
	require.NoError(t, err)
	p, _ := topic.Partition(0)
	inEpoch := func(raw []byte, epoch int32) []byte {
		binary.BigEndian.PutUint32(raw[12:16], uint32(epoch))
		return raw
	}
	for base := record.Offset(0); base < 30; base += 3 {
		require.NoError(t, p.AppendFetched([][]byte{inEpoch(leaderBatch(t, base, 3, "v"), int32(base/3))}))
	}
	bases := p.SegmentBases()
	require.Greater(t, len(bases), 1)
	last := bases[len(bases)-1]
	require.NoError(t, l.Close())

	name := filepath.Join(dir, "copy-0", fmt.Sprintf("%020d", last))
	f, err := os.OpenFile(name+".log", os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	torn := inEpoch(leaderBatch(t, 30, 3, "v"), 99)
	_, err = f.Write(torn[:len(torn)-7])
	require.NoError(t, err)
	require.NoError(t, f.Close())
	// An entry that points inside the first batch, where no batch starts.
	require.NoError(t, os.WriteFile(name+".index", []byte{0, 0, 0, 1, 0, 0, 0, 7}, 0o644))

	l2 := openLog(t, dir, Options{Gaps: true})
	p2, err := l2.Partition("copy", 0)
	require.NoError(t, err)
	require.EqualValues(t, 30, p2.EndOffset())
	h, ok, err := p2.LastBatch()
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 30, h.NextOffset())
	require.EqualValues(t, 9, h.PartitionLeaderEpoch)
}
