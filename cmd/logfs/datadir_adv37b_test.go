package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDataDirBehindAClosedFolder: the data directory lies in a folder the
// user may not enter (root's, drwx------). Whether it exists or is still
// to be made, read-only or not, the one line names that folder, whose
// mode is the cause, not the data directory, which the user cannot even
// look at (adv37).
func TestDataDirBehindAClosedFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs logfs as user 65534, which needs root")
	}
	dir, bin := sharedBin(t, "logfs-closed-")
	closed := filepath.Join(dir, "closed")
	require.NoError(t, os.Mkdir(closed, 0o700))
	require.NoError(t, os.Chmod(closed, 0o700)) // whatever the umask
	data := filepath.Join(closed, "data")
	ok(t, dir, "", "topic", "create", "--data", data, "t")
	want := func(d string) string {
		return "data directory " + d + ": permission denied: you may not enter " + closed + ", which holds it (it belongs to root, mode drwx------)"
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"topic create, existing":   {args: []string{"topic", "create", "--data", data, "u"}, want: want(data)},
		"topic create, to be made": {args: []string{"topic", "create", "--data", filepath.Join(closed, "new"), "u"}, want: want(filepath.Join(closed, "new"))},
		"produce":                  {args: []string{"produce", "--data", data, "t"}, want: want(data)},
		"consume, read-only":       {args: []string{"consume", "--data", data, "--offset", "earliest", "t", "0"}, want: want(data)},
		"check, read-only":         {args: []string{"check", "--data", data}, want: want(data)},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Dir = dir
			cmd.Stdin = strings.NewReader("x\n")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			require.Error(t, err)
			requireOneLineError(t, result{out.String(), errOut.String(), cmd.ProcessState.ExitCode()}, exitFailure, tc.want, tc.args...)
		})
	}
	require.NoDirExists(t, filepath.Join(closed, "new"))
}
