package fs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/logfs/logfs/internal/fuseenv"
	"github.com/logfs/logfs/storage"
)

// Defaults of Options.
const (
	// DefaultMaxWrite is the largest READ and WRITE request: 1 MiB, the
	// kernel's limit (256 pages), so that one write(2) of up to 1 MiB
	// reaches the append file as one request and lands in one batch, and
	// cat's reads (st_blksize) are one request each. Reads are answered
	// from memory (rendered records), never spliced, so the request does
	// not have to fit a 1 MiB pipe together with its header.
	DefaultMaxWrite = 1 << 20
	// DefaultEntryTimeout is how long the kernel may remember a name whose
	// meaning cannot change: a topic, a partition, its fixed files and
	// offset/N.
	DefaultEntryTimeout = time.Second
	// DefaultAttrTimeout bounds how stale cached attributes (st_size,
	// mtime) of a record file can be if an invalidation is missed; the
	// notifier normally refreshes them within NotifyInterval of an append.
	DefaultAttrTimeout = time.Second
	// DefaultNotifyInterval is the least time between two invalidations
	// of one partition's record files: appends in a burst share one.
	DefaultNotifyInterval = 20 * time.Millisecond
)

// Options configure a mount. The zero value mounts read-write with the
// defaults above.
type Options struct {
	// ReadOnly refuses every change with EROFS. It is implied by a log
	// opened read-only.
	ReadOnly bool
	// AllowOther lets other users than the one mounting into the mount
	// (needs user_allow_other in /etc/fuse.conf when not root), to do what
	// Share gives them. Without it the kernel refuses them everything.
	AllowOther bool
	// Share is the permission bits, within 0o077, that the group of the
	// nodes and all others get with AllowOther: 0o040 lets the group read
	// record files and info and list directories (0o050 with the x needed
	// to enter them), 0o020 lets it append and mkdir, 0o007 the same for
	// everyone. The owner, the user who mounts, gets every bit a node's
	// kind allows; zero shares nothing. The kernel enforces the modes
	// the nodes show (default_permissions).
	Share os.FileMode
	// Group is the group of the nodes; nil means the mounting process's.
	Group *uint32
	// Debug logs every FUSE request and reply (go-fuse's request log) at
	// slog.LevelInfo.
	Debug bool
	// Logger receives errors (each errno with its cause, once) and
	// diagnostics; nil means slog.Default().
	Logger *slog.Logger

	// MaxWrite is the largest read and write request in bytes; 0 means
	// DefaultMaxWrite. It is also st_blksize of record files when it is a
	// power of two (otherwise the largest power of two below it), so that
	// cat reads whole requests.
	MaxWrite int
	// EntryTimeout is how long the kernel caches stable names; 0 means
	// DefaultEntryTimeout, <0 means no caching. Names that resolve at
	// lookup time (offset/earliest, offset/latest, time/T) and names that
	// do not exist are never cached.
	EntryTimeout time.Duration
	// AttrTimeout is how long the kernel caches attributes; 0 means
	// DefaultAttrTimeout, <0 means no caching.
	AttrTimeout time.Duration
	// NotifyInterval is the least time between two invalidations of a
	// partition's record files; 0 means DefaultNotifyInterval.
	NotifyInterval time.Duration
	// MaxRecordNames bounds the names of record files (offset/N,
	// earliest, latest, time/T) the kernel holds, and so the nodes the
	// mount keeps for them: past it the oldest are dropped (see
	// nodecache.go). 0 means DefaultMaxRecordNames.
	MaxRecordNames int
	// FsName is shown as the source in mount(8) and df; "" means
	// "logfs:" followed by the data directory.
	FsName string
	// DirectIO serves record files with direct I/O (FOPEN_DIRECT_IO):
	// every read(2) reaches the server, and nothing of the record files is
	// kept in the kernel's page cache. By default they go through the page
	// cache, kept from one open to the next: a second read is as fast as
	// a plain file's and small reads are as cheap as a plain file's, but
	// the rendered records then take memory a second time (the kernel's).
	// Fresh either way: a record shows as soon as its append returned.
	// See doc.go for the numbers.
	DirectIO bool
	// Cluster, when set, mounts a Kafka cluster: the log given to Mount is
	// its local copy (see Cluster).
	Cluster Cluster
}

