package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
)

// TestHelperArgForms: the argument orders and forms a mount helper gets,
// from mount(8) (libmount's exec_helper: SOURCE TARGET [-s] [-f] [-n] [-v]
// [-o OPTS] [-t TYPE]), from systemd through mount(8), and from a person
// who types them in another order, become the same `logfs mount`.
func TestHelperArgForms(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		require.NoError(t, err)
		return a
	}
	for name, tc := range map[string]struct {
		args []string
		want []string
		fake bool
	}{
		"mount(8)":      {[]string{"/d", "/m", "-n", "-v", "-o", "rw,noatime", "-t", "fuse.logfs"}, []string{"mount", "--data", "/d", "-o", "rw,noatime", "/m"}, false},
		"sloppy":        {[]string{"/d", "/m", "-s", "-o", "rw"}, []string{"mount", "--data", "/d", "-o", "rw", "/m"}, false},
		"-o first":      {[]string{"-o", "ro", "/d", "/m"}, []string{"mount", "--data", "/d", "-o", "ro", "/m"}, false},
		"-oOPTS":        {[]string{"/d", "-oro", "/m"}, []string{"mount", "--data", "/d", "-o", "ro", "/m"}, false},
		"two -o":        {[]string{"/d", "/m", "-o", "ro", "-o", "retention.ms=1"}, []string{"mount", "--data", "/d", "-o", "ro", "-o", "retention.ms=1", "/m"}, false},
		"flags joined":  {[]string{"-nv", "/d", "/m"}, []string{"mount", "--data", "/d", "/m"}, false},
		"fake":          {[]string{"/d", "/m", "-f"}, []string{"mount", "--data", "/d", "/m"}, true},
		"spaces, comma": {[]string{"/a b,c/d", "/m n,o"}, []string{"mount", "--data", "/a b,c/d", "/m n,o"}, false},
		"relative":      {[]string{"d", "m"}, []string{"mount", "--data", abs("d"), abs("m")}, false},
		"type#source":   {[]string{"logfs#/d", "/m"}, []string{"mount", "--data", "/d", "/m"}, false},
		"canonicalized": {[]string{"/root/logfs#/d", "/m"}, []string{"mount", "--data", "/d", "/m"}, false},
		"type#relative": {[]string{"/root/logfs#d", "/m"}, []string{"mount", "--data", abs("d"), "/m"}, false},
		"# in a name":   {[]string{"/a/xlogfs#/d", "/m"}, []string{"mount", "--data", "/a/xlogfs#/d", "/m"}, false},
		"dash names":    {[]string{"/d", "/m", "-o", "-x"}, []string{"mount", "--data", "/d", "-o", "-x", "/m"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, fake, err := helperArgs(tc.args)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.fake, fake)
		})
	}
	for name, args := range map[string][]string{
		"one argument":   {"/d"},
		"three":          {"/d", "/m", "/x"},
		"-o with none":   {"/d", "/m", "-o"},
		"unknown flag":   {"/d", "/m", "-x"},
		"namespace":      {"/d", "/m", "-N", "/proc/1/ns/mnt"},
		"empty source":   {"", "/m"},
		"logfs# nothing": {"logfs#", "/m"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := helperArgs(args)
			require.Error(t, err)
		})
	}
}

// mountProcessOf finds the background `logfs mount` a helper left serving
// data: its pid.
func mountProcessOf(t *testing.T, data string) int {
	t.Helper()
	want := "logfs\x00mount\x00--data\x00" + data + "\x00"
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.HasPrefix(string(b), want) {
			return pid
		}
	}
	t.Fatalf("no logfs mount of %s running", data)
	return 0
}

// helperMounted registers the unmount of mp for the end of the test, and
// waits there for the background mount to have closed data cleanly.
func helperMounted(t *testing.T, mp, data string) {
	t.Helper()
	t.Cleanup(func() {
		if mounted(mp) {
			fusetest.Unmount(mp, true)
		}
	})
	require.True(t, mounted(mp), "mounted by the time the helper returns")
}

// TestHelperLeavesTheCallersFolder: the background mount a helper starts
// runs in /, as daemons do, with DATA and MOUNTPOINT made absolute first.
// It used to keep the working directory of whoever ran mount(8), so that
// the file system that folder is on could not be unmounted ("target is
// busy") for as long as the logfs mount lived.
func TestHelperLeavesTheCallersFolder(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	helper := helperBin(t, "mount.fuse.logfs")
	caller := filepath.Join(dir, "caller")
	require.NoError(t, os.MkdirAll(filepath.Join(caller, "mnt"), 0o755))
	cmd := exec.Command(helper, "data", "mnt", "-o", "rw")
	cmd.Dir = caller
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	mp, data := filepath.Join(caller, "mnt"), filepath.Join(caller, "data")
	helperMounted(t, mp, data)
	pid := mountProcessOf(t, data)
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	require.NoError(t, err)
	require.Equal(t, "/", cwd)
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	appendLine(t, filepath.Join(mp, "t", "0", "append"), "x\n")
	require.NoError(t, fusetest.Unmount(mp, false))
	waitFile(t, filepath.Join(data, ".kafka_cleanshutdown"))
	require.Equal(t, "x\n", ok(t, dir, "", "consume", "--data", data, "--offset", "0", "t", "0"))
}

