package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/testuser"
	"github.com/logfs/logfs/storage"
)

// nodeKinds names one path of every kind of node in a mount, relative to
// the mount point, with a partition t/0.
var nodeKinds = map[string]string{
	"root":         ".",
	"topic":        "t",
	"partition":    "t/0",
	"offset dir":   "t/0/offset",
	"time dir":     "t/0/time",
	"record":       "t/0/offset/0",
	"record jsonl": "t/0/offset/0.jsonl",
	"time record":  "t/0/time/0",
	"info":         "t/0/info",
	"append":       "t/0/append",
	"append jsonl": "t/0/append.jsonl",
}

// TestNodeModes checks the modes, owners and times every kind of node
// shows: owner-only by default, what Share opens with AllowOther, no write
// bit on a read-only mount, and a real atime.
func TestNodeModes(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	p := newPartition(t, l, "t", nil)
	_, err := p.Append([]storage.Record{{Value: []byte("x")}})
	require.NoError(t, err)
	group := uint32(4242)
	for name, tc := range map[string]struct {
		o                                 fs.Options
		mkdir, dir, read, append, mkdirRO os.FileMode
	}{
		"default": {o: fs.Options{}, mkdir: 0o700, dir: 0o500, read: 0o400, append: 0o200},
		// Share without AllowOther opens nothing: the kernel lets no one
		// else in, and the modes say so.
		"share without allow-other": {o: fs.Options{Share: 0o077}, mkdir: 0o700, dir: 0o500, read: 0o400, append: 0o200},
		"read to all":               {o: fs.Options{AllowOther: true, Share: 0o055}, mkdir: 0o755, dir: 0o555, read: 0o444, append: 0o200},
		"group reads and writes":    {o: fs.Options{AllowOther: true, Share: 0o070, Group: &group}, mkdir: 0o770, dir: 0o550, read: 0o440, append: 0o220},
		"all":                       {o: fs.Options{AllowOther: true, Share: 0o077}, mkdir: 0o777, dir: 0o555, read: 0o444, append: 0o222},
		"read-only":                 {o: fs.Options{ReadOnly: true, AllowOther: true, Share: 0o077}, mkdir: 0o555, dir: 0o555, read: 0o444, append: 0},
	} {
		t.Run(name, func(t *testing.T) {
			mnt := mount(t, l, tc.o)
			gid := uint32(os.Getgid())
			if tc.o.Group != nil {
				gid = *tc.o.Group
			}
			for kind, rel := range nodeKinds {
				st, err := os.Stat(filepath.Join(mnt, rel))
				require.NoError(t, err, kind)
				want := tc.read
				switch kind {
				case "root", "topic":
					want = tc.mkdir
				case "partition", "offset dir", "time dir":
					want = tc.dir
				case "append", "append jsonl":
					want = tc.append
				}
				require.Equal(t, want, st.Mode().Perm(), "%s: %v", kind, st.Mode())
				sys := st.Sys().(*syscall.Stat_t)
				require.Equal(t, uint32(os.Getuid()), sys.Uid, kind)
				require.Equal(t, gid, sys.Gid, kind)
				atime := time.Unix(sys.Atim.Unix())
				require.True(t, atime.Equal(st.ModTime()), "%s: atime %v, mtime %v", kind, atime, st.ModTime())
				require.Greater(t, atime.Year(), 2000, kind)
			}
		})
	}
}

// TestSetattrRefused: chmod, chown, truncate and utimes are EPERM on every
// node but the append files (EROFS on a read-only mount), which take the
// truncate to 0 and the new times that `>` and touch send.
func TestSetattrRefused(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	p := newPartition(t, l, "t", nil)
	_, err := p.Append([]storage.Record{{Value: []byte("x")}})
	require.NoError(t, err)
	for name, o := range map[string]fs.Options{"read-write": {}, "read-only": {ReadOnly: true}} {
		t.Run(name, func(t *testing.T) {
			mnt := mount(t, l, o)
			want := syscall.EPERM
			if o.ReadOnly {
				want = syscall.EROFS
			}
			now := time.Now()
			for kind, rel := range nodeKinds {
				path := filepath.Join(mnt, rel)
				isAppend := strings.HasPrefix(kind, "append")
				require.ErrorIs(t, os.Chmod(path, 0o777), want, "chmod %s", kind)
				require.ErrorIs(t, os.Chown(path, os.Getuid(), os.Getgid()), want, "chown %s", kind)
				if isAppend && !o.ReadOnly {
					require.NoError(t, os.Truncate(path, 0), kind)
					require.NoError(t, os.Chtimes(path, now, now), kind)
					continue
				}
				if kind != "root" && !strings.Contains(kind, "dir") && kind != "topic" && kind != "partition" {
					require.ErrorIs(t, os.Truncate(path, 0), want, "truncate %s", kind)
				}
				require.ErrorIs(t, os.Chtimes(path, now, now), want, "utimes %s", kind)
			}
		})
	}
}

