package fs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// gatedCluster is a Cluster over a local log whose appends wait at gate:
// a cluster that does not answer until the test says (or the append's
// context ends).
type gatedCluster struct {
	l    *storage.Log
	gate chan struct{}
}

func (c *gatedCluster) Topics(context.Context) ([]string, error) { return c.l.Topics(), nil }
func (c *gatedCluster) Partitions(_ context.Context, topic string) (int, error) {
	t, err := c.l.Topic(topic)
	if err != nil {
		return 0, err
	}
	return len(t.Partitions()), nil
}
func (c *gatedCluster) CreateTopic(_ context.Context, name string) error {
	_, err := c.l.CreateTopic(name, 1, nil)
	return err
}
func (c *gatedCluster) CreatePartition(_ context.Context, topic string, id int) error {
	t, err := c.l.Topic(topic)
	if err == nil {
		_, err = t.AddPartition(id)
	}
	return err
}
func (c *gatedCluster) Copy(_ context.Context, topic string, id int) (*storage.Partition, error) {
	t, err := c.l.Topic(topic)
	if err != nil {
		return nil, err
	}
	return t.Partition(id)
}
func (c *gatedCluster) Offsets(_ context.Context, p *storage.Partition) (record.Offset, record.Offset, error) {
	return p.StartOffset(), p.EndOffset(), nil
}
func (c *gatedCluster) OffsetForTime(_ context.Context, p *storage.Partition, ts int64) (record.Offset, error) {
	return p.OffsetForTime(ts)
}
func (c *gatedCluster) Hold(context.Context, *storage.Partition, record.Offset) (func(), error) {
	return func() {}, nil
}
func (c *gatedCluster) Produce(ctx context.Context, p *storage.Partition, recs []storage.Record) (int, error) {
	select {
	case <-c.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if _, err := p.Append(recs); err != nil {
		return 0, err
	}
	return len(recs), nil
}
func (c *gatedCluster) RefreshLimit(context.Context, *storage.Partition) bool { return false }

// TestReleaseToStuckClusterOutlivesUnmount: the unfinished line of a
// closed append file goes to a cluster that does not answer, and the mount
// is unmounted from outside meanwhile. The kernel's connection ends at
// once: the mount's device number is free, and the next FUSE mount (here
// another logfs) takes it. The stopping mount must not take that mount
// for its own: Unmount must not unmount it, nor Attached name it. The
// line is appended once the cluster answers, and only then does the
// mount end.
func TestReleaseToStuckClusterOutlivesUnmount(t *testing.T) {
	fusetest.Require(t)
	l, p := newMountedPartition(t, "t")
	c := &gatedCluster{l: l, gate: make(chan struct{})}
	mp := t.TempDir()
	srv, err := Mount(mp, l, Options{Logger: quietLogger(), Cluster: c})
	require.NoError(t, err)
	ended := false
	t.Cleanup(func() {
		if !ended {
			srv.GiveUp()
			unmountOrDetach(t, srv, mp)
		}
	})
	dev := mountDevice(mp)

	f, err := os.OpenFile(filepath.Join(mp, "t", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("pending")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Eventually(t, func() bool { return srv.Appending() == 1 }, 10*time.Second, 5*time.Millisecond)

	require.NoError(t, syscall.Unmount(mp, 0))
	other, otherLog := t.TempDir(), t.TempDir()
	ol, err := storage.Open(otherLog, storage.Options{Logger: quietLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	osrv, err := Mount(other, ol, Options{Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() {
		unmountOrDetach(t, osrv, other)
		require.NoError(t, ol.Close())
	})
	t.Logf("device %s, the next mount's %s", dev, mountDevice(other))

	unmounted := make(chan error, 1)
	go func() { unmounted <- srv.Unmount() }()
	select {
	case err := <-unmounted:
		t.Fatalf("Unmount returned (%v) while the line is still being appended", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.Equal(t, int64(1), srv.Appending())
	close(c.gate)
	require.NoError(t, <-unmounted)
	ended = true
	require.Empty(t, srv.Attached())
	require.Equal(t, []string{"pending"}, values(t, p))

	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(other, &st), "the next mount is still there")
	require.EqualValues(t, 0x65735546, st.Type, "the next mount was unmounted by the first one's Unmount")
}
