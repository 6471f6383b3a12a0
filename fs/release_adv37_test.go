package fs

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/internal/tmpfs"
	"github.com/logfs/logfs/storage"
)

// logBuffer is a log the mount writes while the test reads it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *logBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestGiveUpAtStopEndsEveryLineLeft: three handles hold unfinished lines
// when the connection goes without their RELEASEs (an abort, an umount
// right after the closes), so the shutdown appends them itself, one after
// the other, to a cluster that never answers. Once the connection is gone
// nothing is served any more: a give-up then gives up every line left, not
// only the one under way, or each of the others would wait out
// delivery.timeout.ms in turn, a Ctrl-C apiece.
func TestGiveUpAtStopEndsEveryLineLeft(t *testing.T) {
	l, p := newMountedPartition(t, "t")
	c := &gatedCluster{l: l, gate: make(chan struct{})} // never answers
	var logged logBuffer
	f := newLogFS(l, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil)), Cluster: c}.withDefaults(l))
	ps := f.partition(p)
	for _, line := range []string{"a", "b", "c"} {
		h := &appendHandle{n: &appendNode{ps: ps}}
		n, errno := h.Write(context.Background(), []byte(line), 0)
		require.Zero(t, errno)
		require.EqualValues(t, 1, n)
	}

	done := make(chan struct{})
	go func() {
		f.shutdown()
		close(done)
	}()
	require.Eventually(t, func() bool { return f.releasing.Load() == 1 }, 30*time.Second, time.Millisecond)
	f.giveUpReleases()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(c.gate) // let the shutdown end, for the log's close
		<-done
		t.Fatalf("the shutdown still waited on the lines left 30 s after the give-up; log:\n%s", logged.String())
	}
	require.Empty(t, values(t, p))
	require.Equal(t, 3, strings.Count(logged.String(), "level=ERROR msg=\"logfs: the unterminated last line of an append file was not appended\""), logged.String())
}

// TestReleaseOnFullDisk: a local mount whose disk is full when the
// unfinished line of a closed append file is released. The line is lost
// (its close(2) returned long ago): one ERROR line names it, nothing
// crashes, and once room is back the mount appends as before.
func TestReleaseOnFullDisk(t *testing.T) {
	fusetest.Require(t)
	root := tmpfs.Mount(t, 4<<20)
	l, err := storage.Open(filepath.Join(root, "data"), storage.Options{Logger: quietLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() }) // on a full disk the close may fail
	top, err := l.CreateTopic("t", 1, storage.Overrides{"flush.ms": -1})
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	var logged logBuffer
	mp := t.TempDir()
	srv, err := Mount(mp, l, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { unmountOrDetach(t, srv, mp) })
	app := filepath.Join(mp, "t", "0", "append")
	appendTo := func(s string) error {
		f, err := os.OpenFile(app, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, werr := f.WriteString(s)
		require.NoError(t, f.Close())
		return werr
	}

	require.NoError(t, appendTo("before\n"))
	tmpfs.Fill(t, root, "filler")
	// Longer than a page: a line that fits in the log's last page, which
	// tmpfs has already, would go in.
	lost := strings.Repeat("x", 3*4096)
	require.NoError(t, appendTo(lost), "an unfinished line is only held")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logged.String(), "level=ERROR") {
		require.False(t, time.Now().After(deadline), "no ERROR 30 s after the close; log:\n%s", logged.String())
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, os.Remove(filepath.Join(root, "filler")))
	require.NoError(t, appendTo("after\n"))
	require.NoError(t, appendTo("last"))
	require.Eventually(t, func() bool { return len(values(t, p)) == 3 }, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"before", "after", "last"}, values(t, p))
	require.NoError(t, l.Check())
	errs := logged.String()
	require.Equal(t, 1, strings.Count(errs, "level=ERROR"), errs)
	require.Regexp(t, `level=ERROR msg="logfs: the unterminated last line of an append file was not appended" path=t/0/append bytes=12288 err=.*no space left on device`, errs)
}

// stubbornCluster is a gatedCluster whose appends wait at gate whatever
// their context says: a FUSE request stuck in the mount's code, which
// holds go-fuse's loop, and so the mount's own notice that its connection
// ended.
type stubbornCluster struct {
	*gatedCluster
	got chan struct{} // closed when the first append waits
}

func (c *stubbornCluster) Produce(ctx context.Context, p *storage.Partition, recs []storage.Record) (int, error) {
	select {
	case <-c.got:
	default:
		close(c.got)
	}
	<-c.gate
	return c.gatedCluster.Produce(context.Background(), p, recs)
}

