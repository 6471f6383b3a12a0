package main

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceInterruptedWhileOpening: Ctrl-C while produce is still
// opening the cluster (its first contact waits up to 15 s for a broker
// that does not answer) ends it, with the status of a process the signal
// ended, and removes the temporary copy it had made for the partition.
// The signal's default action used to end it there, leaving the copy in
// TMPDIR.
func TestProduceInterruptedWhileOpening(t *testing.T) {
	c, answer := gatedKfake(t)
	held := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		once.Do(func() { close(held) })
		<-answer // until the test ends
		return nil, nil, false
	})

	b := startBg(t, func(cmd *exec.Cmd) { cmd.Stdin = strings.NewReader("never\n") },
		"produce", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","), "t", "0")
	b.waitFor(t, held, "produce never asked for metadata")
	require.Len(t, b.tmpLeft(t), 1, "the temporary copy is made before the cluster is opened")

	require.NoError(t, b.cmd.Process.Signal(syscall.SIGINT))
	b.waitFor(t, b.exited, "produce did not end at Ctrl-C")
	require.Empty(t, b.tmpLeft(t), "the temporary copy is removed; stderr: %s", b.stderr.String())
	require.Equal(t, 130, exitCode(t, b.err), b.stderr.String())
	require.Equal(t, "logfs produce: interrupted while opening the cluster; nothing was appended\n", b.stderr.String())
}

// TestConsumeInterruptedWhileFetching: Ctrl-C while consume (without
// --follow) waits for its temporary copy to fetch what it prints (a whole
// partition, perhaps gigabytes) ends it with the status of a process the
// signal ended and removes the copy. The signal's default action used to
// end it there, leaving the copy in TMPDIR.
func TestConsumeInterruptedWhileFetching(t *testing.T) {
	c, answer := gatedKfake(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: "t", Partition: 0, Value: []byte("one")}).FirstErr())
	cl.Close()
	held := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		once.Do(func() { close(held) })
		<-answer // until the test ends
		return nil, nil, false
	})

	b := startBg(t, nil, "consume", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","), "--offset", "0", "t", "0")
	b.waitFor(t, held, "consume never fetched")
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGINT))
	b.waitFor(t, b.exited, "consume did not end at Ctrl-C")
	require.Empty(t, b.tmpLeft(t), "the temporary copy is removed; stderr: %s", b.stderr.String())
	require.Equal(t, 130, exitCode(t, b.err), b.stderr.String())
	require.Equal(t, "logfs consume: interrupted\n", b.stderr.String())
}
