package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/internal/fuseenv"
	"github.com/logfs/logfs/internal/fusetest"
)

// The tests in this file run logfs as user 65534 (nobody), as a newcomer
// without root would: it mounts through fusermount3, and unmounts with
// fusermount3 -u or umount, both set-uid helpers that check what the user
// may do.
//
// A user other than root also needs a /dev/fuse they may open. Debian's
// udev makes it 0666; a container often leaves it 0600, as on the machine
// these tests were written on. So that the tests neither depend on that
// nor change the machine's /dev/fuse (other tests need it closed to
// others: TestMountRefusesWithoutFUSE), each test runs its commands in a
// mount namespace of its own in which a node of the same device, mode
// 0666, is bound over /dev/fuse. The mounts made there are seen only
// there: the test reads them from the namespace holder's mountinfo, and
// they all end with the namespace, whatever happens to the test.

// nobodyID is the user (and group) the tests run logfs as.
const nobodyID = 65534

// nonroot is a mount namespace and a place in it for user nobody: a home
// of theirs, and the logfs binary in a folder everyone may enter.
type nonroot struct {
	dir    string // 0755, removed when the test ends
	bin    string // logfs, which nobody may run
	home   string // nobody's own folder for data directories and mount points
	holder *exec.Cmd
	tools  map[string]string // where nsenter, setpriv and sh are
}

// nonrootOptions change the namespace.
type nonrootOptions struct {
	// fusermount, if set, changes fusermount3 in the namespace: "none"
	// hides it (and fusermount), as on a machine without Debian's fuse3
	// package; "copy" covers it with a copy that is not set-uid, and
	// "nosuid" with itself on a nosuid mount, as a container image or a
	// file system mounted nosuid may leave it.
	fusermount string
	// fstab covers /etc/fstab in the namespace with an empty file the
	// test fills (setFstab), and /sbin with a folder that holds only the
	// logfs binary, as the mount helper mount.fuse.logfs.
	fstab bool
	// fuseConf, if set, is what fusermount3 and logfs read as
	// /etc/fuse.conf in the namespace (the machine's is not changed).
	fuseConf string
}

