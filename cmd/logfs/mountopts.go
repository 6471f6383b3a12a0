package main

import (
	"strings"

	"github.com/logfs/logfs/storage"
)

// The -o words people pass out of habit, from fstab and mount(8), that mean
// nothing for logfs or that logfs always does. They are accepted and
// ignored, so that an fstab line or a copied command works:
//   - atime words: logfs keeps no access times;
//   - nodev, nosuid, noexec and their opposites: no file of the mount is a
//     device, set-uid or executable, so each way is the same (the mount is
//     always nodev,nosuid);
//   - fstab's and mount(8)'s own words (auto, noauto, user, users, owner,
//     group and their no… forms, nofail, _netdev, defaults, x-…, X-…,
//     comment=…), which mount(8) and systemd read and which reach a mount
//     helper all the same (an fstab "user=NAME" reaches it as such);
//   - async: writes reach the page cache and are flushed per flush.ms.
var ignoredMountOptions = map[string]bool{
	"noatime": true, "atime": true, "relatime": true, "norelatime": true, "strictatime": true,
	"nostrictatime": true, "lazytime": true, "nolazytime": true, "nodiratime": true, "diratime": true,
	"nodev": true, "dev": true, "nosuid": true, "suid": true, "noexec": true, "exec": true,
	"auto": true, "noauto": true, "user": true, "nouser": true, "users": true, "nousers": true,
	"owner": true, "noowner": true, "group": true, "nogroup": true, "nofail": true, "_netdev": true,
	"defaults": true, "async": true,
}

// ignoredMountOption reports whether o is one of ignoredMountOptions, or a
// key=value that only mount(8), systemd or FUSE helpers read.
func ignoredMountOption(o string) bool {
	if ignoredMountOptions[o] {
		return true
	}
	for _, prefix := range []string{"x-", "X-", "comment=", "user=", "fsname=", "subtype="} {
		if strings.HasPrefix(o, prefix) {
			return true
		}
	}
	return false
}

// mountOptionHints say what to use instead of a FUSE or mount(8) word that
// logfs does not take.
var mountOptionHints = map[string]string{
	"sync":         "logfs does not make every write synchronous; -o flush.messages=1 fsyncs after every record",
	"dirsync":      "logfs does not make every write synchronous; -o flush.messages=1 fsyncs after every record",
	"allow_root":   "not supported; allow_other with umask= says who else may enter",
	"auto_unmount": "not supported; the mount unmounts itself on Ctrl-C, SIGTERM and umount, and a stale one left by kill -9 is named by the next mount",
}

// mountOptionsHelp lists what -o takes, for the error of a word it does not.
func mountOptionsHelp() string {
	return "-o takes ro, rw, allow_other, default_permissions, debug, direct_io, umask=, gid=, " +
		"log.retention.check.interval.ms=, topic defaults " + strings.Join(storage.PropertyNames(), "=, ") + "=, " +
		"and ignores noatime, relatime, nodev, nosuid, noexec, auto, noauto, user, nofail, _netdev, defaults, x-*"
}