func (o Options) withDefaults(l *storage.Log) Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if l.ReadOnly() {
		o.ReadOnly = true
	}
	if o.MaxWrite <= 0 {
		o.MaxWrite = DefaultMaxWrite
	}
	o.EntryTimeout = timeout(o.EntryTimeout, DefaultEntryTimeout)
	o.AttrTimeout = timeout(o.AttrTimeout, DefaultAttrTimeout)
	if o.NotifyInterval <= 0 {
		o.NotifyInterval = DefaultNotifyInterval
	}
	if o.MaxRecordNames <= 0 {
		o.MaxRecordNames = DefaultMaxRecordNames
	}
	if o.FsName == "" {
		o.FsName = "logfs:" + l.Dir()
	}
	return o
}

func timeout(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Server is a mounted log.
type Server struct {
	fsys       *logFS
	srv        *fuse.Server
	mountpoint string
	// dev is the mount's device ("major:minor" in mountinfo), by which
	// Unmount finds it wherever it is now; "" if it could not be read.
	dev string
	// served closes when the kernel's connection has gone (an unmount, or
	// an abort): the device number is then free for anyone's next mount,
	// and a mount point that carries it is ours only if it is dead, which
	// attached holds, as it was then. done closes after the mount's own
	// shutdown, which may take a while (see Appending).
	served   chan struct{}
	attached []string // set before served closes
	done     chan struct{}
}

// Mount serves l at mountpoint, which must be an empty directory that is
// not already a mount point, and returns once the kernel has the mount.
// The caller keeps ownership of l: close it after Wait returns.
//
// As root it mounts with mount(2); otherwise it needs fusermount3. When
// neither works, or /dev/fuse is missing, the error wraps ErrNoFUSE and
// reads as one line for the user.
func Mount(mountpoint string, l *storage.Log, o Options) (*Server, error) {
	o = o.withDefaults(l)
	if err := checkFUSE(o.AllowOther); err != nil {
		return nil, err
	}
	mp, err := checkMountpoint(mountpoint)
	if err != nil {
		return nil, err
	}
	// The folder a symbolic link leads to: mount(2) follows links, but
	// fusermount3 refuses to mount on one ("not a directory or a regular
	// file"), and would unmount only by the name the kernel lists.
	mp = realPath(mp)
	if err := checkApart(mp, l.Dir()); err != nil {
		return nil, err
	}
	f := newLogFS(l, o)
	logLevel := slog.LevelWarn
	if o.Debug {
		logLevel = slog.LevelInfo
	}
	fuseLog := slog.NewLogLogger(o.Logger.Handler(), logLevel)
	mo := FUSEMountOptions(fuse.MountOptions{
		AllowOther:    o.AllowOther,
		Debug:         o.Debug,
		Logger:        fuseLog,
		FsName:        o.FsName,
		Name:          "logfs",
		DisableXAttrs: true,
		// The kernel checks every access against the modes the nodes
		// show, which say what the mount allows (see permMask).
		Options:      []string{"default_permissions"},
		PanicHandler: f.panicked,
	})
	mo.MaxWrite = o.MaxWrite
	if o.ReadOnly {
		// The kernel then refuses every write with EROFS before it looks
		// at the modes, which show no write bit.
		mo.Options = append(mo.Options, "ro")
	}
	if os.Geteuid() == 0 {
		// Root mounts with mount(2); fall back to fusermount3 only if
		// there is one (containers without CAP_SYS_ADMIN).
		mo.DirectMount = true
		mo.DirectMountStrict = fuseenv.Fusermount() == ""
	}
	opts := &gofs.Options{
		MountOptions: mo,
		Logger:       fuseLog,
		UID:          f.uid,
		GID:          f.gid,
		// A node that allows nothing (an append file on a read-only
		// mount) shows mode 0, not go-fuse's 0644.
		NullPermissions: true,
		// EntryTimeout, AttrTimeout and NegativeTimeout stay nil: every
		// node sets its own (see doc.go), and nothing caches ENOENT.
	}
	root := &rootNode{fixedDir: fixedDir{f}}
	srv, err := gofs.Mount(mp, root, opts)
	if err != nil {
		return nil, mountError(mp, err)
	}
	closeFUSEOnExec()
	if err := RaiseReadAhead(mp); err != nil {
		o.Logger.Debug("logfs: read-ahead window left at the kernel's default", "err", err)
	}
	s := &Server{fsys: f, srv: srv, mountpoint: mp, dev: mountDevice(mp), served: make(chan struct{}), done: make(chan struct{})}
	go func() {
		srv.Wait()
		s.attached = deadMountPoints(s.dev)
		close(s.served)
		f.shutdown()
		close(s.done)
	}()
	o.Logger.Debug("logfs: mounted", "mountpoint", mp, "data", l.Dir(), "read_only", o.ReadOnly)
	return s, nil
}

// Appending reports how many unfinished lines of closed append files
// (written without a newline) the mount is appending now. Locally that is
// quick; to a cluster that does not answer it takes up to
// delivery.timeout.ms, and a stopping mount waits for them: Unmount and
// Wait return after.
func (s *Server) Appending() int64 { return s.fsys.releasing.Load() }

// GiveUp makes the appends of unfinished lines under way fail at once,
// for a stopping mount that should not wait for a cluster that does not
// answer: each line lost is logged as an error (one already sent may
// still be appended). While the mount still serves (an unmount that
// fails as busy), lines closed later are appended as before; once its
// connection is gone, giving up is final: the lines the shutdown has yet
// to append (those whose RELEASE never came) fail at once too.
func (s *Server) GiveUp() { s.fsys.giveUpReleases() }

// Mountpoint returns the absolute path the log is mounted on.
func (s *Server) Mountpoint() string { return s.mountpoint }

// Wait returns when the file system is unmounted, by Unmount or by an
// external umount, and every background goroutine of the mount has
// stopped.
func (s *Server) Wait() { <-s.done }

// Unmount unmounts the file system and waits until it is served no more.
// It fails (EBUSY) while a process has a file of the mount open or its
// working directory in it; the mount then stays up.
//
// The mount is found by its device, not by the path it was mounted on: a
// mount point moved away (its parent folder renamed) is unmounted where it
// is now, and whatever was mounted at the old path since is left alone;
// bind mounts of it go too, or the mount would not end.
// A mount detached by `umount -l` has nothing left to unmount: that is
// ErrDetached, and Wait returns once its last open file is closed. One
// whose connection was aborted (umount -f of a busy mount) is over:
// Unmount waits for its shutdown and returns nil, and Attached says where
// it is left, dead.
func (s *Server) Unmount() error {
	select {
	case <-s.served:
		// Over already: its device may be another mount's by now.
		<-s.done
		return nil
	default:
	}
	points := []string{s.mountpoint}
	if s.dev != "" {
		var err error
		if points, err = mountPoints(s.dev); err != nil {
			return fmt.Errorf("logfs: unmount %s: %w", s.mountpoint, err)
		}
	}
	if len(points) == 0 {
		select {
		case <-s.served: // it ended meanwhile
			<-s.done
			return nil
		default:
			return ErrDetached
		}
	}
	if s.dev != "" {
		// An unmount by path takes the mount on top there, and statfs
		// reaches it: another program's, stacked on ours, would be
		// unmounted in its place, and ours waited for in vain.
		tops, err := topDevices()
		if err != nil {
			return fmt.Errorf("logfs: unmount %s: %w", s.mountpoint, err)
		}
		for _, p := range points {
			if tops[p] != s.dev {
				return fmt.Errorf("logfs: unmount %s: another mount is on top of it there; unmount that first (%w)", p, syscall.EBUSY)
			}
		}
	}
	for _, p := range points {
		if s.dev != "" && statfsFails(p, syscall.ENOTCONN) {
			// The connection is gone (umount -f of a busy mount, an
			// abort), though go-fuse may not have seen it yet: the
			// mount is dead, and stays attached while it is busy, which
			// no unmount changes. A device number is held by one mount
			// while it is attached, so a dead one of ours is this one.
			// It is over once its shutdown is; Attached names it.
			<-s.done
			return nil
		}
	}
	// go-fuse's own unmount, of the path it mounted, waits for the mount
	// to end, which bind mounts of it elsewhere hold off: those go first.
	own := false
	for _, p := range points {
		if p == s.mountpoint {
			own = true
		} else if err := unmountMoved(p); err != nil {
			return fmt.Errorf("logfs: unmount %s: %w", p, err)
		}
	}
	if own {
		if err := s.srv.Unmount(); err != nil {
			return fmt.Errorf("logfs: unmount %s: %w", s.mountpoint, fusermountErrno(err))
		}
	}
	<-s.done
	return nil
}

// fusermountErrno turns go-fuse's report of a failed `fusermount3 -u`
// ("/usr/bin/fusermount3: failed to unmount /mnt: Device or resource
// busy\n (code exit status 1)\n"), which is how every user but root
// unmounts, and root too when umount(2) failed and there is a
// fusermount3, into the errno umount(2) gives root, which the caller
// already names the mount point for. Other errors are returned as they
// are, on one line.
func fusermountErrno(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return err
	}
	msg := strings.TrimSpace(err.Error())
	if i := strings.LastIndex(msg, "(code "); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	for _, errno := range []syscall.Errno{syscall.EBUSY, syscall.EINVAL, syscall.EPERM, syscall.ENOENT} {
		if e := errno.Error(); len(msg) >= len(e) && strings.EqualFold(msg[len(msg)-len(e):], e) {
			return errno
		}
	}
	return errors.New(strings.Join(strings.Fields(msg), " "))
}

