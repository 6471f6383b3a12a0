package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
)

// mountProc is a `logfs mount` running in the background.
type mountProc struct {
	cmd  *exec.Cmd
	mp   string
	mu   sync.Mutex
	errs strings.Builder
	done chan struct{}
	err  error
}

func (m *mountProc) stderr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errs.String()
}

// start starts m.cmd and collects its stderr; the channel it returns is
// closed at the ready line.
func (m *mountProc) start(t *testing.T) <-chan struct{} {
	t.Helper()
	m.done = make(chan struct{})
	pipe, err := m.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, m.cmd.Start())
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		var once sync.Once
		for sc.Scan() {
			m.mu.Lock()
			m.errs.WriteString(sc.Text() + "\n")
			m.mu.Unlock()
			if strings.Contains(sc.Text(), "ready:") {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, pipe)
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	return ready
}

// stop ends the mount process if it still runs: SIGTERM, then SIGKILL
// after 30 s.
func (m *mountProc) stop() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
}

// startMount runs `logfs mount ARGS… MOUNTPOINT` in dir and waits for its
// ready line. The mount is taken down when the test ends, whatever happens.
func startMount(t *testing.T, dir, mountpoint string, args ...string) *mountProc {
	t.Helper()
	fusetest.Require(t)
	m := &mountProc{mp: mountpoint}
	m.cmd = exec.Command(logfsBin, append(append([]string{"mount"}, args...), mountpoint)...)
	m.cmd.Dir = dir
	ready := m.start(t)
	t.Cleanup(func() {
		m.stop()
		if mounted(mountpoint) {
			fusetest.Unmount(mountpoint, true)
		}
	})
	select {
	case <-ready:
	case <-m.done:
		if strings.Contains(m.stderr(), "FUSE is not available") {
			fusetest.Unusable(t, m.stderr())
		}
		t.Fatalf("logfs mount exited before it was ready: %v; stderr: %s", m.err, m.stderr())
	case <-time.After(30 * time.Second):
		t.Fatalf("logfs mount not ready after 30 s; stderr: %s", m.stderr())
	}
	return m
}

// wait waits for the mount process to end and returns its exit status.
func (m *mountProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("logfs mount still running; stderr: %s", m.stderr())
	}
	var ee *exec.ExitError
	if errors.As(m.err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, m.err)
	return 0
}

// mounted reports whether mp is a mount point.
func mounted(mp string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mp {
			return true
		}
	}
	return false
}

func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(line)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestMountSIGTERM mounts, uses the mount, and stops it with SIGTERM: the
// command unmounts, closes the log cleanly and exits 0.
func TestMountSIGTERM(t *testing.T) {
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt") // created by the command
	m := startMount(t, dir, mp, "-o", "segment.bytes=1048576")
	require.Contains(t, m.stderr(), "ready: ./logfs-data mounted at "+mp+" (read-write)")
	require.True(t, mounted(mp))

	require.NoError(t, os.Mkdir(filepath.Join(mp, "orders"), 0o755))
	appendLine(t, filepath.Join(mp, "orders", "0", "append"), "hello\n")
	appendLine(t, filepath.Join(mp, "orders", "0", "append"), "world\n")
	b, err := os.ReadFile(filepath.Join(mp, "orders", "0", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, "hello\nworld\n", string(b))
	// consume reads beside the running mount.
	require.Equal(t, "world\n", ok(t, dir, "", "consume", "--offset", "1", "orders", "0"))

	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.Contains(t, m.stderr(), "unmounted "+mp)
	require.False(t, mounted(mp))
	require.FileExists(t, filepath.Join(dir, "logfs-data", ".kafka_cleanshutdown"))
	require.Equal(t, "hello\nworld\n", ok(t, dir, "", "consume", "--offset", "earliest", "orders", "0"))
	require.Contains(t, ok(t, dir, "", "check"), ": OK")
}

// TestMountExternalUmount checks that `umount MOUNTPOINT` from outside ends
// the command cleanly.
func TestMountExternalUmount(t *testing.T) {
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o755))
	m := startMount(t, dir, mp, "--data", "data")
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	appendLine(t, filepath.Join(mp, "t", "0", "append"), "x\n")

	require.NoError(t, fusetest.Unmount(mp, false))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.FileExists(t, filepath.Join(dir, "data", ".kafka_cleanshutdown"))
	require.Equal(t, "x\n", ok(t, dir, "", "consume", "--data", "data", "--offset", "0", "t", "0"))
}

