package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestNotifySocketBogus (holds): a NOTIFY_SOCKET that is no socket, or
// one nobody listens on, or of a kind go cannot dial, does not keep the
// mount from starting and stopping cleanly.
func TestNotifySocketBogus(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for name, sock := range map[string]string{
		"missing":        filepath.Join(dir, "nothing"),
		"directory":      dir,
		"regular file":   file,
		"vsock":          "vsock:2:1234",
		"abstract, none": "@logfs-adv35-nobody-listens",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("NOTIFY_SOCKET", sock)
			mp := filepath.Join(dir, "mnt")
			m := startMount(t, dir, mp, "--data", "data")
			require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, m.wait(t), m.stderr())
			require.FileExists(t, filepath.Join(dir, "data", ".kafka_cleanshutdown"))
		})
	}
}

// TestNotifyAbstractSocket (holds): systemd may give an abstract socket
// ("@name"); READY=1 and STOPPING=1 reach it.
func TestNotifyAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("@logfs-adv35-%d", os.Getpid())
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	require.NoError(t, err)
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", name)
	dir := t.TempDir()
	m := startMount(t, dir, filepath.Join(dir, "mnt"), "--data", "data")
	require.Contains(t, strings.Split(readNotify(t, conn), "\n"), "READY=1")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, "STOPPING=1", readNotify(t, conn))
	require.Equal(t, 0, m.wait(t), m.stderr())
}

// fillPartitions creates topic t of partitions partitions in dir's data
// directory "data" and produces records lines to each: something for a
// recovery to scan.
func fillPartitions(t *testing.T, dir string, partitions, records int) {
	t.Helper()
	ok(t, dir, "", "topic", "create", "--data", "data", "--partitions", fmt.Sprint(partitions), "t")
	var in strings.Builder
	for i := 0; i < records; i++ {
		fmt.Fprintf(&in, "record %06d with some bytes for recovery to scan\n", i)
	}
	for p := 0; p < partitions; p++ {
		ok(t, dir, in.String(), "produce", "--data", "data", "t", fmt.Sprint(p))
	}
}

// TestNotifyDuringRecovery (holds): a start that recovers sends STATUS
// lines with EXTEND_TIMEOUT_USEC while it does, and READY=1 after them,
// once the mount answers.
func TestNotifyDuringRecovery(t *testing.T) {
	dir := t.TempDir()
	fillPartitions(t, dir, 4, 40000)
	require.NoError(t, os.Remove(filepath.Join(dir, "data", ".kafka_cleanshutdown")))

	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	require.NoError(t, err)
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("LOGFS_PROGRESS_DELAY", "0")
	t.Setenv("LOGFS_PROGRESS_INTERVAL", "1ms")
	// Read as systemd does, while the mount starts: the socket's queue
	// holds 10 messages (net.unix.max_dgram_qlen), and a recovery slow
	// enough sends more than that before READY=1, which would then wait
	// on a reader that is not reading, and time out (as it should).
	msgs := make(chan string, 1024)
	go func() {
		defer close(msgs)
		b := make([]byte, 4096)
		for {
			n, err := conn.Read(b)
			if err != nil {
				return // closed at the end of the test
			}
			msgs <- string(b[:n])
		}
	}()
	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp, "--data", "data")
	next := func() string {
		t.Helper()
		select {
		case msg := <-msgs:
			return msg
		case <-time.After(30 * time.Second):
			t.Fatalf("no notification from the mount; stderr: %s", m.stderr())
			return ""
		}
	}
	var statuses []string
	for {
		msg := next()
		if strings.Contains(msg, "READY=1") {
			require.Contains(t, msg, "STATUS=data mounted at "+mp)
			break
		}
		statuses = append(statuses, msg)
	}
	require.NotContains(t, m.stderr(), "telling systemd")
	require.NotEmpty(t, statuses, "no STATUS during the recovery")
	for _, s := range statuses {
		require.Regexp(t, `^STATUS=recovering: .*\nEXTEND_TIMEOUT_USEC=\d+$`, s)
	}
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(mp, &st))
	require.EqualValues(t, fuseSuperMagic, st.Type)
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, "STOPPING=1", next())
	require.Equal(t, 0, m.wait(t), m.stderr())
}