// Attached returns where the mount is still attached once it has ended:
// nowhere after an unmount, but where it was when the kernel aborted the
// connection without unmounting (umount -f of a busy mount, an abort
// through /sys/fs/fuse/connections), which leaves a dead mount there.
func (s *Server) Attached() []string {
	<-s.served
	return s.attached
}

// deadMountPoints returns where a mount of device dev is attached with its
// connection gone (statfs fails with ENOTCONN), as the kernel leaves one
// it aborted. Once our connection is gone, a live mount of dev is not
// ours: device numbers of FUSE mounts are reused by the next mount.
func deadMountPoints(dev string) []string {
	if dev == "" {
		return nil
	}
	points, _ := mountPoints(dev)
	var dead []string
	for _, p := range points {
		if statfsFails(p, syscall.ENOTCONN) {
			dead = append(dead, p)
		}
	}
	return dead
}

// statfsFails reports whether statfs of p fails with errno, asking for at
// most a second: p may be a live mount of someone else's server, which
// need not answer.
func statfsFails(p string, errno syscall.Errno) bool {
	res := make(chan error, 1)
	go func() {
		var st syscall.Statfs_t
		res <- syscall.Statfs(p, &st)
	}()
	select {
	case err := <-res:
		return errors.Is(err, errno)
	case <-time.After(time.Second):
		return false
	}
}