// newNonroot makes the namespace, or skips t saying why it cannot: the
// test must run as root (to be another user, and to set up the
// namespace), with setpriv, unshare and nsenter (util-linux). Without
// fusermount3 it skips, or fails under LOGFS_REQUIRE_FUSE=1, as CI runs.
func newNonroot(t *testing.T, o nonrootOptions) *nonroot {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runs logfs as user 65534 with setpriv and a namespace of its own, which needs root")
	}
	tools := map[string]string{}
	for _, tool := range []string{"setpriv", "unshare", "nsenter", "mount", "mknod", "umount", "sh", "awk"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s (util-linux, coreutils): cannot run logfs as another user", tool)
		}
		tools[tool] = p
	}
	fusetest.Require(t)
	if fuseenv.Fusermount() == "" {
		fusetest.Unusable(t, "no fusermount3, which every user but root mounts with (Debian: apt-get install fuse3)")
	}
	st, err := os.Stat(fuseenv.Device)
	require.NoError(t, err)
	rdev := st.Sys().(*syscall.Stat_t).Rdev

	dir, bin := sharedBin(t, "logfs-nonroot-")
	n := &nonroot{dir: dir, bin: bin, home: filepath.Join(dir, "home"), tools: tools}
	require.NoError(t, os.Mkdir(n.home, 0))
	require.NoError(t, os.Chmod(n.home, 0o755)) // not the umask's: others go through it
	require.NoError(t, os.Chown(n.home, nobodyID, nobodyID))
	devDir := filepath.Join(dir, "dev")
	require.NoError(t, os.Mkdir(devDir, 0o755))

	// The namespace lives as long as its holder, a cat reading a pipe
	// from this process: it ends when the test closes the pipe, or when
	// the test binary dies.
	script := `set -e
umask 022 # what it makes is as on a machine set up as usual
# The namespace starts with a copy of every mount outside, FUSE mounts of
# other tests (other packages' run beside) among them. A copy holds its
# mount's connection open: that test's server would go on serving after
# its unmount, until this namespace ends. So they are let go at once.
awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i+1) ~ /^fuse/) print $5; break } }' /proc/self/mountinfo |
while read -r p; do umount --lazy "$(printf '%b' "$p")" 2>/dev/null || true; done
mount -t tmpfs -o mode=0755,size=64k logfs-test-dev "$1"
mknod -m 0666 "$1/fuse" c "$2" "$3"
mount --bind "$1/fuse" /dev/fuse
`
	switch o.fusermount {
	case "":
	case "none":
		script += `: > "$1/none"
for f in fusermount3 fusermount; do
	for d in /usr/bin /bin /usr/sbin /sbin /usr/local/bin; do
		if [ -e "$d/$f" ]; then mount --bind "$1/none" "$(readlink -f "$d/$f")"; fi
	done
done
`
	case "copy":
		script += `f=$(readlink -f "$6")
cp "$f" "$1/fusermount3"
chmod 0755 "$1/fusermount3"
mount --bind "$1/fusermount3" "$f"
`
	case "nosuid":
		script += `f=$(readlink -f "$6")
mount --bind "$f" "$f"
mount -o remount,bind,nosuid "$f"
`
	default:
		t.Fatalf("fusermount: %q", o.fusermount)
	}
	if o.fuseConf != "" {
		if _, err := os.Stat(fuseenv.ConfFile); err != nil {
			t.Skipf("no %s to cover in the namespace", fuseenv.ConfFile)
		}
		script += `printf %s "$4" > "$1/fuse.conf"
mount --bind "$1/fuse.conf" "$5"
`
	}
	if o.fstab {
		script += `mkdir "$1/sbin"
ln -s "$7" "$1/sbin/mount.fuse.logfs"
mount --bind "$1/sbin" "$(readlink -f /sbin)"
: > "$1/fstab"
mount --bind "$1/fstab" /etc/fstab
`
	}
	script += "echo ready\nexec cat\n"
	n.holder = exec.Command(tools["unshare"], "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh",
		devDir, strconv.FormatUint(uint64(unix.Major(rdev)), 10), strconv.FormatUint(uint64(unix.Minor(rdev)), 10),
		o.fuseConf, fuseenv.ConfFile, fuseenv.Fusermount(), bin)
	stdin, err := n.holder.StdinPipe()
	require.NoError(t, err)
	stdout, err := n.holder.StdoutPipe()
	require.NoError(t, err)
	var errOut bytes.Buffer
	n.holder.Stderr = &errOut
	require.NoError(t, n.holder.Start())
	held := make(chan error, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if line != "ready\n" {
			held <- fmt.Errorf("%q", line)
		}
		close(held)
		io.Copy(io.Discard, stdout)
	}()
	exited := make(chan struct{})
	go func() {
		n.holder.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			n.holder.Process.Kill()
			<-exited
		}
	})
	select {
	case err := <-held:
		if err != nil {
			<-exited
			fusetest.Unusable(t, fmt.Sprintf("a mount namespace with a /dev/fuse for user %d could not be made: %s", nobodyID, strings.TrimSpace(errOut.String())))
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the namespace holder did not start in 30 s: %s", errOut.String())
	}
	return n
}

// command returns name with args run as nobody, in the namespace, in
// folder wd, with a plain environment whose PATH is path.
func (n *nonroot) command(wd, path, name string, args ...string) *exec.Cmd {
	return n.commandAs(nobodyID, wd, path, name, args...)
}

// commandAs is command run as user (and group) id instead.
func (n *nonroot) commandAs(id int, wd, path, name string, args ...string) *exec.Cmd {
	// nsenter, setpriv and sh exec, so the command's pid is name's own.
	// (Not nsenter --wd: it opens the folder before it enters the
	// namespace, where the mounts made in the namespace are not.) The
	// umask is a newcomer's, not whatever the test runs with.
	cmd := exec.Command(n.tools["nsenter"], append([]string{"--target", strconv.Itoa(n.holder.Process.Pid), "--mount", "--",
		n.tools["setpriv"], "--reuid=" + strconv.Itoa(id), "--regid=" + strconv.Itoa(id), "--clear-groups", "--",
		n.tools["sh"], "-c", `umask 022 && cd "$0" && exec "$@"`, wd, name}, args...)...)
	cmd.Env = []string{"PATH=" + path, "LC_ALL=C", "HOME=" + n.home, "LOGFS_PROGRESS_INTERVAL=1h"}
	return cmd
}

