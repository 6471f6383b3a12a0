package main

import (
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

// inMountNamespace runs script with sh in a private mount namespace of its
// own in which /sbin (where mount(8) looks for helpers) is a temporary
// folder holding logfs as mount.fuse.NAME, so that mount(8) runs it as it
// runs an installed helper, while the real /sbin is never touched. The
// mounts the script makes are in that namespace only, so it checks them
// itself; the data directories, in the test's temporary folder, are seen
// from outside. Any logfs mount of data still running when the test ends
// (in the namespace, which lives as long as it does) is stopped.
func inMountNamespace(t *testing.T, name string, data []string, script string) (string, error) {
	t.Helper()
	fusetest.Require(t)
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace of its own needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	if _, err := exec.LookPath("mount"); err != nil {
		t.Skip("no mount(8)")
	}
	sbin, err := filepath.EvalSymlinks("/sbin")
	require.NoError(t, err)
	helpers := t.TempDir()
	require.NoError(t, os.Symlink(logfsBin, filepath.Join(helpers, "mount.fuse."+name)))
	t.Cleanup(func() {
		for _, d := range data {
			stopMountOf(d)
		}
	})
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-e", "-c",
		fmt.Sprintf("mount --bind %s %s\n%s", helpers, sbin, script))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stopMountOf stops a background `logfs mount --data data` if one runs.
func stopMountOf(data string) {
	want := "logfs\x00mount\x00--data\x00" + data + "\x00"
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(string(b), want) {
			continue
		}
		var pid int
		fmt.Sscan(e.Name(), &pid)
		p, err := os.FindProcess(pid)
		if err != nil {
			continue
		}
		p.Signal(syscall.SIGTERM)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join("/proc", e.Name())); err != nil {
				break
			}
		}
		p.Kill()
	}
}

// TestMountThroughMount8 mounts with mount(8) itself, in a mount namespace
// of its own (see inMountNamespace; the test this replaces installed a
// helper in the real /sbin): `mount -t fuse.NAME DATA MOUNTPOINT -o …`,
// `mount -r`, and fstab lines (mount -T FSTAB MOUNTPOINT) with the words
// fstab lines carry, such as user=NAME, which libmount hands the helper as
// they are. umount ends the background mount cleanly each time.
func TestMountThroughMount8(t *testing.T) {
	dir := t.TempDir()
	name := fmt.Sprintf("logfstest%d", os.Getpid())
	data, mp := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o755))
	fstab := filepath.Join(dir, "fstab")
	line := fmt.Sprintf("%s %s fuse.%s noauto,nofail,_netdev,user=alice,x-systemd.automount,comment=x,retention.ms=-1 0 0\n", data, mp, name)
	require.NoError(t, os.WriteFile(fstab, []byte(line), 0o644))
	marker := filepath.Join(data, ".kafka_cleanshutdown")
	script := fmt.Sprintf(`
mp=%[2]s
# The mount removed the marker as it opened the data directory: it is
# back once the background mount has closed the log.
waitmarker() { for i in $(seq 300); do [ -e %[3]s ] && return 0; sleep 0.1; done; echo "no marker"; exit 1; }
mount -t fuse.%[1]s %[4]s $mp -o noatime,retention.ms=-1
mkdir $mp/t
echo one > $mp/t/0/append
umount $mp
waitmarker
mount -T %[5]s $mp
cat $mp/t/0/offset/0
umount $mp
waitmarker
mount -r -t fuse.%[1]s %[4]s $mp
grep " $mp " /proc/self/mountinfo | grep -q " - fuse.logfs [^ ]* ro," && echo read-only
if (echo two > $mp/t/0/append) 2>/dev/null; then echo "appended to a read-only mount"; fi
umount $mp
waitmarker
echo done
`, name, mp, marker, data, fstab)
	out, err := inMountNamespace(t, name, []string{data}, script)
	require.NoError(t, err, "%s", out)
	require.Equal(t, "one\nread-only\ndone\n", out)
	require.Equal(t, "one\n", ok(t, dir, "", "consume", "--data", data, "--offset", "0", "t", "0"))
}

// TestMount8FakeChecksOptions: `mount -fv` with a mistyped option fails,
// naming it, and mounts nothing.
func TestMount8FakeChecksOptions(t *testing.T) {
	dir := t.TempDir()
	name := fmt.Sprintf("logfstest%d", os.Getpid())
	data, mp := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o755))
	out, err := inMountNamespace(t, name, []string{data}, fmt.Sprintf(
		"mount -fv -t fuse.%s %s %s -o retenton.ms=1", name, data, mp))
	require.Error(t, err, out)
	require.Contains(t, out, "-o retenton.ms=1")
	require.NoDirExists(t, data)
}
