package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitText waits up to 30 s for text() to hold want, and fails with
// what it holds then.
func waitText(t *testing.T, text func() string, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(text(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q after 30 s in: %s", want, text())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gatedKfake starts a one-broker kfake cluster with topic t (one
// partition), and a channel for the test's control functions to hold
// requests on. When the test ends the channel closes, then the cluster.
func gatedKfake(t *testing.T) (*kfake.Cluster, <-chan struct{}) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	answer := make(chan struct{})
	t.Cleanup(func() {
		close(answer)
		c.Close()
	})
	return c, answer
}

// TestStopRightAfterUnfinishedLine stops the mount the moment the file
// holding an unfinished line is closed, as a script does (printf then
// umount), a round at a time: the RELEASE that appends the line may still
// be running as the mount goes, and go-fuse cancels the requests it
// has running then. Every line must be there after, on a cluster (where
// the append takes a round trip, and the first asks for a producer id)
// and locally.
func TestStopRightAfterUnfinishedLine(t *testing.T) {
	const rounds = 10
	t.Run("cluster", func(t *testing.T) {
		c, _ := gatedKfake(t)
		dir := t.TempDir()
		var want []string
		for i := 0; i < rounds; i++ {
			mp := filepath.Join(dir, fmt.Sprint("mnt", i))
			m := startMount(t, dir, mp, "--data", "copy", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","))
			line := fmt.Sprint("unfinished ", i)
			appendLine(t, filepath.Join(mp, "t", "0", "append"), line) // no newline: appended on RELEASE
			want = append(want, line)
			require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, m.wait(t), m.stderr())
			require.NotContains(t, m.stderr(), "level=ERROR", "round %d", i)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
		require.NoError(t, err)
		defer cl.Close()
		var got []string
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for len(got) < rounds && ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		require.Equal(t, want, got)
	})
	t.Run("local", func(t *testing.T) {
		dir := t.TempDir()
		ok(t, dir, "", "topic", "create", "--data", "data", "t")
		var want strings.Builder
		for i := 0; i < rounds; i++ {
			mp := filepath.Join(dir, fmt.Sprint("mnt", i))
			m := startMount(t, dir, mp, "--data", "data")
			line := fmt.Sprint("unfinished ", i)
			appendLine(t, filepath.Join(mp, "t", "0", "append"), line) // no newline: appended on RELEASE
			fmt.Fprintln(&want, line)
			require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, m.wait(t), m.stderr())
			require.NotContains(t, m.stderr(), "level=ERROR", "round %d", i)
		}
		require.Equal(t, want.String(), ok(t, dir, "", "consume", "--data", "data", "--offset", "0", "t", "0"))
	})
}

// TestStopGivesUpUnfinishedLine stops a cluster mount while the
// unfinished line of a file closed just before waits to be appended, to
// a cluster that is gone, or whose broker took the batch and does not
// answer: the mount says what it waits for and that another Ctrl-C gives
// it up; the second signal does, the lost line is logged as an error, and
// the mount ends at once (not after delivery.timeout.ms, 120 s, nor after
// a request.timeout.ms of its own requests), its copy closed cleanly.
func TestStopGivesUpUnfinishedLine(t *testing.T) {
	for _, tc := range []struct {
		name, lost string
		fault      func(c *kfake.Cluster, answer <-chan struct{})
	}{
		{"gone", "err=", func(c *kfake.Cluster, _ <-chan struct{}) { c.Close() }},
		{"no answer", "it was sent and not acknowledged, and may still be appended", func(c *kfake.Cluster, answer <-chan struct{}) {
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				<-answer // every request waits behind this one
				return nil, nil, false
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, answer := gatedKfake(t)
			dir := t.TempDir()
			mp := filepath.Join(dir, "mnt")
			m := startMount(t, dir, mp, "--data", "copy", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","))
			// Opened and written while the cluster answers (an open learns
			// the topic's settings from it, the first line gets the
			// producer id); closed once it does not.
			f, err := os.OpenFile(filepath.Join(mp, "t", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.WriteString("first\nnever sent")
			require.NoError(t, err)
			tc.fault(c, answer)
			require.NoError(t, f.Close())
			require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
			waitText(t, m.stderr, "Ctrl-C again gives it up")
			require.Contains(t, m.stderr(), "logfs mount: stopping once the unfinished line of a closed append file is appended (to a cluster, at most delivery.timeout.ms); Ctrl-C again gives it up\n")
			require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
			require.Equal(t, 0, m.wait(t), m.stderr())
			errs := m.stderr()
			require.Contains(t, errs, "logfs mount: giving up 1 unfinished line of closed append files; the errors that follow name them\n")
			require.Regexp(t, `level=ERROR msg="logfs: the unterminated last line of an append file was not appended" path=t/0/append bytes=10 err=`, errs)
			require.Contains(t, errs, tc.lost)
			require.Contains(t, errs, "logfs mount: unmounted "+mp+"; copy closed cleanly")
		})
	}
}