// userPath is the PATH the user's commands get.
const userPath = "/usr/local/bin:/usr/bin:/bin"

// sh runs a shell script as nobody in the namespace, from their home, and
// returns what it printed (stdout and stderr) and its exit status.
func (n *nonroot) sh(t *testing.T, script string) (string, int) {
	t.Helper()
	out, err := n.command(n.home, userPath, "sh", "-c", script).CombinedOutput()
	return string(out), exitCode(t, err)
}

// shOK runs a script that must succeed.
func (n *nonroot) shOK(t *testing.T, script string) string {
	t.Helper()
	out, code := n.sh(t, script)
	require.Equal(t, 0, code, "as user %d: %s: %s", nobodyID, script, out)
	return out
}

// logfs runs logfs as nobody, from their home, and waits for it.
func (n *nonroot) logfs(t *testing.T, args ...string) result {
	t.Helper()
	cmd := n.command(n.home, userPath, n.bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return result{out.String(), errOut.String(), exitCode(t, err)}
	case <-time.After(time.Minute):
		// A refusal that mounts after all serves until stopped.
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		t.Fatalf("logfs %s as user %d still running after a minute; stderr: %s", strings.Join(args, " "), nobodyID, errOut.String())
		return result{}
	}
}

// mounted reports whether something is mounted at mp in the namespace.
func (n *nonroot) mounted(t *testing.T, mp string) bool {
	t.Helper()
	return n.mountinfo(t, mp) != ""
}

// mountinfo is the line of the namespace's mountinfo for mp (named by the
// folder it leads to, as mountinfo names it), or "".
func (n *nonroot) mountinfo(t *testing.T, mp string) string {
	t.Helper()
	if real, err := filepath.EvalSymlinks(mp); err == nil { // as seen outside: no mounts in the way
		mp = real
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", n.holder.Process.Pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mp {
			return line
		}
	}
	return ""
}

// mount starts `logfs mount ARGS… MOUNTPOINT` as nobody from their home
// and waits for its ready line. Whatever happens, the process is stopped
// and the mount point unmounted when the test ends.
func (n *nonroot) mount(t *testing.T, mp string, args ...string) *mountProc {
	t.Helper()
	return n.mountWithPath(t, userPath, mp, args...)
}

// mountWithPath is mount with the environment's PATH set to path.
func (n *nonroot) mountWithPath(t *testing.T, path, mp string, args ...string) *mountProc {
	t.Helper()
	m := &mountProc{mp: mp}
	m.cmd = n.command(n.home, path, n.bin, append(append([]string{"mount"}, args...), mp)...)
	ready := m.start(t)
	t.Cleanup(func() {
		m.stop()
		if n.mounted(t, mp) {
			exec.Command(n.tools["nsenter"], "--target", strconv.Itoa(n.holder.Process.Pid), "--mount", "--", n.tools["umount"], "--lazy", mp).Run()
		}
	})
	select {
	case <-ready:
	case <-m.done:
		t.Fatalf("logfs mount as user %d exited before it was ready: %v; stderr: %s", nobodyID, m.err, m.stderr())
	case <-time.After(60 * time.Second):
		t.Fatalf("logfs mount as user %d not ready after 60 s; stderr: %s", nobodyID, m.stderr())
	}
	// It is nobody who serves the mount, through fusermount3.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	require.NoError(t, err)
	require.Contains(t, string(status), fmt.Sprintf("\nUid:\t%d\t%d\t%d\t%d\n", nobodyID, nobodyID, nobodyID, nobodyID))
	require.Contains(t, n.mountinfo(t, mp), fmt.Sprintf("user_id=%d,", nobodyID), "a mount made by fusermount3 for the user")
	return m
}