// TestUnmountAfterAbort: umount -f of a busy mount aborts its connection
// and leaves it attached, dead. Unmount then must not report the mount
// busy (it is over, and no unmount removes it while a file is open): it
// waits for the mount's end and returns nil, and Attached names where it
// is left. Here a write is still being served when the abort comes, so
// go-fuse has not seen the connection end when Unmount is called.
func TestUnmountAfterAbort(t *testing.T) {
	fusetest.Require(t)
	if os.Geteuid() != 0 {
		t.Skip("umount -f needs root")
	}
	l, _ := newMountedPartition(t, "t")
	c := &stubbornCluster{gatedCluster: &gatedCluster{l: l, gate: make(chan struct{})}, got: make(chan struct{})}
	mp := t.TempDir()
	srv, err := Mount(mp, l, Options{Logger: quietLogger(), Cluster: c})
	require.NoError(t, err)
	opened := false
	t.Cleanup(func() {
		if !opened {
			close(c.gate)
		}
		srv.Wait()
		fusetest.Unmount(mp, true)
	})
	f, err := os.OpenFile(filepath.Join(mp, "t", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	go f.WriteString("line\n") // ends with the abort
	select {
	case <-c.got:
	case <-time.After(30 * time.Second):
		t.Fatal("the write never reached the cluster")
	}
	require.ErrorIs(t, syscall.Unmount(mp, syscall.MNT_FORCE), syscall.EBUSY)

	unmounted := make(chan error, 1)
	go func() { unmounted <- srv.Unmount() }()
	select {
	case err := <-unmounted:
		require.NoError(t, err, "Unmount of an aborted mount, before its end")
		t.Fatal("Unmount returned before the mount ended")
	case <-time.After(2 * time.Second): // time for Unmount to fail, were it to
	}
	close(c.gate)
	opened = true
	require.NoError(t, <-unmounted)
	require.Equal(t, []string{mp}, srv.Attached())
}

// TestGiveUpCountedRelease: a stopping mount gives up the appends that
// Appending counts. One counted the moment before it takes the context it
// appends under must be given up too: not left to wait out a cluster
// that never answers under the fresh context the give-up puts in place.
func TestGiveUpCountedRelease(t *testing.T) {
	l, p := newMountedPartition(t, "t")
	c := &gatedCluster{l: l, gate: make(chan struct{})} // never answers
	f := newLogFS(l, Options{Logger: quietLogger(), Cluster: c}.withDefaults(l))
	t.Cleanup(f.shutdown)
	h := &appendHandle{n: &appendNode{ps: f.partition(p)}}
	_, errno := h.Write(context.Background(), []byte("line"), 0)
	require.Zero(t, errno)

	counted, proceed := make(chan struct{}), make(chan struct{})
	releaseHook = func() {
		close(counted)
		<-proceed
	}
	t.Cleanup(func() { releaseHook = nil })
	done := make(chan struct{})
	go func() {
		h.release(true)
		close(done)
	}()
	<-counted
	require.EqualValues(t, 1, f.releasing.Load())
	f.giveUpReleases() // as Server.GiveUp does once Appending says 1
	close(proceed)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(c.gate)
		<-done
		t.Fatal("the counted release was not given up")
	}
	require.Empty(t, values(t, p))
}

// TestUnmountUnderDeadMount: another FUSE mount, stacked on the mount
// point, died (aborted while busy). statfs of the mount point reaches that
// one: Unmount must not take its ENOTCONN for the end of its own mount and
// wait for an end that does not come. Whatever it answers, it returns.
func TestUnmountUnderDeadMount(t *testing.T) {
	fusetest.Require(t)
	if os.Geteuid() != 0 {
		t.Skip("umount -f needs root")
	}
	l, _ := newMountedPartition(t, "t")
	mp := t.TempDir()
	srv, err := Mount(mp, l, Options{Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { unmountOrDetach(t, srv, mp) })
	top, err := gofs.Mount(mp, &gofs.Inode{}, &gofs.Options{MountOptions: fuse.MountOptions{DirectMount: true, Name: "other"}})
	require.NoError(t, err)
	d, err := os.Open(mp) // the other mount's root: busy
	require.NoError(t, err)
	require.ErrorIs(t, syscall.Unmount(mp, syscall.MNT_FORCE), syscall.EBUSY)
	var st syscall.Statfs_t
	require.ErrorIs(t, syscall.Statfs(mp, &st), syscall.ENOTCONN, "the mount on top is dead")
	top.Wait()

	unmounted := make(chan error, 1)
	go func() { unmounted <- srv.Unmount() }()
	select {
	case err := <-unmounted:
		t.Logf("Unmount under a dead mount: %v", err)
	case <-time.After(30 * time.Second):
		d.Close()
		syscall.Unmount(mp, syscall.MNT_DETACH) // the dead one on top
		syscall.Unmount(mp, 0)                  // ours, which Unmount waits for
		<-unmounted
		t.Fatal("Unmount waited for its mount's end under a dead mount on top")
	}
	d.Close()
	require.NoError(t, syscall.Unmount(mp, 0)) // the dead one on top
}

// TestUnmountUnderLiveMount: another FUSE mount is stacked on the mount
// point. An unmount by that path would take the one on top, another
// program's, and then wait for its own mount's end, which does not come.
// Unmount must leave the other mount alone and say why it cannot unmount.
func TestUnmountUnderLiveMount(t *testing.T) {
	fusetest.Require(t)
	l, _ := newMountedPartition(t, "t")
	mp := t.TempDir()
	srv, err := Mount(mp, l, Options{Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { unmountOrDetach(t, srv, mp) })
	top, err := gofs.Mount(mp, &gofs.Inode{}, &gofs.Options{MountOptions: fuse.MountOptions{DirectMount: true, Name: "other"}})
	require.NoError(t, err)
	topDev := mountDevice(mp)
	require.NotEqual(t, srv.dev, topDev)

	unmounted := make(chan error, 1)
	go func() { unmounted <- srv.Unmount() }()
	select {
	case err := <-unmounted:
		require.Error(t, err, "Unmount under another mount")
		t.Logf("Unmount under a live mount: %v", err)
	case <-time.After(30 * time.Second):
		syscall.Unmount(mp, syscall.MNT_DETACH) // whatever is on top
		syscall.Unmount(mp, 0)                  // ours, which Unmount waits for
		<-unmounted
		t.Fatal("Unmount waited for its mount's end")
	}
	require.Equal(t, topDev, mountDevice(mp), "the mount on top is still there")
	require.NoError(t, top.Unmount())
}
