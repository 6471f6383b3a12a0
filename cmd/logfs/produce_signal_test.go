package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// bgCmd is a logfs command run in the background, its temporary copy of
// a cluster's partition in a TMPDIR of its own.
type bgCmd struct {
	cmd    *exec.Cmd
	tmp    string // the command's TMPDIR
	stderr lockedBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startBg starts `logfs ARGS…` in a folder of its own; setup, if not nil,
// may change the command first. It is killed when the test ends.
func startBg(t *testing.T, setup func(*exec.Cmd), args ...string) *bgCmd {
	t.Helper()
	b := &bgCmd{cmd: exec.Command(logfsBin, args...), tmp: t.TempDir(), exited: make(chan struct{})}
	b.cmd.Dir = t.TempDir()
	b.cmd.Env = append(os.Environ(), "TMPDIR="+b.tmp)
	b.cmd.Stderr = &b.stderr
	if setup != nil {
		setup(b.cmd)
	}
	require.NoError(t, b.cmd.Start())
	go func() {
		b.err = b.cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		<-b.exited
	})
	return b
}

// waitFor waits for ch to close, failing the test with what after 30 s.
func (b *bgCmd) waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s; stderr: %s", what, b.stderr.String())
	}
}

// tmpLeft lists what the command left in its TMPDIR.
func (b *bgCmd) tmpLeft(t *testing.T) []os.DirEntry {
	t.Helper()
	left, err := os.ReadDir(b.tmp)
	require.NoError(t, err)
	return left
}

// TestProduceSecondSignalQuits: produce to a cluster whose broker takes a
// batch and does not answer. Ctrl-C makes produce wait for that batch, so
// that its summary is true, which lasts up to delivery.timeout.ms (120 s):
// it says so after a second, and a second Ctrl-C ends it at once, with
// the status of a process the signal ended, its temporary copy of the
// partition removed.
func TestProduceSecondSignalQuits(t *testing.T) {
	c, answer := gatedKfake(t)
	var produces atomic.Int32
	held := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if produces.Add(1) == 2 { // the first goes through
			close(held)
			<-answer
		}
		return nil, nil, false
	})

	var stdin io.WriteCloser
	b := startBg(t, func(cmd *exec.Cmd) {
		var err error
		stdin, err = cmd.StdinPipe()
		require.NoError(t, err)
	}, "produce", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","), "t", "0")
	// A read of stdin is a batch: written once the first was produced,
	// "two" is the second.
	_, err := stdin.Write([]byte("one\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return produces.Load() >= 1 }, 30*time.Second, 5*time.Millisecond)
	_, err = stdin.Write([]byte("two\n"))
	require.NoError(t, err)
	b.waitFor(t, held, "the second batch never came")

	require.NoError(t, b.cmd.Process.Signal(syscall.SIGINT))
	waitText(t, b.stderr.String, "Ctrl-C again quits at once")
	require.Contains(t, b.stderr.String(), "logfs produce: interrupted; waiting for the records on their way to be acknowledged (Ctrl-C again quits at once: they may still be appended)\n")
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGINT))
	b.waitFor(t, b.exited, "produce did not end at the second Ctrl-C")
	require.Equal(t, 130, exitCode(t, b.err), b.stderr.String())
	require.Contains(t, b.stderr.String(), "logfs produce: interrupted again; quitting: the records on their way may still be appended\n")
	require.Empty(t, b.tmpLeft(t), "the temporary copy is removed")
}
