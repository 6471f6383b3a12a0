package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/internal/fusetest"
)

// TestStopGivesUpManyUnfinishedLines: three append files each hold an
// unfinished line when the cluster's broker starts taking batches and not
// answering, and the mount stops. Closed first, their RELEASEs are
// appended on goroutines of their own; aborted while open (umount -f of a
// busy mount), the shutdown appends them itself, one after the other.
// Either way, once the stop says what it waits for, one more signal gives
// up every line, each logged as an error, and the mount ends: not one
// signal per line, each after delivery.timeout.ms.
func TestStopGivesUpManyUnfinishedLines(t *testing.T) {
	const files = 3
	for _, aborted := range []bool{false, true} {
		t.Run(fmt.Sprint("aborted=", aborted), func(t *testing.T) {
			if aborted && os.Geteuid() != 0 {
				t.Skip("umount -f needs root")
			}
			c, answer := gatedKfake(t)
			dir := t.TempDir()
			mp := filepath.Join(dir, "mnt")
			m := startMount(t, dir, mp, "--data", "copy", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","))
			var open []*os.File
			for i := 0; i < files; i++ {
				f, err := os.OpenFile(filepath.Join(mp, "t", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
				require.NoError(t, err)
				defer f.Close()
				_, err = fmt.Fprintf(f, "first %d\nnever sent %d", i, i)
				require.NoError(t, err)
				open = append(open, f)
			}
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				<-answer // every request waits behind this one
				return nil, nil, false
			})
			if aborted {
				require.ErrorIs(t, syscall.Unmount(mp, syscall.MNT_FORCE), syscall.EBUSY)
				t.Cleanup(func() { fusetest.Unmount(mp, true) })
			} else {
				for _, f := range open {
					require.NoError(t, f.Close())
				}
			}
			require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
			waitText(t, m.stderr, "Ctrl-C again gives")
			require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
			require.Equal(t, 0, m.wait(t), m.stderr())
			errs := m.stderr()
			require.Equal(t, files, strings.Count(errs, `level=ERROR msg="logfs: the unterminated last line of an append file was not appended" path=t/0/append bytes=12 `), errs)
			require.Contains(t, errs, "copy closed cleanly")
		})
	}
}

// TestStopWaitsForSlowCluster: the cluster answers the unfinished line's
// append, only late: the stop says what it waits for, then ends once the
// answer comes, with no error, and the line is in the cluster once.
func TestStopWaitsForSlowCluster(t *testing.T) {
	c, _ := gatedKfake(t)
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp, "--data", "copy", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","))
	f, err := os.OpenFile(filepath.Join(mp, "t", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("first\nlate")
	require.NoError(t, err)
	late := make(chan struct{})
	var lateOnce sync.Once
	t.Cleanup(func() { lateOnce.Do(func() { close(late) }) })
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		<-late // this one only: the others go on
		return nil, nil, false
	})
	require.NoError(t, f.Close())
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	waitText(t, m.stderr, "Ctrl-C again gives it up")
	lateOnce.Do(func() { close(late) })
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.NotContains(t, m.stderr(), "level=ERROR")
	require.Contains(t, m.stderr(), "logfs mount: unmounted "+mp+"; copy closed cleanly")

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer cl.Close()
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < 2 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.Equal(t, []string{"first", "late"}, got)
}
