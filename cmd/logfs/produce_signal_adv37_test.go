package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

	cmd := exec.Command(logfsBin, "produce", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","), "t", "0")
	cmd.Dir = t.TempDir()
	tmp := t.TempDir() // where the temporary copy goes
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdin = strings.NewReader("never\n")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("produce never asked for metadata; stderr: %s", stderr.String())
	}
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Len(t, left, 1, "the temporary copy is made before the cluster is opened")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("produce did not end at Ctrl-C; stderr: %s", stderr.String())
	}
	left, err = os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "the temporary copy is removed; stderr: %s", stderr.String())
	require.Equal(t, 130, exitCode(t, waitErr), stderr.String())
	require.Equal(t, "logfs produce: interrupted while opening the cluster; nothing was appended\n", stderr.String())
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

	cmd := exec.Command(logfsBin, "consume", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","), "--offset", "0", "t", "0")
	cmd.Dir = t.TempDir()
	tmp := t.TempDir() // where the temporary copy goes
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("consume never fetched; stderr: %s", stderr.String())
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("consume did not end at Ctrl-C; stderr: %s", stderr.String())
	}
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "the temporary copy is removed; stderr: %s", stderr.String())
	require.Equal(t, 130, exitCode(t, waitErr), stderr.String())
	require.Equal(t, "logfs consume: interrupted\n", stderr.String())
}
