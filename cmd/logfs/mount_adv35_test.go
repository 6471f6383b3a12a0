package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
)

// startPipedMount runs `logfs mount ARGS… MOUNTPOINT` in dir with stderr
// a pipe of the test's, and returns once the ready line came through it,
// with the pipe's read end: what `logfs mount … 2>&1 | tee mount.log`
// gives the mount. The process and its mount are taken down when the test
// ends, whatever happens.
func startPipedMount(t *testing.T, dir, mountpoint string, args ...string) (*exec.Cmd, *os.File, *exited) {
	t.Helper()
	fusetest.Require(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(logfsBin, append(append([]string{"mount"}, args...), mountpoint)...)
	cmd.Dir = dir
	cmd.Stderr = w
	require.NoError(t, cmd.Start())
	w.Close()
	done := &exited{ch: make(chan struct{})}
	go func() {
		done.err = cmd.Wait()
		close(done.ch)
	}()
	t.Cleanup(func() {
		r.Close()
		cmd.Process.Kill()
		<-done.ch
		if mounted(mountpoint) {
			fusetest.Unmount(mountpoint, true)
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ready:") {
				lines <- sc.Text()
				return
			}
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		require.True(t, ok, "logfs mount ended before it was ready")
		require.Contains(t, l, "ready:")
	case <-time.After(30 * time.Second):
		t.Fatal("logfs mount not ready after 30 s")
	}
	return cmd, r, done
}

// exited is closed once a process has ended, and then holds how.
type exited struct {
	ch  chan struct{}
	err error
}

// wait waits up to 30 s for the process to end and returns how it ended.
func (e *exited) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-e.ch:
		return e.err
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not end within 30 s")
		return nil
	}
}

// TestMountStopsCleanlyAfterItsStderrCloses: `logfs mount ./mnt 2>&1 | tee
// log` and Ctrl-C, which ends tee as well: the mount's stderr is then a
// pipe nobody reads. The mount must still unmount and close the log
// cleanly, not die of SIGPIPE on its "unmounting" line, which would leave
// a stale mount and a data directory to recover.
func TestMountStopsCleanlyAfterItsStderrCloses(t *testing.T) {
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt")
	cmd, r, done := startPipedMount(t, dir, mp, "--data", "data")
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	appendLine(t, filepath.Join(mp, "t", "0", "append"), "kept\n")

	require.NoError(t, r.Close()) // tee is gone
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, done.wait(t), "the mount ends with status 0, not killed by SIGPIPE")
	require.False(t, mounted(mp), "no stale mount left")
	require.FileExists(t, filepath.Join(dir, "data", ".kafka_cleanshutdown"))
	require.Equal(t, "kept\n", ok(t, dir, "", "consume", "--data", "data", "--offset", "0", "t", "0"))
}

// TestMountReadOnlyIsNeverLost: -o rw beside --read-only or -o ro (a unit's
// ExecStart with --read-only and fstab habits "-o defaults,rw,noatime")
// must not make a read-only mount writable, as the last word used to.
// Either says what the mount is, so both together are refused in one line,
// before anything is created. (The mount point is a file, so that a mount
// that takes the words fails there instead of staying up.)
func TestMountReadOnlyIsNeverLost(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--data", "data", "t")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	before := snapshot(t, filepath.Join(dir, "data"))
	for name, args := range map[string][]string{
		"flag then rw":    {"--read-only", "-o", "defaults,rw,noatime"},
		"rw then flag":    {"-o", "rw", "--read-only"},
		"ro,rw":           {"-o", "ro,rw"},
		"rw,ro":           {"-o", "rw,ro"},
		"two -o":          {"-o", "ro", "-o", "rw"},
		"flag, ro and rw": {"--read-only", "-o", "ro", "-o", "rw"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append(append([]string{"mount", "--data", "data"}, args...), "file")
			fails(t, dir, exitUsage, "-o rw contradicts", args...)
		})
	}
	require.Equal(t, before, snapshot(t, filepath.Join(dir, "data")))
}

