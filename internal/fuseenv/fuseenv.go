// Package fuseenv tells whether this process can mount a FUSE file system
// here, and if not, why and what to do about it, in one line.
//
// It decides by trying what the mount will do, not by guessing from who
// the process is: root mounts with mount(2) on a descriptor of /dev/fuse
// it opens itself, and every other user goes through fusermount3, which
// also opens /dev/fuse with the user's own rights. So the check is to open
// /dev/fuse for reading and writing (and close it again: an open
// descriptor that is never mounted is freed at close).
//
// The mount (fs.Mount) and the tests (internal/fusetest) both ask Check;
// the tests then also try a real mount once.
package fuseenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Device is the kernel's FUSE device. A variable so that tests can point
// it at a file they made.
var Device = "/dev/fuse"

// ConfFile is fusermount3's configuration (user_allow_other).
var ConfFile = "/etc/fuse.conf"

// Fusermount returns the path of fusermount3 (or the older fusermount)
// the way go-fuse looks it up, or "" if there is none.
func Fusermount() string {
	for _, name := range []string{"fusermount3", "fusermount"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if p, err := exec.LookPath("/bin/" + name); err == nil {
			return p
		}
	}
	return ""
}

// Check returns nil if this process can mount, or an error whose text is
// one line saying why not and what to do. allowOther asks for a mount
// other users may enter, which a user other than root may make only when
// fusermount3's configuration allows it.
func Check(allowOther bool) error {
	root := os.Geteuid() == 0
	st, err := os.Stat(Device)
	if err != nil {
		return fmt.Errorf("%s does not exist (load the fuse kernel module: modprobe fuse; in a container, pass the device in: --device /dev/fuse)", Device)
	}
	if !root {
		bin := Fusermount()
		if bin == "" {
			return errors.New("not running as root and no fusermount3 found (install the fuse3 package: apt-get install fuse3), or mount as root")
		}
		if err := checkSetuid(bin); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(Device, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			return deviceDenied(st)
		}
		return fmt.Errorf("cannot open %s: %v (is the fuse kernel module loaded?)", Device, unwrapPath(err))
	}
	f.Close()
	if allowOther && !root {
		switch userAllowOther() {
		case allowOtherUnreadable:
			return fmt.Errorf("allow_other needs the line user_allow_other in %s, which you may not read, nor may fusermount3, which reads it as you: ask an administrator to chmod 0644 %s (or leave out allow_other: only you will see the files)", ConfFile, ConfFile)
		case allowOtherNo:
			return fmt.Errorf("allow_other needs the line user_allow_other in %s when not mounting as root (or leave out allow_other: only you will see the files)", ConfFile)
		}
	}
	return nil
}

// checkSetuid explains a fusermount3 that cannot mount for a user other
// than root: one that is not set-uid root (copied without the bit, into a
// container image say), or lies on a file system mounted nosuid, fails
// every mount with "mount failed: Operation not permitted".
func checkSetuid(bin string) error {
	st, err := os.Stat(bin)
	if err != nil {
		return nil // the mount will say
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Mode()&os.ModeSetuid == 0 || sys.Uid != 0 {
		mode := []byte(st.Mode().Perm().String())
		if st.Mode()&os.ModeSetuid != 0 {
			mode[3] = map[byte]byte{'x': 's', '-': 'S'}[mode[3]] // as ls shows it
		}
		return fmt.Errorf("%s is not set-uid root (%s %s:%s), so it cannot mount for you: ask an administrator to chmod u+s %s as root (or reinstall the fuse3 package), or mount as root",
			bin, mode, UserName(sys.Uid), groupName(sys.Gid), bin)
	}
	var fs unix.Statfs_t
	if unix.Statfs(bin, &fs) == nil && fs.Flags&unix.ST_NOSUID != 0 {
		return fmt.Errorf("%s lies on a file system mounted nosuid, so it cannot mount for you: use a fusermount3 where set-uid programs run, or mount as root", bin)
	}
	return nil
}

// deviceDenied explains a /dev/fuse this user may not open: its mode and
// owners, and the two usual fixes.
func deviceDenied(st os.FileInfo) error {
	who := strconv.Itoa(os.Geteuid())
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	owner, group := "?", "?"
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		owner, group = UserName(sys.Uid), groupName(sys.Gid)
	}
	fix := "chmod 0666 " + Device + " (the usual mode)"
	if group != "root" && group != "?" {
		fix += fmt.Sprintf(", or add %s to group %s (usermod -aG %s %s, then log in again)", who, group, group, who)
	} else {
		fix += fmt.Sprintf(", or give it a group for FUSE users (chgrp fuse %s; chmod 0660 %s; usermod -aG fuse %s)", Device, Device, who)
	}
	mode := st.Mode().Perm().String()[1:]
	kind := "-"
	if st.Mode()&os.ModeCharDevice != 0 {
		kind = "c"
	}
	return fmt.Errorf("user %s may not open %s (%s%s %s:%s): ask an administrator to %s", who, Device, kind, mode, owner, group, fix)
}

// UserName is the name of the user uid, or uid in decimal when it has
// none.
func UserName(uid uint32) string {
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		return u.Username
	}
	return strconv.Itoa(int(uid))
}

func groupName(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.Itoa(int(gid))); err == nil {
		return g.Name
	}
	return strconv.Itoa(int(gid))
}

// allowOtherWord is what fusermount3's configuration says of
// user_allow_other, as far as this user can tell.
type allowOtherWord int

const (
	allowOtherNo         allowOtherWord = iota // no such line, or no file
	allowOtherYes                              // user_allow_other on a line of its own
	allowOtherUnreadable                       // a file this user may not read, nor fusermount3 for them
)

// userAllowOther reads fusermount3's configuration for user_allow_other
// on a line of its own (comments start with #, as for fusermount3).
func userAllowOther() allowOtherWord {
	f, err := os.Open(ConfFile)
	if errors.Is(err, os.ErrPermission) {
		return allowOtherUnreadable
	} else if err != nil {
		return allowOtherNo
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if strings.TrimSpace(line) == "user_allow_other" {
			return allowOtherYes
		}
	}
	return allowOtherNo
}

// unwrapPath drops the "open /dev/fuse:" prefix of a *PathError.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// FusermountAdvice is what to check when fusermount3 refused a mount for a
// reason Check could not see beforehand.
const FusermountAdvice = "check that you may open /dev/fuse (ls -l /dev/fuse; its group, such as fuse, must be yours), that you own the mount point, and for allow_other that /etc/fuse.conf has user_allow_other"
