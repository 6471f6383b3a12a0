// Package testuser gives tests a second local user: created for the test
// with useradd, removed with userdel when it ends. Tests that need one
// (what another user may do with a mount or a data directory) are skipped
// unless they run as root with useradd, userdel and setpriv.
package testuser

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"
)

// User is a throwaway user with a group of its own.
type User struct {
	Name     string
	UID, GID uint32
}

// New creates a user for t, removed when t ends.
func New(t testing.TB) *User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a second user needs root")
	}
	for _, tool := range []string{"useradd", "userdel", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "logfs-t" + hex.EncodeToString(b[:])
	retry(t, "useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh", name)
	t.Cleanup(func() { retry(t, "userdel", name) })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &User{Name: name, UID: uint32(uid), GID: uint32(gid)}
}

// retry runs a command until it succeeds: other tests on the machine may
// hold the lock of /etc/passwd for a moment.
func retry(t testing.TB, args ...string) {
	t.Helper()
	var out []byte
	var err error
	for range 50 {
		if out, err = exec.Command(args[0], args[1:]...).CombinedOutput(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
}

// Command returns a command that runs name with args as u (with u's
// groups only), from dir "/", with a minimal environment.
func (u *User) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "setpriv", append([]string{
		"--reuid=" + strconv.Itoa(int(u.UID)), "--regid=" + strconv.Itoa(int(u.GID)), "--init-groups", "--", name}, args...)...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	return cmd
}

// Sh runs a bash script as u and returns its combined output and error.
func (u *User) Sh(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := u.Command(ctx, "bash", "-c", script).CombinedOutput()
	return string(out), err
}

// Traversable lets every user through the directories above path, up to
// but not including stop (t.TempDir makes them 0700), so that what the
// user is refused is refused by what the test looks at.
func Traversable(t testing.TB, path, stop string) {
	t.Helper()
	for d := path; d != stop && d != "/" && d != "."; d = parent(d) {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
			t.Fatal(err)
		}
	}
}

func parent(p string) string {
	i := strings.LastIndexByte(strings.TrimRight(p, "/"), '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
