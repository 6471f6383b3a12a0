package main

import (
	"bytes"
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

	cmd := exec.Command(logfsBin, "produce", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","), "t", "0")
	cmd.Dir = t.TempDir()
	tmp := t.TempDir() // where the temporary copy goes
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
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
	// A read of stdin is a batch: written once the first was produced,
	// "two" is the second.
	_, err = stdin.Write([]byte("one\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return produces.Load() >= 1 }, 30*time.Second, 5*time.Millisecond)
	_, err = stdin.Write([]byte("two\n"))
	require.NoError(t, err)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("the second batch never came; stderr: %s", stderr.String())
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	waitText(t, stderr.String, "Ctrl-C again quits at once")
	require.Contains(t, stderr.String(), "logfs produce: interrupted; waiting for the records on their way to be acknowledged (Ctrl-C again quits at once: they may still be appended)\n")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
		require.Equal(t, 130, exitCode(t, waitErr), stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("produce did not end at the second Ctrl-C; stderr: %s", stderr.String())
	}
	require.Contains(t, stderr.String(), "logfs produce: interrupted again; quitting: the records on their way may still be appended\n")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "the temporary copy is removed")
}