// TestNonrootMountTour follows README's tour as a user who is not root:
// the mount comes up through fusermount3, the shell's tools work through
// it, and Ctrl-C, or fusermount3 -u from outside, unmount it and close
// the log cleanly, leaving nothing mounted.
func TestNonrootMountTour(t *testing.T) {
	n := newNonroot(t, nonrootOptions{})
	mp := filepath.Join(n.home, "logfs-mnt") // created by the command
	m := n.mount(t, mp)
	require.Contains(t, m.stderr(), "ready: ./logfs-data mounted at "+mp+" (read-write)")

	out := n.shOK(t, `set -e
mkdir ~/logfs-mnt/orders
echo hello >> ~/logfs-mnt/orders/0/append
seq 1 5 >> ~/logfs-mnt/orders/0/append
cat ~/logfs-mnt/orders/0/offset/0
echo --
cat ~/logfs-mnt/orders/0/offset/3
echo --
tail -n 2 ~/logfs-mnt/orders/0/offset/0
echo --
stat -c '%U %A' ~/logfs-mnt/orders/0/append`)
	require.Equal(t, "hello\n1\n2\n3\n4\n5\n--\n3\n4\n5\n--\n4\n5\n--\nnobody --w-------\n", out)

	require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.Contains(t, m.stderr(), "unmounted "+mp)
	require.False(t, n.mounted(t, mp), "still in the namespace's mountinfo after Ctrl-C")
	require.False(t, mounted(mp))
	data := filepath.Join(n.home, "logfs-data")
	require.FileExists(t, filepath.Join(data, ".kafka_cleanshutdown"))
	st, err := os.Stat(filepath.Join(data, "orders-0"))
	require.NoError(t, err)
	require.Equal(t, uint32(nobodyID), st.Sys().(*syscall.Stat_t).Uid, "the data directory is the user's")

	// Unmounted from outside, the way a user can: the command ends cleanly.
	m = n.mount(t, mp)
	n.shOK(t, "fusermount3 -u ~/logfs-mnt")
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.Contains(t, m.stderr(), "unmounted "+mp)
	require.False(t, n.mounted(t, mp))
	require.FileExists(t, filepath.Join(data, ".kafka_cleanshutdown"))
	require.Equal(t, "hello\n1\n2\n3\n4\n5\n", n.logfs(t, "consume", "--offset", "0", "orders", "0").stdout)
}

// TestNonrootMountKilled: kill -9 of a user's mount leaves a dead mount.
// The next mount there says so in one line, with a command that this user
// can run; after it, the mount comes up again and recovers what was
// appended.
func TestNonrootMountKilled(t *testing.T) {
	n := newNonroot(t, nonrootOptions{})
	mp := filepath.Join(n.home, "mnt")
	m := n.mount(t, mp, "--data", "data")
	n.shOK(t, "set -e; mkdir mnt/t; printf 'one\\ntwo\\n' >> mnt/t/0/append; sync mnt/t/0/append")
	require.NoError(t, m.cmd.Process.Kill())
	<-m.done
	out, code := n.sh(t, "stat -f mnt") // statfs asks the server; stat may answer from the cache
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "Transport endpoint is not connected", "a killed server leaves a dead mount")
	before := snapshot(t, filepath.Join(n.home, "data"))

	r := n.logfs(t, "mount", "--data", "data", mp)
	requireOneLineError(t, r, exitFailure, "is a stale FUSE mount", "mount", "--data", "data", mp)
	require.Equal(t, before, snapshot(t, filepath.Join(n.home, "data")), "the refused mount changed the data directory")
	// The line names what to run; run it as the user.
	line := strings.TrimSpace(r.stderr)
	i := strings.LastIndex(line, "run ")
	require.GreaterOrEqual(t, i, 0, "the line says what to run: %s", line)
	fix := line[i+len("run "):]
	n.shOK(t, fix)
	require.False(t, n.mounted(t, mp), "%q left the dead mount", fix)

	m = n.mount(t, mp, "--data", "data")
	require.Equal(t, "one\ntwo\n", n.shOK(t, "cat mnt/t/0/offset/0"))

	// Killed again: what contrib/systemd's unit runs before a start takes
	// the dead mount away for a user too (with User= in the unit).
	require.NoError(t, m.cmd.Process.Kill())
	<-m.done
	require.True(t, n.mounted(t, mp))
	unit, err := os.ReadFile("../../contrib/systemd/logfs.service")
	require.NoError(t, err)
	pre := ""
	for _, l := range strings.Split(string(unit), "\n") {
		if c, ok := strings.CutPrefix(l, "ExecStartPre=-"); ok {
			pre = strings.ReplaceAll(c, "/mnt/logfs", mp)
		}
	}
	require.NotEmpty(t, pre, "the unit takes a dead mount away before it starts")
	n.shOK(t, pre)
	require.False(t, n.mounted(t, mp), "%q left the dead mount", pre)
	m = n.mount(t, mp, "--data", "data")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.False(t, n.mounted(t, mp))
}

