package fs

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/internal/fuseenv"
)

// Preflight checks what Mount will need, so that a caller can refuse
// before it opens, creates or recovers a data directory: that mountpoint is
// an empty directory nothing is mounted on (a stale mount left by a killed
// server is named as such), or does not exist yet and can be created; and
// that this process can use FUSE (allowOther as for Options.AllowOther).
// Errors wrap ErrMountpoint or ErrNoFUSE and read as one line. Mount
// checks again, since the directory may change in between.
func Preflight(mountpoint string, allowOther bool) error {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMountpoint, err)
	}
	if _, err := os.Lstat(mp); errors.Is(err, iofs.ErrNotExist) {
		if err := checkCreatable(mp); err != nil {
			return err
		}
	} else {
		if _, err := checkMountpoint(mp); err != nil {
			return err
		}
		if os.Geteuid() != 0 {
			if err := checkFusermountMayMount(mp); err != nil {
				return err
			}
		}
	}
	return checkFUSE(allowOther)
}

// checkFusermountMayMount refuses, for a user other than root, the mount
// points fusermount3 refuses: one the user may not write to, and a sticky
// directory (mode 1777, like /tmp) the user does not own, which the
// user may write to. Found by fusermount3, they would fail the mount only
// after the data directory was opened, recovered even.
func checkFusermountMayMount(mp string) error {
	if unix.Access(mp, unix.W_OK) != nil {
		return fmt.Errorf("%w: %s is not writable by you, and fusermount3 mounts only on a directory you may write to (use one of your own)", ErrMountpoint, mp)
	}
	st, err := os.Stat(mp)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMountpoint, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && st.Mode()&os.ModeSticky != 0 && int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("%w: %s is %s's and sticky (%v): fusermount3 mounts on a sticky directory only for its owner (use a folder of your own in it)", ErrMountpoint, mp, fuseenv.UserName(sys.Uid), st.Mode())
	}
	return nil
}

// checkCreatable checks that the missing directory mp can be made: its
// nearest existing ancestor is a directory this process may write in.
func checkCreatable(mp string) error {
	dir := filepath.Dir(mp)
	for {
		st, err := os.Stat(dir)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%w: cannot create %s: %s is not a directory", ErrMountpoint, mp, dir)
			}
			if unix.Access(dir, unix.W_OK|unix.X_OK) != nil {
				return fmt.Errorf("%w: cannot create %s: no write access to %s", ErrMountpoint, mp, dir)
			}
			return nil
		}
		if !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("%w: cannot create %s: %v", ErrMountpoint, mp, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// checkFUSE explains in one line why the mount cannot work, if it cannot.
func checkFUSE(allowOther bool) error {
	if err := fuseenv.Check(allowOther); err != nil {
		return fmt.Errorf("%w: %v", ErrNoFUSE, err)
	}
	return nil
}