// TestMountReadOnly serves an existing data directory read-only: reads
// work, appends fail, and nothing in the directory changes.
func TestMountReadOnly(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "orders")
	ok(t, dir, "a\nb\n", "produce", "orders")
	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp, "--read-only")
	require.Contains(t, m.stderr(), "(read-only)")
	b, err := os.ReadFile(filepath.Join(mp, "orders", "0", "offset", "earliest"))
	require.NoError(t, err)
	require.Equal(t, "a\nb\n", string(b))
	f, err := os.OpenFile(filepath.Join(mp, "orders", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		_, err = f.WriteString("c\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	require.ErrorIs(t, err, syscall.EROFS)
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.Equal(t, "a\nb\n", ok(t, dir, "", "consume", "--offset", "0", "orders", "0"))
}

func TestMountErrors(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	require.NoError(t, os.MkdirAll(filepath.Join(full, "something"), 0o755))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for name, tc := range map[string]struct {
		code int
		want string
		args []string
	}{
		"missing mountpoint": {exitUsage, "missing MOUNTPOINT", []string{"mount"}},
		"two mountpoints":    {exitUsage, `unexpected argument "b"`, []string{"mount", "a", "b"}},
		"unknown flag":       {exitUsage, "unknown flag: --foreground", []string{"mount", "--foreground", "mnt"}},
		"bad -o":             {exitUsage, `-o cleanup.policy=compact`, []string{"mount", "-o", "cleanup.policy=compact", "mnt"}},
		"bad -o value":       {exitUsage, "-o segment.bytes=1", []string{"mount", "-o", "ro,segment.bytes=1", "mnt"}},
		"read-only no data":  {exitFailure, "data directory nowhere does not exist", []string{"mount", "--read-only", "--data", "nowhere", "mnt"}},
	} {
		t.Run(name, func(t *testing.T) {
			fails(t, dir, tc.code, tc.want, tc.args...)
		})
	}
	t.Run("mountpoint", func(t *testing.T) {
		fusetest.Require(t)
		fails(t, dir, exitFailure, "is not empty", "mount", full)
		fails(t, dir, exitFailure, "is not a directory", "mount", file)
		// Already mounted: a second mount on the same directory.
		mp := filepath.Join(dir, "mnt")
		startMount(t, dir, mp, "--data", "one")
		fails(t, dir, exitFailure, "is already a mount point", "mount", "--data", "two", mp)
		// Refused before the data directory was made.
		require.NoDirExists(t, filepath.Join(dir, "two"))
	})
}

// TestReadOnlyBesideAMountSaysNothingWrong: README says mount --read-only
// works beside a running mount. The running mount's data directory has no
// clean-shutdown marker (it is open), and the read-only mount told a
// newcomer "data directory was not shut down cleanly; recovering", which
// reads as damage and as a change; it says what the missing marker may mean
// and that it changes nothing.
func TestReadOnlyBesideAMountSaysNothingWrong(t *testing.T) {
	dir := t.TempDir()
	rw := startMount(t, dir, filepath.Join(dir, "mnt"))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "mnt", "t"), 0o755))
	appendLine(t, filepath.Join(dir, "mnt", "t", "0", "append"), "x\n")
	ro := startMount(t, dir, filepath.Join(dir, "ro"), "--read-only")
	b, err := os.ReadFile(filepath.Join(dir, "ro", "t", "0", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, "x\n", string(b))
	require.NotContains(t, ro.stderr(), "not shut down cleanly; recovering")
	require.Contains(t, ro.stderr(), "no clean-shutdown marker (a writer has it open, or it was not shut down cleanly)")
	require.Contains(t, ro.stderr(), "changing nothing")
	require.NoError(t, ro.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, ro.wait(t), ro.stderr())
	require.NoError(t, rw.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, rw.wait(t), rw.stderr())
}