// TestNonrootMountRefused: what a user who is not root can get wrong is
// refused in one line that says what to do, before the data directory is
// created, and nothing is mounted.
func TestNonrootMountRefused(t *testing.T) {
	// A fuse.conf without user_allow_other, whatever the machine's says.
	var o nonrootOptions
	if _, err := os.Stat(fuseenv.ConfFile); err == nil {
		o.fuseConf = "#user_allow_other\n"
	}
	n := newNonroot(t, o)
	rootOwned := func(name string, mode os.FileMode) string {
		p := filepath.Join(n.dir, name)
		require.NoError(t, os.Mkdir(p, 0))
		require.NoError(t, os.Chmod(p, mode)) // not the umask's
		return p
	}
	mine := filepath.Join(n.home, "mnt")
	require.NoError(t, os.Mkdir(mine, 0o755))
	require.NoError(t, os.Chown(mine, nobodyID, nobodyID))

	for name, tc := range map[string]struct {
		mountpoint string
		args       []string
		want       string
	}{
		"--allow-other without user_allow_other":  {mine, []string{"--allow-other"}, "allow_other needs the line user_allow_other in " + fuseenv.ConfFile},
		"-o allow_other without user_allow_other": {mine, []string{"-o", "allow_other"}, "allow_other needs the line user_allow_other in " + fuseenv.ConfFile},
		"a mount point of root's":                 {rootOwned("roots", 0o755), nil, "is not writable by you, and fusermount3 mounts only on a directory you may write to"},
		"a mount point in a folder of root's":     {filepath.Join(rootOwned("roots-parent", 0o755), "mnt"), nil, "no write access to"},
		"a shared sticky folder not yours":        {rootOwned("sticky", os.ModeSticky|0o777), nil, "fusermount3 mounts on a sticky directory only for its owner"},
	} {
		t.Run(name, func(t *testing.T) {
			data := filepath.Join(n.home, "data-"+strings.NewReplacer(" ", "-", "'", "", "/", "").Replace(name))
			args := append(append([]string{"mount", "--data", data}, tc.args...), tc.mountpoint)
			r := n.logfs(t, args...)
			requireOneLineError(t, r, exitFailure, tc.want, args...)
			require.NotContains(t, r.stderr, "fusermount3 said", "refused before fusermount3 is asked")
			require.NoDirExists(t, data, "a refused mount created its data directory")
			require.False(t, n.mounted(t, tc.mountpoint))
		})
	}
}

// TestNonrootDataDirectoryNotTheirs: a data directory of root's, or one to
// be created where the user may not write, is refused in one line naming
// what the user may not do and to what.
func TestNonrootDataDirectoryNotTheirs(t *testing.T) {
	n := newNonroot(t, nonrootOptions{})
	roots := filepath.Join(n.dir, "roots")
	require.NoError(t, os.Mkdir(roots, 0o755))
	// Not a private data directory, which logfs makes drwx------, but one
	// that all may read, as Kafka's are: its files are -rw-r--r--.
	data := filepath.Join(roots, "data")
	require.NoError(t, os.Mkdir(data, 0o755))
	ok(t, n.dir, "", "topic", "create", "--data", data, "orders")
	ok(t, n.dir, "a\nb\n", "produce", "--data", data, "orders")
	readableByAll(t, roots)
	segment := filepath.Join(data, "orders-0", "00000000000000000000.log")
	mp := filepath.Join(n.home, "mnt")

	for name, tc := range map[string]struct {
		data  string
		args  []string
		setup func(t *testing.T)
		want  string
	}{
		"root's, read-write": {data: data,
			want: "data directory " + data + ": permission denied: you may not write to it (it belongs to root, mode drwxr-xr-x)"},
		"to be made in a folder of root's": {data: filepath.Join(roots, "new"),
			want: "data directory " + filepath.Join(roots, "new") + ": permission denied: you may not create it in " + roots + " (which belongs to root, mode drwxr-xr-x)"},
		"root's and closed, read-only": {data: data, args: []string{"--read-only"},
			setup: func(t *testing.T) { chmodFor(t, data, 0o700) },
			want:  "data directory " + data + ": permission denied: you may not read it (it belongs to root, mode drwx------)"},
		"a segment closed, read-only": {data: data, args: []string{"--read-only"},
			setup: func(t *testing.T) { chmodFor(t, segment, 0o600) },
			want:  "data directory " + data + ": permission denied: you may not read " + segment + " (it belongs to root, mode -rw-------)"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			before := snapshot(t, roots)
			args := append(append([]string{"mount", "--data", tc.data}, tc.args...), mp)
			r := n.logfs(t, args...)
			requireOneLineError(t, r, exitFailure, tc.want, args...)
			require.False(t, n.mounted(t, mp))
			require.Equal(t, before, snapshot(t, roots))
		})
	}
}

