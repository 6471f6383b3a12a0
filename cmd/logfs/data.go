package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	mountfs "github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fuseenv"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

// defaultDataDir is where the data directory is when --data is not given.
const defaultDataDir = "./logfs-data"

// addDataFlag adds --data to a command that needs the data directory to
// exist (it only reads it, or writes into topics that must be there).
func addDataFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "data", defaultDataDir, "data directory")
}

// addCreatingDataFlag adds --data to a command that creates the data
// directory when it does not exist; when names what makes it so.
func addCreatingDataFlag(cmd *cobra.Command, dir *string, when string) {
	cmd.Flags().StringVar(dir, "data", defaultDataDir, "data directory (created "+when+")")
}

// addDebugFlag adds --debug to a command.
func addDebugFlag(cmd *cobra.Command, debug *bool) {
	cmd.Flags().BoolVar(debug, "debug", false, "log debug messages on stderr")
}

// newLogger logs to w from level on (Debug with --debug). Offline commands
// drop the time: their runs are short and the lines are read by people.
func newLogger(w io.Writer, level slog.Level, debug, withTime bool) *slog.Logger {
	if debug {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if !withTime {
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openLog opens the data directory for a command. A read-only open changes
// nothing, takes no lock and so works beside a running mount; it needs the
// directory to exist. A writable open creates it and fails while another
// process has it open for writing.
func openLog(dir string, o storage.Options) (*storage.Log, error) {
	if err := checkOutsideMount(dir); err != nil {
		return nil, err
	}
	if err := checkNotAboveDataDir(dir); err != nil {
		return nil, err
	}
	if o.ReadOnly {
		if err := checkDataDirExists(dir); err != nil {
			return nil, err
		}
		// Refused before anything in it is tried, which would log a
		// warning for each checkpoint it cannot read above the one line.
		if err := unix.Access(dir, unix.R_OK|unix.X_OK); errors.Is(err, unix.EACCES) {
			return nil, permissionError(dir, true, &fs.PathError{Op: "open", Path: dir, Err: err})
		}
		if err := checkIsDataDir(dir); err != nil {
			return nil, err
		}
	}
	if o.RecoveryProgress == nil {
		o.RecoveryProgress = recoveryProgress(progressOut)
	}
	if o.RetentionCheckInterval == 0 && !o.ReadOnly {
		// Offline commands run for moments; retention is the job of the
		// mount, which asks for it.
		o.RetentionCheckInterval = -1
	}
	l, err := storage.Open(dir, o)
	switch {
	case errors.Is(err, vfs.ErrLocked):
		return nil, fmt.Errorf("%v: write through the mount or stop it first%s", err, lockHolder(dir))
	case errors.Is(err, storage.ErrNotDataDir):
		return nil, errors.New(strings.TrimPrefix(err.Error(), storage.ErrNotDataDir.Error()+": "))
	case errors.Is(err, fs.ErrPermission):
		return nil, permissionError(dir, o.ReadOnly, err)
	case err != nil:
		return nil, fmt.Errorf("open data directory %s: %w", dir, err)
	}
	return l, nil
}

// openExistingLog opens dir for writing when it is already there: for
// commands that need something in it (a topic to produce to or delete, a
// log to repair), which would otherwise create a data directory on a
// mistyped --data and then fail.
func openExistingLog(dir string, o storage.Options) (*storage.Log, error) {
	if err := checkOutsideMount(dir); err != nil {
		return nil, err // what is wrong, rather than that it is not there
	}
	if err := checkDataDirExists(dir); err != nil {
		return nil, err
	}
	return openLog(dir, o)
}

// checkOutsideMount refuses a data directory inside a logfs mount.
func checkOutsideMount(dir string) error {
	if mp, source, ok := mountfs.InsideMount(dir); ok {
		return fmt.Errorf("data directory %s is inside the logfs mount at %s (of %s): give a directory outside any mount, such as the one that mount serves", dir, mp, strings.TrimPrefix(source, "logfs:"))
	}
	return nil
}

// checkDataDirExists fails unless dir is a directory: a read-only open
// needs one.
func checkDataDirExists(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("data directory %s does not exist (create a topic first, or give --data)", dir)
	} else if err != nil {
		if cerr := closedFolderError(dir); cerr != nil {
			return cerr
		}
		return err
	} else if !st.IsDir() {
		return fmt.Errorf("data directory %s is not a directory", dir)
	}
	return nil
}

// permissionError says what of dir this user may not open, and who owns
// it: the directory itself, or when that is open to the user a file in it
// (err's path: a segment of root's in a directory all may read), or when
// dir is still to be made, the folder it would be made in.
func permissionError(dir string, readOnly bool, err error) error {
	need, access := "write to", uint32(unix.W_OK|unix.X_OK)
	if readOnly {
		need, access = "read", unix.R_OK|unix.X_OK
	}
	if cerr := closedFolderError(dir); cerr != nil {
		return cerr
	}
	if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
		parent := existingAncestor(dir)
		return fmt.Errorf("data directory %s: permission denied: you may not create it in %s%s; give one in a folder of your own (README: Security)", dir, parent, ownedBy(parent, "which"))
	}
	what, path := "it", dir
	var pe *fs.PathError
	if unix.Access(dir, access) == nil && errors.As(err, &pe) && isBelow(resolvedPath(pe.Path), resolvedPath(dir)) {
		what, path = pe.Path, pe.Path
	}
	return fmt.Errorf("data directory %s: permission denied: you may not %s %s%s; run as its owner, or have it shared with you (README: Security)", dir, need, what, ownedBy(path, "it"))
}

// closedFolderError names the folder above dir that this user may not
// enter, when there is one: dir cannot even be looked at then, whether it
// exists or not, and that folder's mode is the cause. It is nil otherwise.
func closedFolderError(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(abs); !errors.Is(err, fs.ErrPermission) {
		return nil
	}
	var above []string
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		above = append(above, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i := len(above) - 1; i >= 0; i-- { // from / down
		switch err := unix.Access(above[i], unix.X_OK); {
		case errors.Is(err, unix.EACCES):
			return fmt.Errorf("data directory %s: permission denied: you may not enter %s, which holds it%s; run as its owner, or have it shared with you (README: Security)", dir, above[i], ownedBy(above[i], "it"))
		case err != nil:
			return nil
		}
	}
	return nil
}

// ownedBy is " (it belongs to root, mode drwx------)", with pronoun for
// it, or "" when p cannot be looked at.
func ownedBy(p, pronoun string) string {
	st, err := os.Stat(p)
	if err != nil {
		return ""
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (%s belongs to %s, mode %v)", pronoun, fuseenv.UserName(sys.Uid), st.Mode())
}

// existingAncestor is the nearest folder above p that exists.
func existingAncestor(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Dir(p)
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			return d
		}
	}
}

// closeLog closes l and joins its error to err: a failed close must fail
// the command, since the clean-shutdown marker was not written.
func closeLog(l *storage.Log, err error) error {
	if cerr := l.Close(); cerr != nil {
		return errors.Join(err, fmt.Errorf("close data directory %s: %w", l.Dir(), cerr))
	}
	return err
}

// checkTopic validates a topic name from the command line.
func checkTopic(name string) error {
	if err := layout.ValidateTopic(name); err != nil {
		return usageErrorf("invalid topic name %q: a topic name is 1 to 249 characters from a-z A-Z 0-9 . _ - and not \".\" or \"..\"", name)
	}
	return nil
}

// parsePartition reads a partition number from the command line.
func parsePartition(s string) (int, error) {
	id, err := layout.ParsePartition(s)
	if err != nil {
		return 0, usageErrorf("invalid partition %q: want a number such as 0", s)
	}
	return id, nil
}

// findPartition returns a partition, saying which part does not exist.
func findPartition(l *storage.Log, topic string, id int) (*storage.Partition, error) {
	t, err := l.Topic(topic)
	if err != nil {
		return nil, fmt.Errorf("no topic %q in %s (logfs topic list shows the topics)", topic, l.Dir())
	}
	p, err := t.Partition(id)
	if err != nil {
		return nil, fmt.Errorf("topic %q has no partition %d (it has %s)", topic, id, partitionList(t))
	}
	return p, nil
}

func partitionList(t *storage.Topic) string {
	ps := t.Partitions()
	if len(ps) == 0 {
		return "none"
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = strconv.Itoa(p.ID())
	}
	if len(ids) > 8 {
		ids = append(ids[:3], "…", ids[len(ids)-1])
	}
	return "partition" + plural(len(ps)) + " " + strings.Join(ids, ", ")
}

// lockHolder names the process that holds dir's lock, or its .lock's (a
// Kafka broker's), from /proc/locks: " (held by pid N: its command line)",
// or "" when it cannot be told (another pid namespace, no /proc). A mount
// started by the helper or by systemd runs where nobody sees it; its
// command line says where it is mounted.
func lockHolder(dir string) string {
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	for _, name := range []string{dir, filepath.Join(dir, layout.LockFile)} {
		var st unix.Stat_t
		if unix.Stat(name, &st) != nil {
			continue
		}
		// 2: FLOCK  ADVISORY  WRITE 5000 fe:00:9986049 0 EOF
		id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
		for _, line := range strings.Split(string(locks), "\n") {
			f := strings.Fields(line)
			if len(f) < 6 || f[5] != id || f[1] == "->" {
				continue
			}
			pid, err := strconv.Atoi(f[4])
			if err != nil || pid <= 0 || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil {
				continue
			}
			args := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
			if r := []rune(args); len(r) > 200 {
				args = string(r[:200]) + "…"
			}
			return fmt.Sprintf(" (held by pid %d: %s)", pid, args)
		}
	}
	return ""
}
