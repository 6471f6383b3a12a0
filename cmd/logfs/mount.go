package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	mountfs "github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

func init() { addCommand(newMountCommand) }

// mountArgs is what the command line asks mount for.
type mountArgs struct {
	dir        string
	readOnly   bool
	allowOther bool
	debug      bool
	options    []string
	// retentionCheck is log.retention.check.interval.ms, from -o.
	retentionCheck time.Duration
}

// retentionCheckProperty is the broker setting -o takes for how often
// retention runs, as Kafka names it.
const retentionCheckProperty = "log.retention.check.interval.ms"

// defaultRetentionCheck is Kafka's default for retentionCheckProperty.
const defaultRetentionCheck = 5 * time.Minute

func newMountCommand() *cobra.Command {
	var m mountArgs
	cmd := &cobra.Command{
		Use:   "mount [--data DIR] [--read-only] [--allow-other] [--debug] [-o key=value …] MOUNTPOINT",
		Short: "Mount the data directory as a filesystem (foreground)",
		Long: `Mount the data directory at MOUNTPOINT and serve it until Ctrl-C, SIGTERM
or 'umount MOUNTPOINT', which all unmount cleanly and close the log (the next
start then reads no log data). It runs in the foreground and says on stderr
when the mount is ready.

MOUNTPOINT must be an empty directory that nothing is mounted on; it is
created if it does not exist. The data directory is created on first use,
except with --read-only, which serves an existing one (a Kafka broker's data
directory, say) without changing a byte.

-o sets defaults for every topic that does not set its own, in Kafka's
property names (-o segment.bytes=1048576,retention.ms=-1; repeatable). It
also takes mount(8)'s ro, rw, allow_other and debug, and the broker setting
log.retention.check.interval.ms: how often retention deletes the segments
retention.ms and retention.bytes condemn (default 300000, 5 minutes; the
first run comes 30 s after the mount, or sooner with a shorter interval).

As root logfs mounts with mount(2); other users need fusermount3 (Debian's
fuse3 package).`,
		Example: `  logfs mount ./mnt
  logfs mount --data /srv/logfs -o retention.ms=86400000 /mnt/logfs
  logfs mount --read-only --data /var/lib/kafka/data /mnt/kafka`,
		Args: args("MOUNTPOINT"),
		RunE: func(cmd *cobra.Command, a []string) error {
			return mount(cmd, m, a[0])
		},
	}
	addDataFlag(cmd, &m.dir)
	addDebugFlag(cmd, &m.debug)
	cmd.Flags().BoolVar(&m.readOnly, "read-only", false, "serve without changing anything; writes fail with EROFS")
	cmd.Flags().BoolVar(&m.allowOther, "allow-other", false, "let other users use the mount (needs user_allow_other in /etc/fuse.conf unless root)")
	cmd.Flags().StringArrayVarP(&m.options, "option", "o", nil, "topic default `key=value` (Kafka property name), or ro, rw, allow_other, debug; comma-separated, repeatable")
	return cmd
}

// parseMountOptions applies -o: mount(8)'s flags and topic defaults.
func parseMountOptions(m *mountArgs) (storage.Overrides, error) {
	defaults := storage.Overrides{}
	m.retentionCheck = defaultRetentionCheck
	for _, list := range m.options {
		for _, o := range strings.Split(list, ",") {
			switch o = strings.TrimSpace(o); o {
			case "":
			case "ro":
				m.readOnly = true
			case "rw":
				m.readOnly = false
			case "allow_other":
				m.allowOther = true
			case "debug":
				m.debug = true
			default:
				if v, ok := strings.CutPrefix(o, retentionCheckProperty+"="); ok {
					ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					if err != nil || ms < 1 || ms > math.MaxInt64/int64(time.Millisecond) {
						return nil, usageErrorf("-o %s: want a number of milliseconds, at least 1", o)
					}
					m.retentionCheck = time.Duration(ms) * time.Millisecond
					continue
				}
				if err := defaults.SetPair(o); err != nil {
					return nil, usageErrorf("-o %s: %v", o, err)
				}
			}
		}
	}
	return defaults, nil
}

func mount(cmd *cobra.Command, m mountArgs, mountpoint string) error {
	defaults, err := parseMountOptions(&m)
	if err != nil {
		return err
	}
	// Refuse a bad mount point, or a machine where FUSE cannot work,
	// before the data directory is created or recovered.
	if err := mountfs.Preflight(mountpoint, m.allowOther); err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	// Until the mount is ready only warnings are logged, so that a failure
	// to start is one line, unless the data directory needs recovering:
	// then its progress is worth seeing. Afterwards, Info and up.
	var level slog.LevelVar
	level.Set(slog.LevelWarn)
	if st, err := os.Stat(m.dir); err == nil && st.IsDir() && !recovery.HasCleanShutdownMarker(vfs.Default, m.dir) {
		level.Set(slog.LevelInfo)
	}
	if m.debug {
		level.Set(slog.LevelDebug)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: &level}))
	l, err := openLog(m.dir, storage.Options{ReadOnly: m.readOnly, Defaults: defaults, Logger: logger,
		RetentionCheckInterval: m.retentionCheck})
	if err != nil {
		return err
	}
	if _, err := os.Stat(mountpoint); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(mountpoint, 0o755); err != nil {
			return closeLog(l, err)
		}
	}
	// From here on a signal unmounts instead of killing the process with
	// the mount still up: one that arrives while mounting, or the moment
	// the ready line is out, is handled once the mount is up.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	var srv *mountfs.Server
	err = foldFusermountStderr(stderr, func() (err error) {
		srv, err = mountfs.Mount(mountpoint, l, mountfs.Options{ReadOnly: m.readOnly, AllowOther: m.allowOther, Debug: m.debug, Logger: logger})
		return err
	})
	if err != nil {
		return closeLog(l, err)
	}
	mp, _ := filepath.Abs(mountpoint)
	mode := "read-write"
	if m.readOnly {
		mode = "read-only"
	}
	if !m.debug {
		level.Set(slog.LevelInfo)
	}
	// The line scripts and tests wait for.
	fmt.Fprintf(stderr, "logfs mount: ready: %s mounted at %s (%s); Ctrl-C or 'umount %s' unmounts\n", m.dir, mp, mode, mp)

	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	for unmounted := false; !unmounted; {
		select {
		case s := <-sig:
			logger.Info("unmounting", "signal", s.String(), "mountpoint", mp)
			if err := srv.Unmount(); err != nil {
				// Busy: a shell has its working directory in the mount, or
				// a file is open. Keep serving; the next signal tries again.
				fmt.Fprintf(stderr, "logfs mount: %s; still mounted: close what uses it and press Ctrl-C again\n", oneLine(err))
				continue
			}
			<-done
			unmounted = true
		case <-done: // umount from outside
			unmounted = true
		}
	}
	if err := closeLog(l, nil); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "logfs mount: unmounted %s; %s closed cleanly\n", mp, m.dir)
	return nil
}