// readableByAll makes what is under dir readable by all, folders 0755 and
// files 0644, as under a umask of 022 (the test's may be stricter).
func readableByAll(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	}))
}

// chmodFor changes the mode of p until t ends.
func chmodFor(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(p, mode))
	t.Cleanup(func() { os.Chmod(p, st.Mode().Perm()) })
}

// TestNonrootReadOnlyRootData: a user serves root's data directory with
// --read-only, one that all may read as a Kafka broker's: reads work,
// appends fail with EROFS, and not a byte of the directory changes.
func TestNonrootReadOnlyRootData(t *testing.T) {
	n := newNonroot(t, nonrootOptions{})
	data := filepath.Join(n.dir, "data")
	require.NoError(t, os.Mkdir(data, 0o755))
	ok(t, n.dir, "", "topic", "create", "--data", data, "orders")
	ok(t, n.dir, "a\nb\n", "produce", "--data", data, "orders")
	readableByAll(t, data)
	before := snapshot(t, data)
	mp := filepath.Join(n.home, "mnt")
	m := n.mount(t, mp, "--read-only", "--data", data)
	require.Contains(t, m.stderr(), "(read-only)")
	require.Equal(t, "a\nb\n", n.shOK(t, "cat mnt/orders/0/offset/0"))
	out, code := n.sh(t, "echo c >> mnt/orders/0/append")
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "Read-only file system")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.False(t, n.mounted(t, mp))
	require.Equal(t, before, snapshot(t, data))
}

// TestNonrootWithoutFusermount: on a machine without fusermount3 a user
// who is not root is told so in one line, with the package to install,
// before anything is created. One that is only off PATH is found in /bin,
// as go-fuse finds it.
func TestNonrootWithoutFusermount(t *testing.T) {
	t.Run("none on the machine", func(t *testing.T) {
		n := newNonroot(t, nonrootOptions{fusermount: "none"})
		args := []string{"mount", "--data", "data", filepath.Join(n.home, "mnt")}
		r := n.logfs(t, args...)
		requireOneLineError(t, r, exitFailure, "no fusermount3 found (install the fuse3 package: apt-get install fuse3)", args...)
		require.NoDirExists(t, filepath.Join(n.home, "data"))
		require.NoDirExists(t, filepath.Join(n.home, "mnt"))
	})
	t.Run("not on PATH", func(t *testing.T) {
		n := newNonroot(t, nonrootOptions{})
		if _, err := exec.LookPath("/bin/fusermount3"); err != nil {
			t.Skip("no /bin/fusermount3 to fall back on")
		}
		mp := filepath.Join(n.home, "mnt")
		m := n.mountWithPath(t, "/nonexistent", mp, "--data", "data")
		require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
		require.Equal(t, 0, m.wait(t), m.stderr())
		require.Contains(t, m.stderr(), "unmounted "+mp)
		require.False(t, n.mounted(t, mp))
	})
}