// unmountMoved unmounts the mount at p, one of ours that is not where
// go-fuse mounted it (moved there, or a bind mount), as go-fuse unmounts:
// umount(2) as root, else fusermount3, trying again a few times while the
// kernel may still be letting go of files just closed.
func unmountMoved(p string) error {
	var err error
	for try, delay := 0, time.Duration(0); try < 5; try++ {
		err = errors.New("not root, and no fusermount3 to unmount with")
		if os.Geteuid() == 0 {
			err = syscall.Unmount(p, 0)
		}
		if bin := fuseenv.Fusermount(); (os.Geteuid() != 0 || err != nil) && bin != "" {
			if out, ferr := exec.Command(bin, "-u", p).CombinedOutput(); ferr != nil {
				err = fmt.Errorf("%v: %s", ferr, strings.TrimSpace(string(out)))
			} else {
				err = nil
			}
		}
		if err == nil {
			return nil
		}
		delay = 2*delay + 5*time.Millisecond
		time.Sleep(delay)
	}
	return err
}

// mountDevice returns the device ("major:minor") of the mount at mp, the
// one on top if several are stacked there, or "" if there is none.
func mountDevice(mp string) string {
	real := realPath(mp)
	mounts, err := readMountinfo()
	if err != nil {
		return ""
	}
	dev := ""
	for _, m := range mounts {
		if m.point == real {
			dev = m.dev // later lines are mounted on top of earlier ones
			if !strings.HasPrefix(m.fstype, "fuse") {
				// Not a FUSE mount, so not ours (an automount point
				// under it, say): Unmount must never take such a
				// device's mounts for its own.
				dev = ""
			}
		}
	}
	return dev
}

