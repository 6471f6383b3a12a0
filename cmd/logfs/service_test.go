package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/internal/fusetest"
)

// TestSystemdNotify runs the ExecStart of the shipped unit
// (contrib/systemd/logfs.service, Type=notify) as systemd would, on a fake
// NOTIFY_SOCKET: READY=1 comes once the mount answers, with a STATUS line;
// SIGTERM, the unit's KillSignal, brings STOPPING=1, and the mount ends
// cleanly.
func TestSystemdNotify(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	unit := unitSettings(t, filepath.Join("..", "..", "contrib", "systemd", "logfs.service"))
	require.Equal(t, "notify", unit["Type"])
	require.Equal(t, "SIGTERM", unit["KillSignal"])
	data, mp := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	args := strings.Fields(unit["ExecStart"])
	require.Equal(t, "/usr/local/bin/logfs", args[0])
	for i, a := range args {
		args[i] = strings.NewReplacer("/var/lib/logfs", data, "/mnt/logfs", mp).Replace(a)
	}
	require.Contains(t, unit["ExecStartPre"], "/mnt/logfs", "the stale-mount cleanup names the same mount point")

	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	require.NoError(t, err)
	defer conn.Close()
	cmd := exec.Command(logfsBin, args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if mounted(mp) {
			fusetest.Unmount(mp, true)
		}
	})

	msg := readNotify(t, conn)
	require.Contains(t, strings.Split(msg, "\n"), "READY=1", msg)
	require.Contains(t, msg, "STATUS="+data+" mounted at "+mp+" (read-write)")
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(mp, &st))
	require.EqualValues(t, fuseSuperMagic, st.Type, "the mount answers by the time READY=1 comes")
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, "STOPPING=1", readNotify(t, conn))
	require.NoError(t, cmd.Wait(), stderr.String())
	require.FileExists(t, filepath.Join(dir, "data", ".kafka_cleanshutdown"))
}

// unitSettings reads the Key=Value lines of a systemd unit file.
func unitSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

func readNotify(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	b := make([]byte, 4096)
	n, err := conn.Read(b)
	require.NoError(t, err, "no notification from the mount")
	return string(b[:n])
}

// helperBin is the logfs binary under a mount helper's name.
func helperBin(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Symlink(logfsBin, p))
	return p
}

// TestMountHelper runs logfs as mount(8) runs a helper: it returns once the
// mount answers and leaves it running in the background until umount, which
// closes the log cleanly; a bad option fails with the mount's one line and
// leaves nothing behind; -f mounts nothing.
func TestMountHelper(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	helper := helperBin(t, "mount.fuse.logfs")
	data, mp := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o755))

	r := runHelper(t, helper, data, mp, "-o", "bogus")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	require.Contains(t, r.stderr, "logfs mount: -o bogus: not an option logfs knows")
	require.False(t, mounted(mp))
	require.NoDirExists(t, data)

	r = runHelper(t, helper, "-f", data, mp)
	require.Equal(t, 0, r.code, r.stderr)
	require.False(t, mounted(mp))

	r = runHelper(t, helper, data, mp, "-n", "-o", "rw,noatime,nodev,nosuid,segment.bytes=1048576")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	t.Cleanup(func() {
		if mounted(mp) {
			fusetest.Unmount(mp, true)
		}
	})
	require.True(t, mounted(mp), "mounted by the time the helper returns")
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	appendLine(t, filepath.Join(mp, "t", "0", "append"), "via the helper\n")
	b, err := os.ReadFile(filepath.Join(mp, "t", "0", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, "via the helper\n", string(b))

	require.NoError(t, fusetest.Unmount(mp, false))
	waitFile(t, filepath.Join(data, ".kafka_cleanshutdown"))
	require.Equal(t, "via the helper\n", ok(t, dir, "", "consume", "--data", data, "--offset", "0", "t", "0"))
}

func runHelper(t *testing.T, helper string, args ...string) result {
	t.Helper()
	cmd := exec.Command(helper, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the mount helper did not return; stderr: %s", errOut.String())
	}
	return result{out.String(), errOut.String(), exitCode(t, err)}
}

// waitFile waits for the background mount to write p as it ends.
func waitFile(t *testing.T, p string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if fileExists(p) {
			return
		}
	}
	t.Fatalf("%s did not appear", p)
}

func TestVersion(t *testing.T) {
	out := ok(t, t.TempDir(), "", "--version")
	require.Regexp(t, `^logfs \S+( \(commit [0-9a-f]+(, modified)?\))?, go\S+ linux/\w+\n$`, out)
	build := exec.Command(goTool(), "build", "-ldflags", "-X main.version=9.8.7", "-o", filepath.Join(t.TempDir(), "logfs"), ".")
	bin := build.Args[len(build.Args)-2]
	b, err := build.CombinedOutput()
	require.NoError(t, err, "%s", b)
	v, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(v), "logfs 9.8.7"), "%s", v)
}