// TestHelperTypeHashSource: a source written as mount.fuse3 takes one,
// "logfs#/path", names the data directory /path, also as mount(8) passes
// it on: taken for a relative path and made absolute, "$PWD/logfs#/path".
// It used to be taken as a path, creating a folder "logfs#" in the
// caller's directory.
func TestHelperTypeHashSource(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	helper := helperBin(t, "mount.fuse.logfs")
	data, mp := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o755))
	for _, source := range []string{"logfs#" + data, filepath.Join(dir, "logfs#"+data)} {
		cmd := exec.Command(helper, source, mp)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		helperMounted(t, mp, data)
		require.NoError(t, fusetest.Unmount(mp, false))
		waitFile(t, filepath.Join(data, ".kafka_cleanshutdown"))
		require.NoError(t, os.Remove(filepath.Join(data, ".kafka_cleanshutdown")))
		require.NoDirExists(t, filepath.Join(dir, "logfs#"))
	}
}

// TestHelperFakeChecksOptions: `mount -f` (-f: do everything but the
// mount) checks the options as a real mount would, and mounts nothing. It
// used to return 0 whatever they were, so `mount -fv` said an fstab line
// with a mistyped option was fine.
func TestHelperFakeChecksOptions(t *testing.T) {
	dir := t.TempDir()
	helper := helperBin(t, "mount.fuse.logfs")
	data, mp := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o755))
	r := runHelper(t, helper, data, mp, "-f", "-o", "rw,retention.ms=86400000,nofail")
	require.Equal(t, 0, r.code, r.stderr)
	r = runHelper(t, helper, data, mp, "-f", "-o", "rw,retenton.ms=86400000")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	require.Contains(t, r.stderr, "-o retenton.ms=86400000")
	r = runHelper(t, helper, data, mp, "-f", "-o", "ro,rw")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.False(t, mounted(mp))
	require.NoDirExists(t, data)
}

// TestHelperPassesOnWhatTheMountSaid: what the mount says before it is
// ready (a warning about its options, the report of a recovery after a
// crash) reaches mount(8)'s caller when the mount succeeds, as it does when
// it fails. It used to be read and dropped: shown nowhere, not even in the
// journal, as the mount writes there only once it is ready.
func TestHelperPassesOnWhatTheMountSaid(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	helper := helperBin(t, "mount.fuse.logfs")
	data, mp := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	// A data directory to recover: a mount killed after an append.
	m := startMount(t, dir, mp, "--data", data)
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	appendLine(t, filepath.Join(mp, "t", "0", "append"), "x\n")
	require.NoError(t, m.cmd.Process.Kill())
	<-m.done
	require.NoError(t, fusetest.Unmount(mp, true))

	r := runHelper(t, helper, data, mp, "-o", "rw,umask=022")
	require.Equal(t, 0, r.code, r.stderr)
	helperMounted(t, mp, data)
	require.Contains(t, r.stderr, "-o umask= shares nothing without --allow-other")
	require.Contains(t, r.stderr, "not shut down cleanly; recovering")
	require.NotContains(t, r.stderr, "ready:", "the ready line is the mount's own, for its foreground use")
	require.NoError(t, fusetest.Unmount(mp, false))
	waitFile(t, filepath.Join(data, ".kafka_cleanshutdown"))
}

// TestHelperReportsTheMountsFailure (holds): a mount that fails reaches the
// helper's caller as the mount's one line and status, and leaves nothing
// mounted or created.
func TestHelperReportsTheMountsFailure(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	helper := helperBin(t, "mount.fuse.logfs")
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	full := filepath.Join(dir, "full")
	require.NoError(t, os.MkdirAll(filepath.Join(full, "x"), 0o755))
	mp := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o755))
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"data is a file":     {[]string{file, mp}, exitFailure, "not a directory"},
		"not empty":          {[]string{filepath.Join(dir, "d1"), full}, exitFailure, "is not empty"},
		"read-only, no data": {[]string{filepath.Join(dir, "d2"), mp, "-o", "ro"}, exitFailure, "does not exist"},
		"bad value":          {[]string{filepath.Join(dir, "d3"), mp, "-o", "retention.ms=soon"}, exitUsage, "-o retention.ms=soon"},
	} {
		t.Run(name, func(t *testing.T) {
			r := runHelper(t, helper, tc.args...)
			require.Equal(t, tc.code, r.code, r.stderr)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			require.Contains(t, r.stderr, tc.want)
			require.False(t, mounted(mp))
			require.False(t, mounted(full))
		})
	}
	for _, d := range []string{"d1", "d2", "d3"} {
		require.NoDirExists(t, filepath.Join(dir, d))
	}
}

// TestHelperReadyMeansAnswering (holds): the helper returns only once the
// mount answers: statfs reaches the server at once.
func TestHelperReadyMeansAnswering(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	helper := helperBin(t, "mount.fuse.logfs")
	data, mp := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o755))
	r := runHelper(t, helper, data, mp)
	require.Equal(t, 0, r.code, r.stderr)
	helperMounted(t, mp, data)
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(mp, &st))
	require.EqualValues(t, fuseSuperMagic, st.Type)
	require.NoError(t, fusetest.Unmount(mp, false))
	waitFile(t, filepath.Join(data, ".kafka_cleanshutdown"))
}

// TestHelperMountIsNoService: a NOTIFY_SOCKET in mount(8)'s environment
// (mount run from the ExecStart of some Type=notify service) is that
// service's, not the background mount's: the mount must not send it
// READY=1, nor STOPPING=1 when it is unmounted, which with
// NotifyAccess=all tell systemd the service itself is ready or stopping.
func TestHelperMountIsNoService(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	require.NoError(t, err)
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	helper := helperBin(t, "mount.fuse.logfs")
	data, mp := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o755))
	r := runHelper(t, helper, data, mp)
	require.Equal(t, 0, r.code, r.stderr)
	helperMounted(t, mp, data)
	require.NoError(t, fusetest.Unmount(mp, false))
	waitFile(t, filepath.Join(data, ".kafka_cleanshutdown"))
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	b := make([]byte, 4096)
	n, err := conn.Read(b)
	require.Error(t, err, "the service's socket got %q", b[:n])
}
