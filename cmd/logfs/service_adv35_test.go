package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// fullNotifySocket is a NOTIFY_SOCKET whose reader never reads, its queue
// already full: a write to it blocks until the reader goes.
func fullNotifySocket(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_NONBLOCK, 0)
	require.NoError(t, err)
	defer syscall.Close(fd)
	require.NoError(t, syscall.Connect(fd, &syscall.SockaddrUnix{Name: sock}))
	for n := 0; ; n++ {
		if _, err := syscall.Write(fd, []byte("x")); err != nil {
			require.True(t, errors.Is(err, syscall.EAGAIN), "%v", err)
			require.Positive(t, n)
			return sock
		}
	}
}

// TestNotifySocketNobodyReads: a NOTIFY_SOCKET that takes nothing (its
// reader stuck, or one inherited from something that does not read it)
// must not hold the mount. It used to block on READY=1 for as long as the
// reader lived: the mount was up but never ready (a helper parent waited
// forever), and SIGTERM was not heard, as the signal loop had not begun.
// Now each message gives up after a while, with a line that says so, and
// the mount starts and stops as without systemd.
func TestNotifySocketNobodyReads(t *testing.T) {
	sock := fullNotifySocket(t)
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt")
	t.Setenv("NOTIFY_SOCKET", sock) // for the mount started below
	cmd, r, done := startPipedMount(t, dir, mp, "--data", "data")
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	appendLine(t, filepath.Join(mp, "t", "0", "append"), "x\n")
	go func() { // keep stderr drained
		b := make([]byte, 4096)
		for {
			if _, err := r.Read(b); err != nil {
				return
			}
		}
	}()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, done.wait(t))
	require.False(t, mounted(mp))
	require.FileExists(t, filepath.Join(dir, "data", ".kafka_cleanshutdown"))
}
