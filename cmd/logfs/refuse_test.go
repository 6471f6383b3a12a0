package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fuseenv"
	"github.com/logfs/logfs/internal/fusetest"
)

// TestMountRefusesBeforeTouchingData: a mount point that cannot be used is
// refused before the data directory is created, opened or recovered.
func TestMountRefusesBeforeTouchingData(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	require.NoError(t, os.MkdirAll(filepath.Join(full, "something"), 0o755))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for name, tc := range map[string]struct{ mountpoint, want string }{
		"not empty":       {full, "is not empty (it holds something)"},
		"not a directory": {file, "is not a directory"},
		"cannot be made":  {filepath.Join(file, "mnt"), "not a directory"},
		"relative, full":  {"full", "is not empty"},
		"already mounted": {"/proc", "is already a mount point"},
	} {
		t.Run(name, func(t *testing.T) {
			data := filepath.Join(dir, "data-"+strings.ReplaceAll(name, " ", "-"))
			fails(t, dir, exitFailure, tc.want, "mount", "--data", data, tc.mountpoint)
			require.NoDirExists(t, data)
		})
	}
}

// TestMountRefusesStaleWithoutRecovering kills a mount with SIGKILL, which
// leaves a stale mount point and a data directory that needs recovering,
// and mounts again on the same point: the command names the stale mount
// and does not recover (a torn tail planted in the log is still there).
func TestMountRefusesStaleWithoutRecovering(t *testing.T) {
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp, "--data", "data")
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	appendLine(t, filepath.Join(mp, "t", "0", "append"), "one\ntwo\n")
	f, err := os.Open(filepath.Join(mp, "t", "0", "append"))
	require.NoError(t, err)
	require.NoError(t, f.Sync()) // the records are on disk before the kill
	f.Close()
	require.NoError(t, m.cmd.Process.Kill())
	<-m.done
	var st syscall.Statfs_t // stat may still answer from cached attributes
	require.ErrorIs(t, syscall.Statfs(mp, &st), syscall.ENOTCONN, "a killed server leaves a stale mount")

	data := filepath.Join(dir, "data")
	log := filepath.Join(data, "t-0", "00000000000000000000.log")
	lf, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = lf.Write(bytes.Repeat([]byte{0xee}, 100)) // a torn tail recovery would cut
	require.NoError(t, err)
	require.NoError(t, lf.Close())
	before := snapshot(t, data)

	r := fails(t, dir, exitFailure, "is a stale FUSE mount", "mount", "--data", "data", mp)
	require.NotContains(t, r.stderr, "recover")
	require.Equal(t, before, snapshot(t, data), "the data directory changed")

	require.NoError(t, fusetest.Unmount(mp, true))
	// Once the stale mount is gone, the same command recovers and serves.
	m = startMount(t, dir, mp, "--data", "data")
	b, err := os.ReadFile(filepath.Join(mp, "t", "0", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\n", string(b))
}

// TestMountRefusesWithoutFUSE runs the mount as a user who may not open
// /dev/fuse: it says so in one line, with what to do, and creates nothing.
// It needs root (to run as another user) and a /dev/fuse closed to others;
// without fusermount3 it says that first (the fuse3 package), as no other
// user can mount then, and still creates nothing.
func TestMountRefusesWithoutFUSE(t *testing.T) {
	st, err := os.Stat("/dev/fuse")
	if err != nil || os.Geteuid() != 0 || st.Mode().Perm()&0o006 == 0o006 {
		t.Skip("needs root and a /dev/fuse that other users may not open")
	}
	dir, bin := sharedBin(t, "logfs-nofuse-")
	require.NoError(t, os.Chmod(dir, 0o777)) // the user creates its data directory there

	cmd := exec.Command(bin, "mount", filepath.Join(dir, "mnt"))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	require.Error(t, err)
	require.Equal(t, exitFailure, cmd.ProcessState.ExitCode(), out.String())
	line := strings.TrimSuffix(out.String(), "\n")
	require.NotContains(t, line, "\n", "one line")
	if fuseenv.Fusermount() == "" {
		// Without fusermount3 no other user can mount, whatever the
		// device's mode: that is what it says first.
		require.Contains(t, line, "no fusermount3 found")
		require.Contains(t, line, "apt-get install fuse3")
	} else {
		require.Contains(t, line, "may not open /dev/fuse")
		require.Contains(t, line, "chmod 0666 /dev/fuse")
	}
	require.NoDirExists(t, filepath.Join(dir, "logfs-data"))
	require.NoDirExists(t, filepath.Join(dir, "mnt"))
}

// TestFusermountStderrFolded: what fusermount3 prints when it fails ends
// up in the one error line; when it succeeds, it is passed on.
func TestFusermountStderrFolded(t *testing.T) {
	var errOut bytes.Buffer
	err := foldFusermountStderr(&errOut, func() error {
		fmt.Fprintln(os.Stderr, "/usr/bin/fusermount3: failed to open /dev/fuse: Permission denied")
		return fmt.Errorf("FUSE is not available: fusermount3 could not mount /mnt")
	})
	require.EqualError(t, err, "FUSE is not available: fusermount3 could not mount /mnt (fusermount3 said: /usr/bin/fusermount3: failed to open /dev/fuse: Permission denied)")
	require.Empty(t, errOut.String())

	err = foldFusermountStderr(&errOut, func() error {
		fmt.Fprintln(os.Stderr, "fusermount3: a warning")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "fusermount3: a warning\n", errOut.String())
	_, err = fmt.Fprint(os.Stderr, "") // os.Stderr is itself again
	require.NoError(t, err)
}

// snapshot is every file under dir with its size, mode, mtime and hash.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d %s", rel, fi.Mode(), fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
		if d.Type().IsRegular() {
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(c))
		}
		b.WriteByte('\n')
		return nil
	})
	require.NoError(t, err)
	return b.String()
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}
