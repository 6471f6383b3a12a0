// Package fusetest decides whether a test that mounts can run on this
// machine. Where it cannot, the test is skipped with the reason, or fails
// when LOGFS_REQUIRE_FUSE=1, as CI sets it: so that a CI machine that lost
// /dev/fuse does not pass by skipping every mount test.
//
// It decides by trying: once per test binary it mounts an empty file
// system the way logfs mounts (internal/fuseenv.TryMount), so a machine
// with fusermount3 but a /dev/fuse this user may not open skips cleanly
// instead of failing in every mount.
package fusetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logfs/logfs/internal/fuseenv"
)

// EnvRequire, set to 1, turns "cannot mount here" into a test failure.
const EnvRequire = "LOGFS_REQUIRE_FUSE"

var (
	probeOnce sync.Once
	probeErr  error
)

// Usable returns nil if a mount works here, or why not (one line). The
// answer is found once per process, by a real mount.
func Usable() error {
	probeOnce.Do(func() { probeErr = fuseenv.TryMount() })
	return probeErr
}

// Require skips t (or fails it under LOGFS_REQUIRE_FUSE=1) when this
// machine cannot mount.
func Require(t testing.TB) {
	t.Helper()
	if err := Usable(); err != nil {
		Unusable(t, err.Error())
	}
}

// Unusable skips t (or fails it under LOGFS_REQUIRE_FUSE=1), saying why a
// mount cannot work here: for a mount that failed although Require passed.
func Unusable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("cannot mount (%s) and %s=1", why, EnvRequire)
	}
	t.Skipf("cannot mount: %s (set %s=1 to fail instead)", why, EnvRequire)
}

// Unmount unmounts mp the way this user can: umount(2) as root,
// fusermount3 -u otherwise. lazy detaches it even while it is busy (or
// its server is gone), for cleanups that must leave nothing mounted.
func Unmount(mp string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = syscall.MNT_DETACH
		}
		return syscall.Unmount(mp, flags)
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	bin := fuseenv.Fusermount()
	if bin == "" {
		bin = "fusermount3"
	}
	if out, err := exec.Command(bin, append(args, mp)...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s %s: %w: %s", bin, strings.Join(args, " "), mp, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// WaitOpen waits until process pid has a file under dir open: a program
// started on a file of a mount (tail -f, cat) has opened it, so that what
// is appended from then on is its to show. A file whose name resolves at
// lookup time (offset/latest) takes what was there at the open; a test
// that appends before it must not guess with a sleep, which a loaded
// machine outlasts. It fails t after a minute.
func WaitOpen(t testing.TB, pid int, dir string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && strings.HasPrefix(target, dir+"/") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d never opened a file under %s", pid, dir)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