// runBounded runs logfs ARGS… in dir like logfs(), but for at most 30 s
// (a refusal comes at once, but a loaded machine may take seconds to
// start the process):
// a mount that should have been refused and stays up instead is stopped
// with SIGTERM (status -1), and mounts is unmounted when the test ends.
func runBounded(t *testing.T, dir string, mounts []string, args ...string) result {
	t.Helper()
	t.Cleanup(func() {
		for _, mp := range mounts {
			if mounted(mp) {
				fusetest.Unmount(mp, true)
			}
		}
	})
	cmd := exec.Command(logfsBin, args...)
	cmd.Dir = dir
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return result{out.String(), errOut.String(), exitCode(t, err)}
	case <-time.After(30 * time.Second):
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		return result{out.String(), errOut.String(), -1}
	}
}

// TestMountPointAndDataApart: a mount point that is the data directory,
// lies inside it or holds it is refused in one line before anything is
// created or opened. It used to mount inside its own data directory
// (where every walk of the directory then went through the mount), or to
// create the data directory, lock and all, in the mount point and only
// then find the mount point not empty, so that every later try failed.
func TestMountPointAndDataApart(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--data", "old", "t")
	require.NoError(t, os.Symlink("old", filepath.Join(dir, "link")))
	before := snapshot(t, filepath.Join(dir, "old"))
	for name, tc := range map[string]struct{ data, mp, want string }{
		"same, new":           {"new", "new", "is the data directory"},
		"mount point in new":  {"new", "new/mnt", "is inside the data directory"},
		"new in mount point":  {"mnt/new", "mnt", "is inside the mount point"},
		"mount point in old":  {"old", "old/mnt", "is inside the data directory"},
		"through a link":      {"link", "old/mnt", "is inside the data directory"},
		"mount point by link": {"old", "link/mnt", "is inside the data directory"},
		"same, old":           {"old", "link", "is the data directory"},
	} {
		t.Run(name, func(t *testing.T) {
			mp := filepath.Join(dir, tc.mp)
			r := runBounded(t, dir, []string{mp, filepath.Join(dir, "old", "mnt")}, "mount", "--data", tc.data, tc.mp)
			requireOneLineError(t, r, exitFailure, tc.want)
			require.NoDirExists(t, filepath.Join(dir, "new"))
			require.NoDirExists(t, filepath.Join(dir, "mnt"))
			require.Equal(t, before, snapshot(t, filepath.Join(dir, "old")))
		})
	}
}

// TestMountTwiceThroughALink: a second mount on a mount point named by a
// symbolic link is refused as already mounted, as it is by its own name.
// It used to be mounted on top, hiding the first mount and its topics.
func TestMountTwiceThroughALink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	require.NoError(t, os.Mkdir(real, 0o755))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink("real", link))
	startMount(t, dir, link, "--data", "one")
	require.True(t, mounted(real))
	for _, mp := range []string{link, real} {
		r := runBounded(t, dir, []string{real}, "mount", "--data", "two", mp)
		requireOneLineError(t, r, exitFailure, "is already a mount point")
		require.NoDirExists(t, filepath.Join(dir, "two"))
	}
}

// TestMountStopUnmountsItsOwnMount moves a mount point away while it is
// mounted (its parent folder renamed) and mounts another data directory
// where it was. SIGTERM to the first mount must unmount the first mount,
// where it is now, and leave the second alone. It used to unmount by the
// old path: the second mount went, and the first kept serving, waiting
// for an unmount that never came.
func TestMountStopUnmountsItsOwnMount(t *testing.T) {
	dir := t.TempDir()
	oldMP, newMP := filepath.Join(dir, "p", "mnt"), filepath.Join(dir, "q", "mnt")
	require.NoError(t, os.MkdirAll(oldMP, 0o755))
	first := startMount(t, dir, oldMP, "--data", "one")
	require.NoError(t, os.Rename(filepath.Join(dir, "p"), filepath.Join(dir, "q")))
	t.Cleanup(func() {
		if mounted(newMP) {
			fusetest.Unmount(newMP, true)
		}
	})
	require.True(t, mounted(newMP))
	require.NoError(t, os.MkdirAll(oldMP, 0o755))
	second := startMount(t, dir, oldMP, "--data", "two")

	require.NoError(t, first.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, first.wait(t), first.stderr())
	require.False(t, mounted(newMP), "the first mount is gone from where it was moved to")
	require.FileExists(t, filepath.Join(dir, "one", ".kafka_cleanshutdown"))
	require.True(t, mounted(oldMP), "the second mount is still there")
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(oldMP, &st), "and answers")
	require.NoFileExists(t, filepath.Join(dir, "two", ".kafka_cleanshutdown"))
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, second.wait(t), second.stderr())
}

