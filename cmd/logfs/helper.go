package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The mount helper: mount(8) runs /sbin/mount.fuse.logfs for
// `mount -t fuse.logfs DATA MOUNTPOINT -o …` and for fstab lines of type
// fuse.logfs, as
//
//	mount.fuse.logfs DATA MOUNTPOINT [-sfnv] [-o OPTIONS] [-t TYPE]
//
// and waits for it to return once the file system is mounted. logfs
// installed under that name (a symbolic link) starts `logfs mount --data
// DATA -o OPTIONS MOUNTPOINT` in the background, in a session of its own,
// and returns 0 once the mount answers, or the mount's own error line and
// status if it fails. Once it is up the mount's log goes to the journal
// when there is one (else nowhere); it runs until umount.

// isMountHelper says whether the command was started under a mount
// helper's name (mount.fuse.logfs, or any mount.* name).
func isMountHelper(argv0 string) bool {
	return strings.HasPrefix(filepath.Base(argv0), "mount.")
}

// helperArgs turns mount(8)'s arguments into logfs mount's. fake is -f:
// do everything but mount.
func helperArgs(args []string) (mountArgs []string, fake bool, err error) {
	var pos, opts []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 >= len(args) {
				return nil, false, fmt.Errorf("%s needs a value", a)
			}
			i++
			switch a {
			case "-o":
				opts = append(opts, args[i])
			case "-N":
				return nil, false, errors.New("-N (mount in another namespace) is not supported")
			}
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			opts = append(opts, a[2:])
		case strings.HasPrefix(a, "-") && len(a) > 1 && strings.Trim(a[1:], "sfnvi") == "":
			fake = fake || strings.Contains(a, "f")
		case strings.HasPrefix(a, "-"):
			return nil, false, fmt.Errorf("unknown flag %s", a)
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, false, fmt.Errorf("want DATA and MOUNTPOINT, got %d argument(s)", len(pos))
	}
	// A source written as mount.fuse3 takes one, TYPE#SOURCE, names the
	// data directory SOURCE: taken whole it was a folder "logfs#" made in
	// the caller's directory. mount(8) takes it for a relative path and
	// passes it on made absolute, as $PWD/logfs#SOURCE.
	data, mp := pos[0], pos[1]
	if i := strings.Index(data, "logfs#"); i == 0 || i > 0 && data[i-1] == '/' {
		data = data[i+len("logfs#"):]
	}
	if data == "" || mp == "" {
		return nil, false, errors.New("DATA and MOUNTPOINT must not be empty")
	}
	// The mount runs in / (see runMountHelper): paths relative to the
	// caller's folder are made absolute here.
	if data, err = filepath.Abs(data); err == nil {
		mp, err = filepath.Abs(mp)
	}
	if err != nil {
		return nil, false, err
	}
	mountArgs = []string{"mount", "--data", data}
	for _, o := range opts {
		mountArgs = append(mountArgs, "-o", o)
	}
	return append(mountArgs, mp), fake, nil
}

// runMountHelper is main for the mount helper.
func runMountHelper(name string, args []string, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "%s: %s\n", filepath.Base(name), fmt.Sprintf(format, a...))
		return code
	}
	margs, fake, err := helperArgs(args)
	if err != nil {
		return fail(exitUsage, "%v (usage: %s DATA MOUNTPOINT [-o OPTIONS])", err, filepath.Base(name))
	}
	if fake {
		// -f: everything but the mount, so the options are checked as
		// the mount would check them (`mount -fv` tries an fstab line).
		m := mountArgs{}
		for i := 0; i+1 < len(margs); i++ {
			if margs[i] == "-o" {
				m.options = append(m.options, margs[i+1])
			}
		}
		if _, err := parseMountOptions(&m); err != nil {
			return fail(exitUsage, "%s", oneLine(err))
		}
		return exitOK
	}
	self, err := os.Executable()
	if err != nil {
		return fail(exitFailure, "find the logfs binary: %v", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	cmd := exec.Command(self, margs...)
	cmd.Args[0] = "logfs"
	// In /, as daemons run: the caller's working directory, kept for the
	// life of the mount, would keep the file system it is on busy
	// ("target is busy" for its umount).
	cmd.Dir = "/"
	// The mount is no service: a NOTIFY_SOCKET in mount(8)'s environment
	// (mount run by some Type=notify service) is that service's, which
	// READY=1 or STOPPING=1 from the mount would tell it is ready or
	// stopping.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envReadyFD+"=3")
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives the helper and its terminal
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	if err := cmd.Start(); err != nil {
		return fail(exitFailure, "start logfs mount: %v", err)
	}
	readyW.Close()
	// What the mount says until it is ready (a warning about its options,
	// a recovery's progress and report, or why it failed) goes to the
	// caller as it comes: it is nowhere else, as the mount logs to the
	// journal only once it is ready. Its stderr leaves the pipe before the
	// ready line, so the pipe ends then.
	said := &countingWriter{w: stderr}
	copied := make(chan struct{})
	go func() {
		io.Copy(said, errPipe)
		close(copied)
	}()
	line, _ := bufio.NewReader(readyR).ReadString('\n')
	readyR.Close()
	if line == "ready\n" {
		select {
		case <-copied:
		case <-time.After(time.Second):
		}
		cmd.Process.Release()
		return exitOK
	}
	// The mount ended before it was ready: its error is on its stderr.
	<-copied
	werr := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(werr, &ee) && ee.ExitCode() > 0 {
		return ee.ExitCode()
	}
	if said.n == 0 {
		return fail(exitFailure, "logfs mount ended before the mount was ready: %v", werr)
	}
	return exitFailure
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}