// TestNonrootBusyUnmount: Ctrl-C while the user's shell is in the mount
// fails to unmount (fusermount3 -u says the mount is busy); the line says
// so as it does for root, without fusermount3's path and exit status, and
// the next Ctrl-C, once the shell has left, unmounts.
func TestNonrootBusyUnmount(t *testing.T) {
	n := newNonroot(t, nonrootOptions{})
	mp := filepath.Join(n.home, "mnt")
	m := n.mount(t, mp, "--data", "data")
	shell := n.command(n.home, userPath, "sh", "-c", "cd mnt && echo in && exec sleep 600")
	out, err := shell.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, shell.Start())
	exited := make(chan struct{})
	t.Cleanup(func() {
		shell.Process.Kill()
		<-exited
	})
	in := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		in <- line
		io.Copy(io.Discard, out)
		shell.Wait()
		close(exited)
	}()
	select {
	case line := <-in:
		require.Equal(t, "in\n", line)
	case <-time.After(time.Minute):
		t.Fatal("the shell did not enter the mount in a minute")
	}

	require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(m.stderr(), "still mounted") {
		require.True(t, time.Now().Before(deadline), "no word of the busy mount in a minute: %s", m.stderr())
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, n.mounted(t, mp))
	lines := strings.Split(strings.TrimSpace(m.stderr()), "\n")
	require.Equal(t, "logfs mount: unmount "+mp+": device or resource busy; still mounted: close what uses it and press Ctrl-C again", lines[len(lines)-1])

	require.NoError(t, shell.Process.Kill())
	<-exited
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.False(t, n.mounted(t, mp))
}

// TestNonrootAllowOther: with user_allow_other in fusermount3's
// configuration (a fuse.conf of the namespace's own, with a comment after
// the word, which fusermount3 allows too), a user's --allow-other mount
// lets others do what -o umask= gives them; without --allow-other nobody
// else gets in, root included.
func TestNonrootAllowOther(t *testing.T) {
	n := newNonroot(t, nonrootOptions{fuseConf: "# for the logfs tests\nuser_allow_other # let users share\n"})
	const other = nobodyID - 1 // a user of no group of nobody's
	mp := filepath.Join(n.home, "mnt")
	m := n.mount(t, mp, "--data", "data", "--allow-other", "-o", "umask=022")
	n.shOK(t, "set -e; mkdir mnt/t; echo a >> mnt/t/0/append")
	asOther := func(script string) (string, int) {
		out, err := n.commandAs(other, n.home, userPath, "sh", "-c", script).CombinedOutput()
		return string(out), exitCode(t, err)
	}
	out, code := asOther("cat mnt/t/0/offset/0")
	require.Equal(t, 0, code, out)
	require.Equal(t, "a\n", out)
	out, code = asOther("echo b >> mnt/t/0/append")
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "Permission denied")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.False(t, n.mounted(t, mp))

	m = n.mount(t, mp, "--data", "data")
	out, code = asOther("cat mnt/t/0/offset/0")
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "Permission denied")
	root, err := exec.Command(n.tools["nsenter"], "--target", strconv.Itoa(n.holder.Process.Pid), "--mount", "--",
		n.tools["sh"], "-c", `cat "$0"/t/0/offset/0`, mp).CombinedOutput()
	require.Error(t, err, "root read a private mount: %s", root)
	require.Contains(t, string(root), "Permission denied")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.False(t, n.mounted(t, mp))

	// A fuse.conf only root may read: fusermount3 reads it as the user,
	// so it allows no allow_other, and logfs says why in one line, before
	// anything is created, rather than that the line is missing.
	chmod, err := exec.Command(n.tools["nsenter"], "--target", strconv.Itoa(n.holder.Process.Pid), "--mount", "--",
		"chmod", "0600", filepath.Join(n.dir, "dev", "fuse.conf")).CombinedOutput()
	require.NoError(t, err, "%s", chmod)
	args := []string{"mount", "--data", "data2", "--allow-other", mp}
	r := n.logfs(t, args...)
	requireOneLineError(t, r, exitFailure, "allow_other needs the line user_allow_other in "+fuseenv.ConfFile+", which you may not read, nor may fusermount3, which reads it as you: ask an administrator to chmod 0644 "+fuseenv.ConfFile, args...)
	require.NoDirExists(t, filepath.Join(n.home, "data2"))
}