// TestMountStopAfterLazyUmount: after `umount -l` while a file of the
// mount is open, SIGTERM finds nothing to unmount. The mount says so and
// ends once the file is closed, cleanly, with what was appended through
// the open file after the detach.
func TestMountStopAfterLazyUmount(t *testing.T) {
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp, "--data", "data")
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	f, err := os.OpenFile(filepath.Join(mp, "t", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString("before\n")
	require.NoError(t, err)
	require.NoError(t, fusetest.Unmount(mp, true))
	require.False(t, mounted(mp))
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	_, err = f.WriteString("after\nand a last line")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(m.stderr(), "unmounted lazily") }, 30*time.Second, 20*time.Millisecond, "no word that umount -l came first")
	select {
	case <-m.done:
		t.Fatal("the mount ended while a file of it was still open")
	default:
	}
	require.NoError(t, f.Close())
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.FileExists(t, filepath.Join(dir, "data", ".kafka_cleanshutdown"))
	require.Equal(t, "before\nafter\nand a last line\n", ok(t, dir, "", "consume", "--data", "data", "--offset", "0", "t", "0"))
}

// TestSecondMountNamesTheHolder: a second `logfs mount` (or any writer) of
// a data directory a mount holds is refused naming the process that holds
// it, its pid and command line, which tells where it is mounted: a mount
// started by the helper or by systemd runs where nobody sees it. It used
// to say only "another logfs process (a running mount?)".
func TestSecondMountNamesTheHolder(t *testing.T) {
	dir := t.TempDir()
	m := startMount(t, dir, filepath.Join(dir, "mnt"), "--data", "data")
	want := fmt.Sprintf("held by pid %d: %s mount --data data %s", m.cmd.Process.Pid, logfsBin, filepath.Join(dir, "mnt"))
	r := runBounded(t, dir, []string{filepath.Join(dir, "mnt2")}, "mount", "--data", "data", "mnt2")
	requireOneLineError(t, r, exitFailure, want)
	require.Contains(t, r.stderr, "is in use: another logfs process")
	require.NoDirExists(t, filepath.Join(dir, "mnt2"))
	fails(t, dir, exitFailure, want, "topic", "create", "--data", "data", "other")
}

// TestMountStopTakesItsBindMounts: with a bind mount of the mount
// elsewhere (mount --bind), SIGTERM unmounts both, so the mount ends and
// closes the log, and no bind mount is left to a server that is gone
// (ENOTCONN). Unmounting only the first, the mount used to wait forever
// for an end that the bind mount held off.
func TestMountStopTakesItsBindMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mount --bind needs root")
	}
	dir := t.TempDir()
	mp, bind := filepath.Join(dir, "mnt"), filepath.Join(dir, "bind")
	require.NoError(t, os.Mkdir(bind, 0o755))
	m := startMount(t, dir, mp, "--data", "data")
	require.NoError(t, syscall.Mount(mp, bind, "", syscall.MS_BIND, ""))
	t.Cleanup(func() {
		if mounted(bind) {
			fusetest.Unmount(bind, true)
		}
	})
	require.NoError(t, os.Mkdir(filepath.Join(bind, "t"), 0o755))
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.False(t, mounted(mp))
	require.False(t, mounted(bind))
	require.FileExists(t, filepath.Join(dir, "data", ".kafka_cleanshutdown"))
}

// TestMountAbortedByForcedUmount: `umount -f` of a busy mount aborts the
// connection but leaves the mount attached (EBUSY), dead: ENOTCONN to
// everyone. The mount closes the log cleanly and says the mount point is
// left to unmount, instead of "unmounted", which it is not.
func TestMountAbortedByForcedUmount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("umount -f needs root")
	}
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp, "--data", "data")
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	f, err := os.OpenFile(filepath.Join(mp, "t", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	require.ErrorIs(t, syscall.Unmount(mp, syscall.MNT_FORCE), syscall.EBUSY)
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.True(t, mounted(mp))
	require.NotContains(t, m.stderr(), "unmounted "+mp)
	require.Contains(t, m.stderr(), "still attached at "+mp+": umount it")
	require.FileExists(t, filepath.Join(dir, "data", ".kafka_cleanshutdown"))
	f.Close()
	require.NoError(t, fusetest.Unmount(mp, false))
}
