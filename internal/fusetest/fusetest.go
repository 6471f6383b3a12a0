// Package fusetest decides whether a test that mounts can run on this
// machine. Where it cannot, the test is skipped, or fails when
// LOGFS_REQUIRE_FUSE=1, as CI sets it: so that a CI machine that lost
// /dev/fuse does not pass by skipping every mount test.
package fusetest

import (
	"os"
	"os/exec"
	"testing"
)

// EnvRequire, set to 1, turns "cannot mount here" into a test failure.
const EnvRequire = "LOGFS_REQUIRE_FUSE"

// Require skips t (or fails it under LOGFS_REQUIRE_FUSE=1) when this
// machine cannot mount: no /dev/fuse, or neither root nor fusermount3.
func Require(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		Unusable(t, "no /dev/fuse")
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			Unusable(t, "not root and no fusermount3")
		}
	}
}

// Unusable skips t (or fails it under LOGFS_REQUIRE_FUSE=1), saying why a
// mount cannot work here: for a mount that failed although Require passed
// (a container without the right to mount, say).
func Unusable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("cannot mount (%s) and %s=1", why, EnvRequire)
	}
	t.Skipf("cannot mount: %s (set %s=1 to fail instead)", why, EnvRequire)
}