// TestOtherUsers runs commands as a second user against a mount by root:
// refused everything without --allow-other, and with it exactly what the
// modes the nodes show allow.
func TestOtherUsers(t *testing.T) {
	u := testuser.New(t)
	userGroup, rootGroup := u.GID, uint32(0)

	// What the user tries, each a script that succeeds when allowed.
	actions := []struct {
		name, script string
		write        bool
	}{
		{"list the root", "ls {M}", false},
		{"list a partition", "ls {M}/t/0", false},
		{"stat a record file", "stat {M}/t/0/offset/0", false},
		{"read a record file", "cat {M}/t/0/offset/0 | grep -q secret", false},
		{"read by time", "cat {M}/t/0/time/0.jsonl | grep -q secret", false},
		{"read info", "cat {M}/t/0/info", false},
		{"append", "echo from-user >> {M}/t/0/append", true},
		{"append json", `echo '{"value":"json-from-user"}' >> {M}/t/0/append.jsonl`, true},
		{"create a topic", "mkdir {M}/u$RANDOM", true},
		{"add a partition", "mkdir {M}/t/$(ls {M}/t | wc -l)", true},
	}
	for name, tc := range map[string]struct {
		o           fs.Options
		read, write bool
	}{
		"private":                     {o: fs.Options{}},
		"share without allow-other":   {o: fs.Options{Share: 0o077}},
		"allow-other, nothing shared": {o: fs.Options{AllowOther: true}},
		"read to all":                 {o: fs.Options{AllowOther: true, Share: 0o055}, read: true},
		"all":                         {o: fs.Options{AllowOther: true, Share: 0o077}, read: true, write: true},
		"the user's group":            {o: fs.Options{AllowOther: true, Share: 0o070, Group: &userGroup}, read: true, write: true},
		"a group without the user":    {o: fs.Options{AllowOther: true, Share: 0o070, Group: &rootGroup}},
		"read-only, all":              {o: fs.Options{ReadOnly: true, AllowOther: true, Share: 0o077}, read: true},
	} {
		t.Run(name, func(t *testing.T) {
			l, _ := newLog(t, nil)
			p := newPartition(t, l, "t", nil)
			_, err := p.Append([]storage.Record{{Value: []byte("secret")}})
			require.NoError(t, err)
			mnt := mount(t, l, tc.o)
			testuser.Traversable(t, filepath.Dir(mnt), os.TempDir())
			// The user can reach the mount point itself.
			out, err := u.Sh("stat " + q(filepath.Dir(mnt)))
			require.NoError(t, err, out)
			before := p.EndOffset()
			for _, a := range actions {
				allowed := tc.read && !a.write || tc.write && a.write
				out, err := u.Sh(strings.ReplaceAll(a.script, "{M}", q(mnt)))
				if allowed {
					require.NoError(t, err, "%s: %s", a.name, out)
					continue
				}
				require.Error(t, err, "%s should be refused", a.name)
				if tc.o.ReadOnly && a.write {
					require.Contains(t, out, "Read-only file system", a.name)
				} else {
					require.Contains(t, out, "Permission denied", a.name)
				}
			}
			if !tc.write {
				require.Equal(t, before, p.EndOffset(), "nothing appended")
				require.Equal(t, []string{"t"}, l.Topics(), "no topic created")
			}
		})
	}
}

// TestMkdirModeIgnored checks that a topic made through a shared
// mount still belongs to the mount's owner, whatever mode mkdir asked for.
func TestMkdirModeIgnored(t *testing.T) {
	l, _ := newLog(t, nil)
	mnt := mount(t, l, fs.Options{AllowOther: true, Share: 0o055})
	require.NoError(t, os.Mkdir(filepath.Join(mnt, "m"), 0o777))
	st, err := os.Stat(filepath.Join(mnt, "m"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), st.Mode().Perm(), fmt.Sprint(st.Mode()))
}