// topDevices returns the device of the mount on top at each mount point
// (as mountinfo names them: real paths, not resolved again, which would
// ask the mounts there).
func topDevices() (map[string]string, error) {
	mounts, err := readMountinfo()
	if err != nil {
		return nil, err
	}
	tops := make(map[string]string, len(mounts))
	for _, m := range mounts {
		tops[m.point] = m.dev // later lines are mounted on top of earlier ones
	}
	return tops, nil
}

// mountPoints returns where the mount of device dev is attached in this
// mount namespace: none once it is detached, several with bind mounts of
// it. A FUSE device is never reused while its server still has it open.
func mountPoints(dev string) ([]string, error) {
	mounts, err := readMountinfo()
	if err != nil {
		return nil, err
	}
	var points []string
	for _, m := range mounts {
		if m.dev == dev {
			points = append(points, m.point)
		}
	}
	return points, nil
}

// panicked is go-fuse's PanicHandler: a bug in a node method fails that
// request with EIO and is logged with its stack; the mount stays up.
func (f *logFS) panicked(v any) fuse.Status {
	f.log.Error("logfs: panic in a FUSE operation", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return fuse.EIO
}

// mountError turns a failure of mount(2) or fusermount into one line.
func mountError(mp string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EPERM, syscall.EACCES:
			return fmt.Errorf("%w: mount %s: %v (mount as root, or install Debian's fuse3 package for fusermount3)", ErrNoFUSE, mp, errno)
		case syscall.ENODEV, syscall.ENXIO, syscall.ENOENT:
			return fmt.Errorf("%w: mount %s: %v (is the fuse kernel module loaded?)", ErrNoFUSE, mp, errno)
		}
	}
	if strings.HasPrefix(err.Error(), "fusermount exited") {
		// fusermount3 said why on stderr (see cmd/logfs, which folds that
		// into its one line); what is left here is only its exit status.
		return fmt.Errorf("%w: fusermount3 could not mount %s: %s", ErrNoFUSE, mp, fuseenv.FusermountAdvice)
	}
	return fmt.Errorf("logfs: mount %s: %s", mp, strings.TrimSpace(err.Error()))
}

// checkMountpoint returns the absolute mount point if it is an empty
// directory that nothing is mounted on.
func checkMountpoint(dir string) (string, error) {
	mp, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMountpoint, err)
	}
	stale := fmt.Errorf("%w: %s is a stale FUSE mount (its server died); run umount %s", ErrMountpoint, mp, mp)
	fi, err := os.Stat(mp)
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		return "", stale
	case err != nil:
		return "", fmt.Errorf("%w: %v", ErrMountpoint, err)
	case !fi.IsDir():
		return "", fmt.Errorf("%w: %s is not a directory", ErrMountpoint, mp)
	}
	// mountinfo names mount points by their real paths: a mount point given
	// through a symbolic link is looked up by the folder it leads to, or a
	// second mount there would be taken for none and stacked on the first.
	top, err := topMount(realPath(mp))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMountpoint, err)
	}
	if top == "autofs" {
		// An automount point (fstab's x-systemd.automount): systemd runs
		// the mount, so this one, on its first access, with autofs still
		// mounted here, to be mounted over. Reading the folder would wait
		// on the automount, which waits on this mount: it is not looked
		// into.
		return mp, nil
	}
	if top != "" {
		// A FUSE mount whose server died may still answer stat from
		// attributes the kernel cached (default_permissions checks
		// them without asking); statfs always asks the server.
		var st syscall.Statfs_t
		if err := syscall.Statfs(mp, &st); errors.Is(err, syscall.ENOTCONN) {
			return "", stale
		}
		return "", fmt.Errorf("%w: %s is already a mount point", ErrMountpoint, mp)
	}
	d, err := os.Open(mp)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMountpoint, err)
	}
	defer d.Close()
	if names, err := d.Readdirnames(1); err != io.EOF {
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrMountpoint, err)
		}
		return "", fmt.Errorf("%w: %s is not empty (it holds %s)", ErrMountpoint, mp, names[0])
	}
	return mp, nil
}

