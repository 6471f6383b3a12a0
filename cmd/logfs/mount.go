package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	mountfs "github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

func init() { addCommand(newMountCommand) }

// mountArgs is what the command line asks mount for.
type mountArgs struct {
	dir        string
	readOnly   bool
	follow     bool // with readOnly: follow a broker still writing (storage.Options.Follow)
	allowOther bool
	debug      bool
	directIO   bool
	options    []string
	// retentionCheck is log.retention.check.interval.ms, from -o.
	retentionCheck time.Duration
	// umask and group are -o umask= and gid=: what the mount shares with
	// other users (with --allow-other), and the group the nodes show.
	umask *uint32
	group *uint32
	// cluster mounts a Kafka cluster instead (cluster.go).
	cluster clusterArgs
}

// retentionCheckProperty is the broker setting -o takes for how often
// retention runs, as Kafka names it.
const retentionCheckProperty = "log.retention.check.interval.ms"

// defaultRetentionCheck is Kafka's default for retentionCheckProperty.
const defaultRetentionCheck = 5 * time.Minute

func newMountCommand() *cobra.Command {
	var m mountArgs
	cmd := &cobra.Command{
		Use:   "mount [--data DIR] [--read-only [--follow]] [--allow-other] [--isolation-level L] [--debug] [-o key=value …] MOUNTPOINT",
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
also takes mount(8)'s ro, rw, allow_other, default_permissions (always on)
and debug, accepts and ignores the words fstab lines carry that mean
nothing here (noatime, relatime, nodev, nosuid, noexec, auto, noauto, user,
nofail, _netdev, defaults, x-*), takes direct_io (read record files with
direct I/O instead of through the page cache: every read then reaches
logfs, and nothing is cached twice), and takes the broker setting
log.retention.check.interval.ms: how often retention deletes the segments
retention.ms and retention.bytes condemn (default 300000, 5 minutes; the
first run comes 30 s after the mount, or sooner with a shorter interval).

With --bootstrap-server HOST:PORT[,HOST:PORT…] it mounts a live Kafka
cluster instead, with the same tree: appends produce (acks=all), record
files show what a consumer sees. What it reads is kept in a local copy,
in --data when given, else in ~/.cache/logfs/cluster-<cluster id>.
--command-config and -X take Kafka client properties (security.protocol,
sasl.mechanism, …).

The mount is private: only the user who mounts gets in. --allow-other lets
other users in, to do what the modes of the files allow, which the kernel
enforces. By default they allow nothing; -o umask= opens them as for any
file system (umask=022: everyone reads, only the owner appends and creates
topics; umask=027,gid=loggers: the group loggers reads; umask=007: the group
also appends and creates), and -o gid=GROUP sets the group the files show.

As root logfs mounts with mount(2); other users need fusermount3 (Debian's
fuse3 package).`,
		Example: `  logfs mount ./mnt
  logfs mount --data /srv/logfs -o retention.ms=86400000 /mnt/logfs
  logfs mount --read-only --data /var/lib/kafka/data /mnt/kafka
  logfs mount --allow-other -o umask=027,gid=loggers /mnt/logfs
  logfs mount --bootstrap-server kafka1:9092,kafka2:9092 /mnt/kafka`,
		Args: args("MOUNTPOINT"),
		RunE: func(cmd *cobra.Command, a []string) error {
			m.cluster.dataSet = cmd.Flags().Changed("data")
			return mount(cmd, m, a[0])
		},
	}
	addCreatingDataFlag(cmd, &m.dir, "on first use, unless --read-only")
	addClusterFlags(cmd, &m.cluster, true)
	addDebugFlag(cmd, &m.debug)
	cmd.Flags().BoolVar(&m.readOnly, "read-only", false, "serve without changing anything; writes fail with EROFS")
	cmd.Flags().BoolVar(&m.follow, "follow", false, "with --read-only: follow a Kafka broker still writing the data directory (new records, rolls, retention, compaction, truncation)")
	cmd.Flags().BoolVar(&m.allowOther, "allow-other", false, "let other users use the mount (needs user_allow_other in /etc/fuse.conf unless root)")
	cmd.Flags().StringArrayVarP(&m.options, "option", "o", nil, "topic default `key=value` (Kafka property name), or ro, rw, allow_other, default_permissions, umask=, gid=, debug, direct_io, log.retention.check.interval.ms=; fstab's words (noatime, nofail, _netdev, x-*, …) are taken and ignored; comma-separated, repeatable")
	return cmd
}

// parseMountOptions applies -o: mount(8)'s flags, the mount's own
// settings and topic defaults.
func parseMountOptions(m *mountArgs) (storage.Overrides, error) {
	defaults := storage.Overrides{}
	m.retentionCheck = defaultRetentionCheck
	// ro and rw are not "the last word wins", as in mount(8) (which hands a
	// helper only one of them): -o rw after --read-only or -o ro used to
	// make a mount meant to be read-only writable, of a broker's directory
	// say. Both at once are refused.
	flagRO, ro, rw := m.readOnly, false, false
	for _, list := range m.options {
		for _, o := range strings.Split(list, ",") {
			switch o = strings.TrimSpace(o); o {
			case "":
			case "ro":
				ro = true
			case "rw":
				rw = true
			case "allow_other":
				m.allowOther = true
			case "default_permissions": // always on
			case "debug":
				m.debug = true
			case "direct_io":
				m.directIO = true
			default:
				if ignoredMountOption(o) {
					continue
				}
				key, value, hasValue := strings.Cut(o, "=")
				if hint, ok := mountOptionHints[o]; ok {
					return nil, usageErrorf("-o %s: %s", o, hint)
				}
				if !hasValue {
					return nil, usageErrorf("-o %s: not an option logfs knows; %s", o, mountOptionsHelp())
				}
				if ok, err := m.setMountOption(key, strings.TrimSpace(value)); ok {
					if err != nil {
						return nil, usageErrorf("-o %s: %v", o, err)
					}
					continue
				}
				if err := defaults.SetPair(o); err != nil {
					return nil, usageErrorf("-o %s: %v", o, err)
				}
			}
		}
	}
	if rw && (ro || flagRO) {
		other := "-o ro"
		if flagRO {
			other = "--read-only"
		}
		return nil, usageErrorf("-o rw contradicts %s: give one of them, to say whether the mount is read-only", other)
	}
	m.readOnly = flagRO || ro
	return defaults, nil
}

// setMountOption applies one key=value of -o that is a setting of the
// mount rather than a topic default, and says whether it was one.
func (m *mountArgs) setMountOption(key, value string) (bool, error) {
	switch key {
	case retentionCheckProperty:
		ms, err := strconv.ParseInt(value, 10, 64)
		if err != nil || ms < 1 || ms > math.MaxInt64/int64(time.Millisecond) {
			return true, errors.New("want a number of milliseconds, at least 1")
		}
		m.retentionCheck = time.Duration(ms) * time.Millisecond
	case "umask":
		u, err := strconv.ParseUint(value, 8, 32)
		if err != nil || u > 0o777 {
			return true, errors.New("want octal permission bits to withhold, such as 022 or 027")
		}
		mask := uint32(u)
		m.umask = &mask
	case "gid":
		gid, err := lookupGroup(value)
		if err != nil {
			return true, err
		}
		m.group = &gid
	default:
		return false, nil
	}
	return true, nil
}

// lookupGroup takes a group name or number.
func lookupGroup(s string) (uint32, error) {
	g, err := user.LookupGroup(s)
	if err != nil {
		if g, err = user.LookupGroupId(s); err != nil {
			return 0, fmt.Errorf("no group %q", s)
		}
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("group %q has gid %q", s, g.Gid)
	}
	return uint32(gid), nil
}

// share is what -o umask= leaves to the group and others of what each
// node allows; nothing by default.
func (m *mountArgs) share() os.FileMode {
	if m.umask == nil {
		return 0
	}
	return os.FileMode(0o077 &^ *m.umask)
}

func mount(cmd *cobra.Command, m mountArgs, mountpoint string) error {
	// A stderr nobody reads any more (`logfs mount … 2>&1 | tee log` and
	// Ctrl-C, which ends tee too; a mount helper parent gone before the
	// mount is ready) must not kill the mount with SIGPIPE on its next
	// line, "unmounting" say, leaving a stale mount and a log to recover:
	// with SIGPIPE asked for, such a write fails with EPIPE instead. (Not
	// signal.Ignore, which fusermount3 would inherit.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if err := takeClusterOptions(&m); err != nil {
		return err
	}
	defaults, err := parseMountOptions(&m)
	if err != nil {
		return err
	}
	if m.follow && (!m.readOnly || m.cluster.enabled()) {
		return usageErrorf("--follow follows a broker's data directory: it needs --read-only and --data, not --bootstrap-server")
	}
	if m.umask != nil && !m.allowOther {
		fmt.Fprintf(cmd.ErrOrStderr(), "logfs mount: -o umask= shares nothing without --allow-other: only you can use the mount\n")
	}
	// Refuse a bad mount point, or a machine where FUSE cannot work,
	// before the data directory is created or recovered.
	if err := checkApart(m.dir, mountpoint); err != nil {
		return err
	}
	if m.readOnly {
		if err := checkDataDirExists(m.dir); err != nil {
			return err
		}
	}
	if err := mountfs.Preflight(mountpoint, m.allowOther); err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	// Until the mount is ready only warnings are logged, so that a failure
	// to start is one line, unless the data directory needs recovering:
	// then its progress is worth seeing. Afterwards, Info and up.
	var level slog.LevelVar
	level.Set(slog.LevelWarn)
	if st, err := os.Stat(m.dir); err == nil && st.IsDir() && !recovery.HasCleanShutdownMarker(vfs.Confined(m.dir, nil), m.dir) {
		level.Set(slog.LevelInfo)
	}
	if m.debug {
		level.Set(slog.LevelDebug)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: &level}))
	var l *storage.Log
	var cl *kafka.Cluster
	closeLog := closeLog
	source := m.dir
	if m.cluster.enabled() {
		if cl, err = openCluster(cmd.Context(), cmd, m.cluster, m.dir, logger); err != nil {
			return err
		}
		l, source = cl.Log(), "kafka://"+strings.Join(cl.Brokers(), ",")
		closeLog = func(_ *storage.Log, err error) error { return errors.Join(err, cl.Close()) }
	} else if iso, err := m.cluster.localIsolation(); err != nil {
		return err
	} else if l, err = openLog(m.dir, storage.Options{ReadOnly: m.readOnly, Follow: m.follow, Defaults: defaults, Logger: logger,
		RetentionCheckInterval: m.retentionCheck, Isolation: iso}); err != nil {
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
		srv, err = mountfs.Mount(mountpoint, l, mountfs.Options{ReadOnly: m.readOnly, AllowOther: m.allowOther, Debug: m.debug, Logger: logger,
			DirectIO: m.directIO, Share: m.share(), Group: m.group, Cluster: mountCluster(cl), FsName: "logfs:" + source})
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
	if m.follow {
		mode = "read-only, following"
	}
	if !m.debug {
		level.Set(slog.LevelInfo)
	}
	// systemd (Type=notify) and a mount helper parent learn it here, once
	// the mount answers; then the line scripts and tests wait for.
	if err := announceReady(mp, fmt.Sprintf("%s mounted at %s (%s)", source, mp, mode)); err != nil {
		srv.Unmount()
		srv.Wait()
		return closeLog(l, err)
	}
	fmt.Fprintf(stderr, "logfs mount: ready: %s mounted at %s (%s); Ctrl-C or 'umount %s' unmounts\n", source, mp, mode, mp)

	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	// Unmount runs beside the signals: an unfinished line of a closed
	// append file (written without a newline) is appended before the
	// mount ends, and to a cluster that does not answer that waits up to
	// delivery.timeout.ms. The wait is said once it is long, and another
	// signal gives the lines up.
	var unmounting chan error // while an Unmount runs
	var slow <-chan time.Time
	stopping, detached := false, false
	for unmounted := false; !unmounted; {
		select {
		case s := <-sig:
			if n := srv.Appending(); n > 0 && (unmounting != nil || stopping || detached) {
				fmt.Fprintf(stderr, "logfs mount: giving up %d unfinished line%s of closed append files; the errors that follow name them\n", n, plural(int(n)))
				srv.GiveUp()
				continue
			}
			if unmounting != nil || stopping {
				continue
			}
			logger.Info("unmounting", "signal", s.String(), "mountpoint", mp)
			unmounting = make(chan error, 1)
			go func() { unmounting <- srv.Unmount() }()
			slow = time.After(2 * time.Second)
		case err := <-unmounting:
			unmounting = nil
			if errors.Is(err, mountfs.ErrDetached) {
				// umount -l came first: the mount ends with its last open
				// file, and done says when.
				fmt.Fprintf(stderr, "logfs mount: %s was %s\n", mp, oneLine(err))
				detached = true
				continue
			} else if err != nil {
				// Busy: a shell has its working directory in the mount, or
				// a file is open. Keep serving; the next signal tries again.
				fmt.Fprintf(stderr, "logfs mount: %s; still mounted: close what uses it and press Ctrl-C again\n", oneLine(err))
				continue
			}
			if !stopping {
				announceStopping()
				stopping = true
			}
		case <-slow:
			// (Not when the unmount failed: the mount goes on serving.)
			if n := srv.Appending(); n > 0 && (unmounting != nil || stopping || detached) {
				what := "the unfinished line of a closed append file is appended (to a cluster, at most delivery.timeout.ms); Ctrl-C again gives it up"
				if n > 1 {
					what = fmt.Sprintf("the unfinished lines of %d closed append files are appended (to a cluster, at most delivery.timeout.ms); Ctrl-C again gives them up", n)
				}
				fmt.Fprintf(stderr, "logfs mount: stopping once %s\n", what)
			}
		case <-done: // unmounted, by us or from outside
			if !stopping {
				announceStopping()
				stopping = true
			}
			unmounted = true
		}
	}
	if err := closeLog(l, nil); err != nil {
		return err
	}
	if at := srv.Attached(); len(at) > 0 {
		// umount -f of a busy mount aborts it but leaves it attached.
		fmt.Fprintf(stderr, "logfs mount: the mount was aborted (umount -f?) and is still attached at %s: umount it; %s closed cleanly\n", strings.Join(at, ", "), l.Dir())
		return nil
	}
	fmt.Fprintf(stderr, "logfs mount: unmounted %s; %s closed cleanly\n", mp, l.Dir())
	return nil
}

// checkApart refuses a mount point that is the data directory, lies
// inside it or holds it. Mounted inside its data directory, the mount is
// in the way of everything that walks the directory (du, backups, chown
// -R); over it, it hides the directory; and either way the folder the
// mount would need empty was filled by the data directory's first open,
// so that the mount failed only after creating it, and every later try
// too.
func checkApart(dir, mountpoint string) error {
	d, mp := resolvedPath(dir), resolvedPath(mountpoint)
	switch {
	case d == mp:
		return fmt.Errorf("mount point %s is the data directory: mount it on an empty folder elsewhere", mountpoint)
	case isBelow(mp, d):
		return fmt.Errorf("mount point %s is inside the data directory %s: mount it on an empty folder outside it", mountpoint, dir)
	case isBelow(d, mp):
		return fmt.Errorf("data directory %s is inside the mount point %s, which the mount would hide: give one outside it", dir, mountpoint)
	}
	return nil
}

// resolvedPath is p made absolute, with the symbolic links of the part of
// it that exists resolved, so that two names of one folder are equal.
func resolvedPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for q := abs; ; q = filepath.Dir(q) {
		if real, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(real, rest)
		}
		if filepath.Dir(q) == q {
			return abs
		}
		rest = filepath.Join(filepath.Base(q), rest)
	}
}

// isBelow reports whether path p lies inside folder dir (both clean and
// absolute).
func isBelow(p, dir string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
