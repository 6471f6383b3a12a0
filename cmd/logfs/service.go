package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"
)

// Running as a service: systemd's readiness protocol (Type=notify) and the
// handshake with a mount helper parent (see helper.go).

// envReadyFD names the descriptor a mount helper parent waits on: the
// mount writes "ready\n" there once it answers, after moving its stderr
// off the parent's pipe.
const envReadyFD = "LOGFS_MOUNT_READY_FD"

// fuseSuperMagic is statfs's f_type of a FUSE file system.
const fuseSuperMagic = 0x65735546

// mountAnswers checks that the mount at mp is up and served: statfs goes
// to the server and comes back as FUSE. (A stat of the mount point could
// be answered from the kernel's cache; statfs is not.)
func mountAnswers(mp string) error {
	var st unix.Statfs_t
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := unix.Statfs(mp, &st)
		if err == nil && st.Type == fuseSuperMagic {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("file system type %#x, not FUSE", st.Type)
			}
			return fmt.Errorf("the mount at %s does not answer: %w", mp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// announceReady tells whoever waits that the mount at mp answers: systemd
// (READY=1 and a STATUS line, when NOTIFY_SOCKET is set) and a mount helper
// parent (envReadyFD). It first checks that the mount answers.
func announceReady(mp, status string) error {
	if err := mountAnswers(mp); err != nil {
		return err
	}
	if err := sdNotify(daemon.SdNotifyReady + "\nSTATUS=" + status); err != nil {
		fmt.Fprintf(progressOut, "logfs mount: telling systemd the mount is ready: %v\n", err)
	}
	if s := os.Getenv(envReadyFD); s != "" {
		os.Unsetenv(envReadyFD)
		fd, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%s=%q: not a descriptor", envReadyFD, s)
		}
		// The parent leaves once it reads the line: stderr must not be
		// its pipe any more (a write to a closed pipe ends a Go program).
		detachStderr()
		f := os.NewFile(uintptr(fd), "ready")
		_, err = f.WriteString("ready\n")
		f.Close()
		if err != nil {
			return fmt.Errorf("telling the mount helper the mount is ready: %w", err)
		}
	}
	return nil
}

// announceStopping tells systemd the mount is going down.
func announceStopping() {
	if err := sdNotify(daemon.SdNotifyStopping); err != nil {
		fmt.Fprintf(progressOut, "logfs mount: telling systemd the mount is stopping: %v\n", err)
	}
}

// announceStatus sends a STATUS line to systemd, and, as long work keeps
// going, more time to start (EXTEND_TIMEOUT_USEC): a recovery of a large
// data directory can take longer than TimeoutStartSec.
func announceStatus(status string, extend time.Duration) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return
	}
	msg := "STATUS=" + status
	if extend > 0 {
		msg += fmt.Sprintf("\nEXTEND_TIMEOUT_USEC=%d", extend.Microseconds())
	}
	sdNotify(msg)
}

// notifyTimeout bounds how long a message to systemd may wait.
const notifyTimeout = 3 * time.Second

// sdNotify sends state to systemd's NOTIFY_SOCKET, if there is one, as
// daemon.SdNotify does, but gives up after notifyTimeout: the socket is a
// datagram socket whose queue, when its reader does not read (a systemd
// that hangs, a NOTIFY_SOCKET inherited from something that never reads
// it), blocks a write for good, and with it the mount: never ready, deaf
// to SIGTERM before it is, and never closing the log as it stops.
func sdNotify(state string) error {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetWriteDeadline(time.Now().Add(notifyTimeout)); err != nil {
		return err
	}
	_, err = conn.Write([]byte(state))
	return err
}

// detachStderr points stderr at the journal when there is one (its
// stdout stream protocol), or else at /dev/null: a mount started by a mount
// helper has no terminal to say things on once the helper is gone.
func detachStderr() {
	if c, err := net.Dial("unix", "/run/systemd/journal/stdout"); err == nil {
		// identifier, unit id, priority (6: info), level prefix, and no
		// forwarding to syslog, kmsg or the console.
		if _, err := c.Write([]byte("logfs\n\n6\n0\n0\n0\n0\n")); err == nil {
			if f, err := c.(*net.UnixConn).File(); err == nil {
				unix.Dup2(int(f.Fd()), 2)
				f.Close()
				c.Close()
				return
			}
		}
		c.Close()
	}
	if f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		unix.Dup2(int(f.Fd()), 2)
		f.Close()
	}
}
