package kafka_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cluster's log was cut to 10 while logfs was down and grew back to
// exactly the copy's end (20) with other records: nothing but the leader
// epochs tells. A file opened after the mount comes back must read the
// cluster's records, not the copy's lost ones, as a copy kept past the
// cluster's end is checked before a record file opened on it reads.
func TestDivergedCopySameEndAfterRestartAdv34e(t *testing.T) {
	r := &restartable{t: t, id: "diverge-same-end"}
	data, snap, e0 := twoHistories(t, r)
	c := r.start(data)
	copyDir := t.TempDir()
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("a", 0, 10)+lines("b", 0, 10), readFile(t, filepath.Join(m.mp, "rg/0/offset/0")))
	m.stop(t)
	c.Close()

	c = r.start(snap)
	require.EqualValues(t, 10, c.PartitionInfo("rg", 0).HighWatermark)
	require.NoError(t, c.MoveTopicPartition("rg", 0, c.LeaderFor("rg", 0)))
	e1 := c.PartitionInfo("rg", 0).Epoch
	require.Greater(t, e1, e0)
	divergeAsKafka(c, "rg", []epochStart{{e0, 0}, {e1, 10}})
	cl := client(t, c)
	produce(t, cl, "rg", 0, values("c", 10)...) // offsets 10..19, epoch e1
	cl.Close()

	m = startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("c", 0, 10), readFile(t, filepath.Join(m.mp, "rg/0/offset/10")))
	require.Equal(t, lines("a", 0, 10)+lines("c", 0, 10), readFile(t, filepath.Join(m.mp, "rg/0/offset/0")))
	m.stop(t)
}
