package fs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// adv33MountDir mounts the data directory dir (opened writable) and
// returns the mount point and the log; both go when the test ends (the
// caller may unmount and close earlier with the returned stop).
func adv33MountDir(t *testing.T, dir string) (string, *storage.Log, func()) {
	t.Helper()
	fusetest.Require(t)
	l, err := storage.Open(dir, storage.Options{Logger: quietLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	mp := t.TempDir()
	srv, err := Mount(mp, l, Options{Logger: quietLogger()})
	if errors.Is(err, ErrNoFUSE) {
		l.Close()
		fusetest.Unusable(t, err.Error())
	}
	require.NoError(t, err)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			unmountOrDetach(t, srv, mp)
			require.NoError(t, l.Close())
		})
	}
	t.Cleanup(stop)
	return mp, l, stop
}

// TestAdv33MountRecreatesDeletedTopic: a topic deleted offline (log
// start 50 and recovery point 100 still in the checkpoints, as a kill -9
// right after `logfs topic delete` leaves them) and made again with
// mkdir through a mount is a new topic: info shows it empty from 0, the
// old offsets are not there (ENOENT), the lines appended and fsynced
// through the mount survive a kill -9 of the mount, from offset 0.
// Promises: "a topic deleted and created again under its old name takes
// nothing from the old one's checkpoints", "after a crash everything
// fsynced is there", "nothing wrong is served".
func TestAdv33MountRecreatesDeletedTopic(t *testing.T) {
	fusetest.Require(t)
	src := t.TempDir()
	l, err := storage.Open(src, storage.Options{Logger: quietLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, _ := top.Partition(0)
	vals := make([][]byte, 100)
	for i := range vals {
		vals[i] = []byte(fmt.Sprintf("old-%d", i))
	}
	_, err = p.AppendValues(vals)
	require.NoError(t, err)
	_, err = p.AdvanceStart(50)
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.NoError(t, l.DeleteTopic("t"))
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(src))) // killed here
	require.NoError(t, l.Close())

	mp, _, stop := adv33MountDir(t, dir)
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	_, err = os.Stat(filepath.Join(mp, "t", "0", "offset", "50"))
	require.True(t, errors.Is(err, syscall.ENOENT), "old offsets are not the new topic's: %v", err)
	f, err := os.OpenFile(filepath.Join(mp, "t", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	var want strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&want, "new-%d\n", i)
	}
	_, err = f.WriteString(want.String())
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	info, err := os.ReadFile(filepath.Join(mp, "t", "0", "info"))
	require.NoError(t, err)
	var in struct {
		Start record.Offset `json:"log_start_offset"`
		End   record.Offset `json:"log_end_offset"`
	}
	require.NoError(t, json.Unmarshal(info, &in))
	require.Equal(t, record.Offset(0), in.Start, "info: %s", info)
	require.Equal(t, record.Offset(10), in.End, "info: %s", info)
	got, err := os.ReadFile(filepath.Join(mp, "t", "0", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, want.String(), string(got))
	crashed := t.TempDir()
	require.NoError(t, os.CopyFS(crashed, os.DirFS(dir))) // kill -9 of the mount
	require.NoError(t, f.Close())
	stop()

	l, err = storage.Open(crashed, storage.Options{Logger: quietLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, record.Offset(0), p.StartOffset())
	require.Equal(t, record.Offset(10), p.EndOffset())
	require.NoError(t, l.Check())
}

// TestAdv33MountConcurrentMkdir: many mkdirs of one new topic, of its
// '.'/'_' twin and of its next partition at once: exactly one of each
// kind wins, the others get EEXIST (or, for a partition of a topic not
// made yet, ENOENT; for one already taken, EEXIST), nothing hangs and
// the data directory checks clean. Promises: topic creation is all or
// nothing, Kafka's collision rule, nothing panics.
func TestAdv33MountConcurrentMkdir(t *testing.T) {
	mp, l, _ := adv33MountDir(t, t.TempDir())
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 12; i++ {
		name := []string{"x.y", "x_y", "x.y/1", "x_y/1"}[i%4]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- os.Mkdir(filepath.Join(mp, name), 0o755)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("mkdir hangs")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			e := adv32Errno(err)
			require.True(t, e == syscall.EEXIST || e == syscall.ENOENT || e == syscall.EINVAL, "%v", err)
		}
	}
	topics := l.Topics()
	require.Len(t, topics, 1, "one of x.y and x_y: %v", topics)
	top, err := l.Topic(topics[0])
	require.NoError(t, err)
	require.LessOrEqual(t, len(top.Partitions()), 2)
	ents, err := os.ReadDir(filepath.Join(mp, topics[0]))
	require.NoError(t, err)
	require.Len(t, ents, len(top.Partitions()))
	require.NoError(t, l.Check())
}