// topMount returns the file system type of what is mounted at mp, the
// last mounted if several are stacked there, or "" if mp is not listed as
// a mount point in /proc/self/mountinfo (which also catches bind mounts
// of the same file system, that comparing st_dev with the parent would
// miss).
func topMount(mp string) (string, error) {
	mounts, err := readMountinfo()
	if err != nil {
		return "", err
	}
	top := ""
	for _, m := range mounts {
		if m.point == mp {
			top = m.fstype // later lines are mounted on top of earlier ones
		}
	}
	return top, nil
}

// mountinfo is one line of /proc/self/mountinfo.
type mountinfo struct {
	dev, point, fstype, source string
}

// mountinfoPath is where readMountinfo reads; tests point it at a file of
// their own.
var mountinfoPath = "/proc/self/mountinfo"

func readMountinfo() ([]mountinfo, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountinfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		m := mountinfo{dev: fields[2], point: unescapeMountinfo(fields[4])}
		for i, f := range fields {
			if f == "-" && i+2 < len(fields) {
				m.fstype, m.source = fields[i+1], unescapeMountinfo(fields[i+2])
				break
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// InsideMount reports whether path, or where it would be created, lies in
// a logfs mount: it returns the mount point and what the mount serves
// (its source, "logfs:" and the data directory). A data directory there
// would be made of the mount's own topics.
func InsideMount(path string) (mountpoint, source string, ok bool) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", "", false
	}
	for { // the nearest part of the path that exists
		if _, err := os.Lstat(p); err == nil || filepath.Dir(p) == p {
			break
		}
		p = filepath.Dir(p)
	}
	p = realPath(p)
	mounts, err := readMountinfo()
	if err != nil {
		return "", "", false
	}
	var best mountinfo
	for _, m := range mounts {
		if (p == m.point || strings.HasPrefix(p, strings.TrimSuffix(m.point, "/")+"/")) && len(m.point) >= len(best.point) {
			best = m
		}
	}
	if best.fstype != "fuse.logfs" {
		return "", "", false
	}
	return best.point, best.source, true
}

// realPath is p with its symbolic links resolved, as mountinfo names
// mount points, or p itself if they cannot be.
func realPath(p string) string {
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return p
}

// checkApart refuses the real mount point mp when it is the data
// directory dir or lies inside it: a caller's own check of the names it
// was given may have seen a link lead elsewhere, then.
func checkApart(mp, dir string) error {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = realPath(abs)
	}
	if mp == dir || strings.HasPrefix(mp, strings.TrimSuffix(dir, "/")+"/") {
		return fmt.Errorf("%w: %s is inside the data directory %s", ErrMountpoint, mp, dir)
	}
	return nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of
// /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// closeFUSEOnExec marks the /dev/fuse descriptors of this process
// close-on-exec. go-fuse's direct mount opens the device without
// O_CLOEXEC, so every program the process starts afterwards (a shell, a
// test's cat) would inherit the connection.
func closeFUSEOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			syscall.CloseOnExec(fd)
		}
	}
}

// logFS is the state one mount shares between its nodes.
type logFS struct {
	l        *storage.Log
	c        Cluster // nil unless a cluster is mounted
	opts     Options
	log      *slog.Logger
	readOnly bool
	mounted  time.Time // mtime of the root and topic directories
	uid, gid uint32
	perm     uint32 // the permission bits nodes show, see permMask
	blksize  uint32

	mu     sync.Mutex
	parts  map[partKey]*partState // GUARDED_BY(mu)
	times  map[uint64]*timeNode   // GUARDED_BY(mu): time/T files not resolved at lookup, see timefile.go
	names  *nodeCache
	closed bool // GUARDED_BY(mu)

	partial atomic.Int64 // bytes of unfinished lines append handles hold, see PartialBudget

	// unfinished are the append handles holding an unfinished line, which
	// shutdown appends if no RELEASE did (see appendHandle.release).
	// Taken after appendHandle.mu, and alone.
	unfinishedMu sync.Mutex
	unfinished   map[*appendHandle]struct{} // GUARDED_BY(unfinishedMu); made on first use

	// releaseCtx is what unfinished lines are appended under (see
	// appendHandle.Release); Server.GiveUp ends it, for the appends under
	// way, and puts a new one in its place. releasing counts the appends
	// of unfinished lines under way; releases, the RELEASE appends to a
	// cluster running on goroutines of their own. Once stopped (the
	// connection is gone), a give-up leaves releaseCtx ended.
	releaseMu  sync.Mutex
	releaseCtx context.Context         // GUARDED_BY(releaseMu)
	giveUp     context.CancelCauseFunc // GUARDED_BY(releaseMu)
	stopped    bool                    // GUARDED_BY(releaseMu)
	releasing  atomic.Int64
	releases   sync.WaitGroup
}