// TestNonrootMountThroughALink: a mount point named through a symbolic
// link, which mount(2) follows as root, works for a user too, although
// fusermount3 refuses to mount on a link: the mount goes on the folder it
// leads to, and Ctrl-C takes it away.
func TestNonrootMountThroughALink(t *testing.T) {
	n := newNonroot(t, nonrootOptions{})
	real := filepath.Join(n.home, "real")
	n.shOK(t, "mkdir real && ln -s real link")
	m := n.mount(t, filepath.Join(n.home, "link"), "--data", "data")
	require.True(t, n.mounted(t, real))
	require.Equal(t, "x\n", n.shOK(t, "set -e; mkdir link/t; echo x >> link/t/0/append; cat real/t/0/offset/0"))
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, m.wait(t), m.stderr())
	require.False(t, n.mounted(t, real))
}

// TestNonrootFusermountNotSetuid: a fusermount3 that cannot mount for a
// user, as it is not set-uid root (copied without the bit, into a
// container image say) or lies on a file system mounted nosuid, is named
// in one line with what to do, before the data directory is created.
func TestNonrootFusermountNotSetuid(t *testing.T) {
	for _, how := range []string{"copy", "nosuid"} {
		t.Run(how, func(t *testing.T) {
			n := newNonroot(t, nonrootOptions{fusermount: how})
			args := []string{"mount", "--data", "data", filepath.Join(n.home, "mnt")}
			r := n.logfs(t, args...)
			want := map[string]string{
				"copy":   "is not set-uid root (-rwxr-xr-x root:root), so it cannot mount for you: ask an administrator to chmod u+s ",
				"nosuid": "lies on a file system mounted nosuid, so it cannot mount for you: ",
			}[how]
			requireOneLineError(t, r, exitFailure, want, args...)
			require.NoDirExists(t, filepath.Join(n.home, "data"))
		})
	}
}

// TestNonrootFstabUserMount: an fstab line with `user` lets a user mount
// with mount(8), which runs logfs as its helper (README: mount(8) and
// fstab) as that user; the user's umount ends the background mount, which
// closes the log cleanly.
func TestNonrootFstabUserMount(t *testing.T) {
	n := newNonroot(t, nonrootOptions{fstab: true})
	data, mp := filepath.Join(n.home, "data"), filepath.Join(n.home, "mnt")
	n.setFstab(t, data+" "+mp+" fuse.logfs noauto,user,retention.ms=-1 0 0\n")
	n.shOK(t, "mkdir mnt")

	out := n.shOK(t, "mount ~/mnt")
	t.Cleanup(func() { killServing(t, n.bin) })
	require.NotContains(t, out, "error")
	require.Contains(t, n.mountinfo(t, mp), fmt.Sprintf("user_id=%d,", nobodyID))
	require.Equal(t, "x\n", n.shOK(t, "set -e; mkdir mnt/t; echo x >> mnt/t/0/append; cat mnt/t/0/offset/0"))

	n.shOK(t, "umount ~/mnt")
	require.False(t, n.mounted(t, mp))
	deadline := time.Now().Add(time.Minute)
	for !fileExists(filepath.Join(data, ".kafka_cleanshutdown")) {
		require.True(t, time.Now().Before(deadline), "the helper's mount did not close the log cleanly within a minute of umount")
		time.Sleep(10 * time.Millisecond)
	}
}

// setFstab writes what mount(8) reads as /etc/fstab in a namespace made
// with nonrootOptions.fstab.
func (n *nonroot) setFstab(t *testing.T, lines string) {
	t.Helper()
	// The file is on the namespace's own tmpfs, over n.dir/dev.
	out, err := exec.Command(n.tools["nsenter"], "--target", strconv.Itoa(n.holder.Process.Pid), "--mount", "--",
		n.tools["sh"], "-c", `printf %s "$1" > "$0"`, filepath.Join(n.dir, "dev", "fstab"), lines).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// killServing kills what is left of the processes running bin, a binary
// of the test's own: the mount helper started one in the background.
func killServing(t *testing.T, bin string) {
	t.Helper()
	exes, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, exe := range exes {
		if target, err := os.Readlink(exe); err != nil || target != bin {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(exe))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