type partKey struct {
	topic string
	id    int
}

func newLogFS(l *storage.Log, o Options) *logFS {
	bs := uint32(1)
	for bs*2 <= uint32(o.MaxWrite) {
		bs *= 2
	}
	gid := uint32(os.Getgid())
	if o.Group != nil {
		gid = *o.Group
	}
	f := &logFS{
		l:        l,
		c:        o.Cluster,
		opts:     o,
		log:      o.Logger,
		readOnly: o.ReadOnly,
		mounted:  time.Now(),
		uid:      uint32(os.Getuid()),
		gid:      gid,
		perm:     permMask(o),
		blksize:  bs,
		parts:    make(map[partKey]*partState),
		times:    make(map[uint64]*timeNode),
		names:    newNodeCache(o.MaxRecordNames),
	}
	f.releaseCtx, f.giveUp = context.WithCancelCause(context.Background())
	return f
}

// releaseContext is the context an unfinished line is appended under now.
func (f *logFS) releaseContext() context.Context {
	f.releaseMu.Lock()
	defer f.releaseMu.Unlock()
	return f.releaseCtx
}

// giveUpReleases ends the appends of unfinished lines under way; while
// the mount serves, those that start later run under a new context.
// Once it stopped, they fail too: the shutdown appends the lines left one
// after the other, and each would otherwise wait out a cluster that does
// not answer, to be given up in turn.
func (f *logFS) giveUpReleases() {
	f.releaseMu.Lock()
	defer f.releaseMu.Unlock()
	f.giveUp(errGaveUp)
	if !f.stopped {
		f.releaseCtx, f.giveUp = context.WithCancelCause(context.Background())
	}
}

// errGaveUp is why the appends of unfinished lines end when a stopping
// mount gives them up. It is storage.ErrClosed, so that a cluster stops
// waiting even for a batch it sent (see kafka.Cluster.Produce).
var errGaveUp = fmt.Errorf("%w: given up as the mount stops", storage.ErrClosed)

// partition returns the shared state of a partition, starting its
// notifier on first use.
func (f *logFS) partition(p *storage.Partition) *partState {
	k := partKey{p.Topic().Name(), p.ID()}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ps := f.parts[k]; ps != nil {
		return ps
	}
	ps := newPartState(f, p)
	f.parts[k] = ps
	if f.closed {
		ps.stopOnce.Do(func() { close(ps.stop) }) // unmounted meanwhile: notify nothing
	}
	go ps.run()
	return ps
}

// shutdown stops every notifier and releases the views the nodes hold.
// It runs once the server has stopped.
func (f *logFS) shutdown() {
	// The unfinished lines no RELEASE appended: the kernel sends RELEASE
	// after close(2) has returned and drops it unread when the mount goes
	// right then (the close that ends a mount detached by umount -l, an
	// umount just after a close). Their write(2) returned, so they are
	// appended now, as RELEASE would have; nothing is served any more.
	// First the RELEASEs that came, whose appends to a cluster run on.
	// From here on a give-up is final (see giveUpReleases).
	f.releaseMu.Lock()
	f.stopped = true
	f.releaseMu.Unlock()
	f.releases.Wait()
	f.unfinishedMu.Lock()
	left := make([]*appendHandle, 0, len(f.unfinished))
	for h := range f.unfinished {
		left = append(left, h)
	}
	f.unfinishedMu.Unlock()
	for _, h := range left {
		h.release(false)
	}
	f.mu.Lock()
	f.closed = true
	parts := make([]*partState, 0, len(f.parts))
	for _, ps := range f.parts {
		parts = append(parts, ps)
	}
	f.mu.Unlock()
	f.names.close()
	for _, ps := range parts {
		ps.close()
	}
}
