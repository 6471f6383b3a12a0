package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/storage"
)

// adv32Log collects what the mount logs at Error and above, so that a
// test can tell a panic recovered by go-fuse (answered with EIO) from a
// plain error.
type adv32Log struct {
	mu   sync.Mutex
	errs []string
}

func (w *adv32Log) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }

func (w *adv32Log) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	w.mu.Lock()
	w.errs = append(w.errs, b.String())
	w.mu.Unlock()
	return nil
}
func (w *adv32Log) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *adv32Log) WithGroup(string) slog.Handler      { return w }

func (w *adv32Log) panics() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, e := range w.errs {
		if strings.Contains(e, "panic") {
			out = append(out, e)
		}
	}
	return out
}

// unmountOrDetach unmounts srv from mp, retrying for 10 s while the mount
// is busy, then detaches it lazily and fails the test.
func unmountOrDetach(t *testing.T, srv *Server, mp string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Unmount() != nil {
		if time.Now().After(deadline) {
			_ = fusetest.Unmount(mp, true)
			t.Errorf("unmount failed; detached lazily")
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adv32Mount opens a log with topic "t" (one partition, the given
// settings), mounts it and returns the mount point, the partition and
// the log. The mount is unmounted before the log closes; no panic may
// have been logged by then.
func adv32Mount(t *testing.T, defaults storage.Overrides, o Options) (string, *storage.Partition, *storage.Log, *Server) {
	t.Helper()
	fusetest.Require(t)
	l, err := storage.Open(t.TempDir(), storage.Options{Logger: quietLogger(), Defaults: defaults, RetentionCheckInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	h := &adv32Log{}
	o.Logger = slog.New(h)
	mp := t.TempDir()
	srv, err := Mount(mp, l, o)
	if errors.Is(err, ErrNoFUSE) {
		fusetest.Unusable(t, err.Error())
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		unmountOrDetach(t, srv, mp)
		require.Empty(t, h.panics(), "the mount panicked")
	})
	return mp, p, l, srv
}

func adv32Append(t *testing.T, p *storage.Partition, vs ...string) {
	t.Helper()
	var values [][]byte
	for _, v := range vs {
		values = append(values, []byte(v))
	}
	_, err := p.AppendValues(values)
	require.NoError(t, err)
}

func adv32Errno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// TestAdv32OffsetNames: names offset/ must refuse (ENOENT) and the forms
// of N it must take, with the bytes and the size of each.
func TestAdv32OffsetNames(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	adv32Append(t, p, "a", "b", "c")
	dir := filepath.Join(mp, "t", "0", "offset")
	for _, name := range []string{
		"-1", "+1", "1e0", "0x1", " 1", "1 ", "1.0", "", ".jsonl", "1.jsonl.jsonl",
		"1.JSONL", "4", "5", "9223372036854775807", "09223372036854775807",
		strings.Repeat("9", 30), "earliest.jsonl.jsonl",
		"Latest", "1\n", "1\t", "١", // an Arabic-Indic digit one
	} {
		if name == "" {
			continue
		}
		_, err := os.Stat(filepath.Join(dir, name))
		require.Equal(t, syscall.ENOENT, adv32Errno(err), "offset/%q: %v", name, err)
	}
	// Long names (FUSE takes up to 1024 bytes): far past the end.
	for _, k := range []int{255, 256, 1000} {
		_, err := os.Stat(filepath.Join(dir, strings.Repeat("9", k)))
		require.Equal(t, syscall.ENOENT, adv32Errno(err), "%d digits are past the end", k)
		_, err = os.Stat(filepath.Join(mp, "t", "0", "time", strings.Repeat("1", k)))
		require.Equal(t, syscall.ENOENT, adv32Errno(err), "%d digits are not a time", k)
	}

	for name, want := range map[string]string{
		"0": "a\nb\nc\n", "1": "b\nc\n", "001": "b\nc\n", "00000000000000000002": "c\n",
		"3": "", "earliest": "a\nb\nc\n", "latest": "", "2.jsonl": "",
	} {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		require.NoError(t, err, name)
		st, err := os.Stat(path)
		require.NoError(t, err, name)
		require.Equal(t, int64(len(b)), st.Size(), "offset/%s: st_size", name)
		if name != "2.jsonl" {
			require.Equal(t, want, string(b), name)
		} else {
			require.True(t, strings.HasPrefix(string(b), `{"offset":2,`), string(b))
		}
	}
}

// TestAdv32OffsetAppearsAfterAppend: offset/N past the end is ENOENT and
// appears as soon as the records are appended (a failed lookup is never
// cached); offset/end is an empty file that grows.
func TestAdv32OffsetAppearsAfterAppend(t *testing.T) {
	mp, _, _, _ := adv32Mount(t, nil, Options{})
	part := filepath.Join(mp, "t", "0")
	for i := 0; i < 3; i++ {
		_, err := os.Stat(filepath.Join(part, "offset", "2"))
		require.Equal(t, syscall.ENOENT, adv32Errno(err))
	}
	end, err := os.Open(filepath.Join(part, "offset", "0"))
	require.NoError(t, err)
	defer end.Close()
	require.NoError(t, os.WriteFile(filepath.Join(part, "append"), []byte("x\ny\nz\n"), 0))
	b, err := os.ReadFile(filepath.Join(part, "offset", "2"))
	require.NoError(t, err)
	require.Equal(t, "z\n", string(b))
	b, err = io.ReadAll(end)
	require.NoError(t, err)
	require.Equal(t, "x\ny\nz\n", string(b), "the file open while empty grew")
	st, err := end.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(6), st.Size())
}

// TestAdv32TimeNames: time/ names that cannot be a timestamp are ENOENT;
// the documented forms resolve to the right records.
func TestAdv32TimeNames(t *testing.T) {
	mp, _, _, _ := adv32Mount(t, nil, Options{})
	part := filepath.Join(mp, "t", "0")
	require.NoError(t, os.WriteFile(filepath.Join(part, "append.jsonl"), []byte(
		`{"value":"a","timestamp":1700000000000}`+"\n"+
			`{"value":"b","timestamp":1700000005000}`+"\n"+
			`{"value":"c","timestamp":1700000001000}`+"\n"+
			`{"value":"d","timestamp":1700000009000}`+"\n"), 0))
	dir := filepath.Join(part, "time")
	for _, name := range []string{
		"-1", "+1700000000", "1700000000.5", "1.7e9", "yesterday", "2024-13-01",
		"2024-10-10T25:00:00Z", "2024-10-10T12:00:00+24:00", "99999999999999999999",
		"1700000000.jsonl.jsonl", "2024-10-10 12:00:00",
	} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.Equal(t, syscall.ENOENT, adv32Errno(err), "time/%q: %v", name, err)
	}
	for name, want := range map[string]string{
		"0":                         "a\nb\nc\nd\n",
		"1700000000":                "a\nb\nc\nd\n",
		"1700000000001":             "b\nc\nd\n",
		"1700000003":                "b\nc\nd\n",
		"1700000006000":             "d\n",
		"2023-11-14T22:13:20Z":      "a\nb\nc\nd\n", // 1700000000
		"2023-11-14t22:13:21z":      "b\nc\nd\n",
		"2023-11-14T23:13:29+01:00": "d\n",
		"2023-11-14":                "a\nb\nc\nd\n",
		"0001-01-01":                "a\nb\nc\nd\n",
		"1700000010":                "",
		"9999-12-31T23:59:59Z":      "",
		"9223372036854775807":       "",
	} {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		require.NoError(t, err, name)
		require.Equal(t, want, string(b), "time/%s", name)
		st, err := os.Stat(path)
		require.NoError(t, err, name)
		require.Equal(t, int64(len(want)), st.Size(), "time/%s: st_size", name)
	}
}

// TestAdv32TimePendingOnEmpty: on an empty partition, time/T for a T
// before every record to come (a date in year 1, negative milliseconds)
// shows each record appended after the lookup.
func TestAdv32TimePendingOnEmpty(t *testing.T) {
	mp, _, _, _ := adv32Mount(t, nil, Options{})
	part := filepath.Join(mp, "t", "0")
	f, err := os.Open(filepath.Join(part, "time", "0001-01-01"))
	require.NoError(t, err)
	defer f.Close()
	g, err := os.Open(filepath.Join(part, "time", "4000000000000"))
	require.NoError(t, err)
	defer g.Close()
	require.NoError(t, os.WriteFile(filepath.Join(part, "append.jsonl"), []byte(
		`{"value":"old","timestamp":1000}`+"\n"+`{"value":"new","timestamp":4000000000001}`+"\n"+
			`{"value":"older","timestamp":5}`+"\n"), 0))
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, "old\nnew\nolder\n", string(b))
	b, err = io.ReadAll(g)
	require.NoError(t, err)
	require.Equal(t, "new\nolder\n", string(b), "from the first record stamped T or later on")
	st, err := g.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(len("new\nolder\n")), st.Size())
}

// TestAdv32Refusals: every change the tree does not allow, with the
// documented errno: EPERM for unlink, rmdir, rename, create, link,
// symlink, mknod, chmod, chown, truncate and utimes of what is not an
// append file; EACCES for opening a record or info file for writing.
func TestAdv32Refusals(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	adv32Append(t, p, "a", "b")
	part := filepath.Join(mp, "t", "0")
	rec := filepath.Join(part, "offset", "0")
	info := filepath.Join(part, "info")
	app := filepath.Join(part, "append")
	eperm := func(what string, err error) {
		t.Helper()
		require.Equal(t, syscall.EPERM, adv32Errno(err), "%s: %v", what, err)
	}
	eperm("unlink offset/0", os.Remove(rec))
	eperm("unlink append", os.Remove(app))
	eperm("unlink info", os.Remove(info))
	eperm("rmdir offset", unix.Rmdir(filepath.Join(part, "offset")))
	eperm("rmdir partition", unix.Rmdir(part))
	eperm("rmdir topic", unix.Rmdir(filepath.Join(mp, "t")))
	eperm("rename offset/0", os.Rename(rec, filepath.Join(part, "offset", "1")))
	eperm("rename offset/0 to a new name", os.Rename(rec, filepath.Join(part, "offset", "x")))
	eperm("rename append", os.Rename(app, filepath.Join(part, "append2")))
	eperm("rename topic", os.Rename(filepath.Join(mp, "t"), filepath.Join(mp, "u")))
	eperm("rename across partitions", os.Rename(rec, filepath.Join(mp, "t", "x")))
	eperm("rename exchange", unix.Renameat2(unix.AT_FDCWD, app, unix.AT_FDCWD, info, unix.RENAME_EXCHANGE))
	eperm("link", os.Link(rec, filepath.Join(part, "offset", "9")))
	eperm("link into the topic", os.Link(rec, filepath.Join(mp, "t", "r")))
	eperm("symlink", os.Symlink("0", filepath.Join(part, "offset", "s")))
	eperm("symlink in root", os.Symlink("t", filepath.Join(mp, "s")))
	eperm("mknod", unix.Mknod(filepath.Join(part, "offset", "7"), unix.S_IFREG|0o644, 0))
	eperm("mkfifo", unix.Mkfifo(filepath.Join(part, "fifo"), 0o644))
	_, err := os.OpenFile(filepath.Join(part, "offset", "new"), os.O_CREATE|os.O_WRONLY, 0o644)
	eperm("create", err)
	_, err = os.OpenFile(filepath.Join(mp, "t", "new"), os.O_CREATE|os.O_RDONLY, 0o644)
	eperm("create in a topic", err)
	eperm("truncate offset/0", os.Truncate(rec, 0))
	eperm("truncate offset/0 up", os.Truncate(rec, 100))
	eperm("truncate info", os.Truncate(info, 0))
	_, err = os.OpenFile(rec, os.O_RDONLY|os.O_TRUNC, 0)
	eperm("O_TRUNC offset/0", err)
	eperm("chmod offset/0", os.Chmod(rec, 0o666))
	eperm("chmod info", os.Chmod(info, 0o666))
	eperm("chmod append", os.Chmod(app, 0o666))
	eperm("chmod partition", os.Chmod(part, 0o777))
	eperm("chown offset/0", os.Chown(rec, 1, 1))
	eperm("chown append", os.Chown(app, 1, 1))
	eperm("utimes offset/0", os.Chtimes(rec, time.Unix(1, 0), time.Unix(1, 0)))
	for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND} {
		_, err = os.OpenFile(rec, flag, 0)
		require.Equal(t, syscall.EACCES, adv32Errno(err), "open offset/0 %#x: %v", flag, err)
		_, err = os.OpenFile(info, flag, 0)
		require.Equal(t, syscall.EACCES, adv32Errno(err), "open info %#x: %v", flag, err)
	}
	// The append file takes what > and touch send, and refuses the rest.
	require.NoError(t, os.Truncate(app, 0))
	require.NoError(t, os.Chtimes(app, time.Unix(1, 0), time.Unix(1, 0)))
	require.Equal(t, syscall.EINVAL, adv32Errno(os.Truncate(app, 5)))

	// Nothing changed.
	b, err := os.ReadFile(rec)
	require.NoError(t, err)
	require.Equal(t, "a\nb\n", string(b))
	ents, err := os.ReadDir(part)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"append", "append.jsonl", "info", "offset", "time"}, names)
	require.Equal(t, []string{"a", "b"}, values(t, p))
}

// envMmap32 makes the test binary a process of its own that maps the
// record file it names privately (read and write), copies the mapped
// bytes to the file envMmap32Out names, and writes to its private copy,
// which must never reach the record file.
const (
	envMmap32    = "LOGFS_TEST_MMAP32"
	envMmap32Out = "LOGFS_TEST_MMAP32_OUT"
)

func init() {
	if path := os.Getenv(envMmap32); path != "" {
		if err := mmapPrivate32(path, os.Getenv(envMmap32Out)); err != nil {
			fmt.Fprintln(os.Stderr, "mmap:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func mmapPrivate32(path, out string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, m, 0o644); err != nil {
		return err
	}
	m[0] = 'X' // private: never reaches the file
	return unix.Munmap(m)
}

// TestAdv32MmapAndSeek: a record file maps read-only with the bytes a
// read gives; a shared writable map is refused; SEEK_DATA/SEEK_HOLE
// follow the size; O_DIRECT reads give the same bytes.
func TestAdv32MmapAndSeek(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	var want bytes.Buffer
	var vs []string
	for i := 0; i < 2000; i++ {
		v := fmt.Sprintf("record-%d-%s", i, strings.Repeat("z", i%13))
		vs = append(vs, v)
		want.WriteString(v + "\n")
	}
	adv32Append(t, p, vs...)
	rec := filepath.Join(mp, "t", "0", "offset", "0")
	f, err := os.Open(rec)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(want.Len()), st.Size())

	_, err = unix.Mmap(int(f.Fd()), 0, want.Len(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.Equal(t, syscall.EACCES, adv32Errno(err), "a shared writable map of a read-only open")
	// The private map is made and read by a process of its own: a page
	// fault on a file of this process's own mount stops its thread where
	// the Go runtime cannot, and a garbage collection begun meanwhile waits
	// for it forever, the mount's goroutines that would answer the fault
	// stopped with the rest (go-fuse's "Deadlocks"; it hung CI once).
	mapped := filepath.Join(t.TempDir(), "mapped")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envMmap32+"="+rec, envMmap32Out+"="+mapped)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the mapping process: %s", out)
	inMap, err := os.ReadFile(mapped)
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), inMap)
	b, err := os.ReadFile(rec)
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), b)

	fd := int(f.Fd())
	off, err := unix.Seek(fd, 0, unix.SEEK_DATA)
	require.NoError(t, err)
	require.Equal(t, int64(0), off)
	off, err = unix.Seek(fd, 10, unix.SEEK_HOLE)
	require.NoError(t, err)
	require.Equal(t, int64(want.Len()), off)
	_, err = unix.Seek(fd, int64(want.Len())+1, unix.SEEK_DATA)
	require.Equal(t, syscall.ENXIO, adv32Errno(err))
	_, err = unix.Seek(fd, -1, io.SeekStart)
	require.Equal(t, syscall.EINVAL, adv32Errno(err))

	// pread: past the end, at the end, of zero bytes, at a negative offset.
	buf := make([]byte, 100)
	n, err := unix.Pread(fd, buf, int64(want.Len())+5000)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = unix.Pread(fd, buf, int64(want.Len()))
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = unix.Pread(fd, buf[:0], 10)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = unix.Pread(fd, buf, -1)
	require.Equal(t, syscall.EINVAL, adv32Errno(err))
	n, err = unix.Pread(fd, buf, int64(want.Len())-3)
	require.NoError(t, err)
	require.Equal(t, want.Bytes()[want.Len()-3:], buf[:n])

	// O_DIRECT: aligned reads reach the mount and give the same bytes.
	dfd, err := unix.Open(rec, unix.O_RDONLY|unix.O_DIRECT, 0)
	require.NoError(t, err)
	defer unix.Close(dfd)
	page := make([]byte, 3*4096+4096)
	al := page[4096-int(uintptr(unsafe.Pointer(&page[0]))%4096):][:3*4096]
	var got []byte
	for {
		n, err := unix.Read(dfd, al)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		got = append(got, al[:n]...)
	}
	require.Equal(t, want.Bytes(), got)
}

// TestAdv32AppendOddBytes: NULs, CRs and bytes that are not UTF-8 are
// kept as they are in values and shown base64 in .jsonl; a last line
// without a newline is appended at close.
func TestAdv32AppendOddBytes(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	part := filepath.Join(mp, "t", "0")
	f, err := os.OpenFile(filepath.Join(part, "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("a\x00b\n\xff\xfe\r\n\n"))
	require.NoError(t, err)
	_, err = f.Write([]byte("tail without newline"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	deadline := time.Now().Add(30 * time.Second)
	for p.EndOffset() < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	b, err := os.ReadFile(filepath.Join(part, "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, "a\x00b\n\xff\xfe\r\n\ntail without newline\n", string(b))
	j, err := os.ReadFile(filepath.Join(part, "offset", "0.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(j), "\n"), "\n")
	require.Len(t, lines, 4)
	require.Contains(t, lines[0], `"value":"a\u0000b"`)
	require.Contains(t, lines[1], `"value":{"base64":"//4N"}`)
	require.Contains(t, lines[2], `"value":""`)
	st, err := os.Stat(filepath.Join(part, "offset", "0.jsonl"))
	require.NoError(t, err)
	require.Equal(t, int64(len(j)), st.Size())
}

// TestAdv32AppendJSONLRefusals: lines append.jsonl must refuse fail their
// write with EINVAL and append nothing of it.
func TestAdv32AppendJSONLRefusals(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	path := filepath.Join(mp, "t", "0", "append.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	for _, line := range []string{
		`not json`, `null`, `{}`, `[]`, `"value"`, `{"value":"x"`, `{"value":"\ud800"}`,
		"{\"value\":\"\xff\"}", `{"value":"x","timestamp":"tomorrow"}`, `{"value":"x","timestamp":1.5}`,
		`{"value":"x","headers":7}`, `{"value":{"base64":"!!"}}`, `{"value":"x"} {"value":"y"}`,
	} {
		_, err := f.Write([]byte(`{"value":"ok"}` + "\n" + line + "\n"))
		require.Equal(t, syscall.EINVAL, adv32Errno(err), "%s: %v", line, err)
	}
	require.Zero(t, p.EndOffset(), "nothing of a refused write is appended")
	_, err = f.Write([]byte(`{"value":"fine","key":null}` + "\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"fine"}, values(t, p))
}

// TestAdv32AppendOversize: a line over max.message.bytes fails with EFBIG
// and no byte of it is appended, however it is split into writes; lines
// around it go in.
func TestAdv32AppendOversize(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, storage.Overrides{"max.message.bytes": 2000}, Options{})
	path := filepath.Join(mp, "t", "0", "append")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	big := strings.Repeat("B", 5000)
	_, err = f.Write([]byte("one\n" + big + "\n"))
	require.Equal(t, syscall.EFBIG, adv32Errno(err))
	// The same line in pieces.
	n, err := f.Write([]byte("two\n" + big[:1500]))
	require.NoError(t, err)
	require.Equal(t, 4+1500, n)
	_, err = f.Write([]byte(big[:1500]))
	require.Equal(t, syscall.EFBIG, adv32Errno(err))
	_, err = f.Write([]byte(big[:1500] + "\n"))
	require.Equal(t, syscall.EFBIG, adv32Errno(err))
	_, err = f.Write([]byte("three\n"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, []string{"two", "three"}, values(t, p))
	b, err := os.ReadFile(filepath.Join(mp, "t", "0", "offset", "0"))
	require.NoError(t, err)
	require.NotContains(t, string(b), "B")
}

// TestAdv32ConcurrentAppenders: writers on their own opens of one
// partition's append file, each writing lines split anywhere across
// writes: every line arrives exactly once and whole.
func TestAdv32ConcurrentAppenders(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	path := filepath.Join(mp, "t", "0", "append")
	const writers, lines = 4, 300
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				errs <- err
				return
			}
			var all bytes.Buffer
			for i := 0; i < lines; i++ {
				fmt.Fprintf(&all, "w%d-l%d-%s\n", w, i, strings.Repeat(string(rune('a'+w)), (i*7)%50))
			}
			data := all.Bytes()
			for k := 0; len(data) > 0; k++ {
				n := min(len(data), 1+(k*37+w*11)%97)
				if _, err := f.Write(data[:n]); err != nil {
					errs <- err
					f.Close()
					return
				}
				data = data[n:]
			}
			errs <- f.Close()
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := values(t, p)
	require.Len(t, got, writers*lines)
	seen := map[string]bool{}
	next := make([]int, writers)
	for _, v := range got {
		require.False(t, seen[v], "duplicate %q", v)
		seen[v] = true
		var w, i int
		_, err := fmt.Sscanf(v, "w%d-l%d-", &w, &i)
		require.NoError(t, err, v)
		require.Equal(t, fmt.Sprintf("w%d-l%d-%s", w, i, strings.Repeat(string(rune('a'+w)), (i*7)%50)), v, "torn line")
		require.Equal(t, next[w], i, "writer %d's lines in order", w)
		next[w]++
	}
}

// TestAdv32ManyOpens: thousands of opens of one record file held at once
// all read the right bytes, and closing them leaves no handle behind.
func TestAdv32ManyOpens(t *testing.T) {
	mp, p, _, srv := adv32Mount(t, nil, Options{})
	adv32Append(t, p, "a", "b", "c")
	rec := filepath.Join(mp, "t", "0", "offset", "1")
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i := 0; i < 3000; i++ {
		f, err := os.Open(rec)
		require.NoError(t, err)
		files = append(files, f)
	}
	buf := make([]byte, 16)
	for i, f := range files {
		if i%97 != 0 {
			continue
		}
		n, err := f.ReadAt(buf, 0)
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, "b\nc\n", string(buf[:n]))
	}
	for _, f := range files {
		require.NoError(t, f.Close())
	}
	files = nil
	ps := srv.fsys.partition(p)
	eventually32(t, "every handle released", func() bool {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		for _, n := range ps.records {
			n.hmu.Lock()
			k := len(n.handles)
			n.hmu.Unlock()
			if k != 0 {
				return false
			}
		}
		return true
	})
}

// TestAdv32OffsetDirListing: offset/ lists every segment base once, in
// order, plus earliest and latest, however many segments there are.
func TestAdv32OffsetDirListing(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, storage.Overrides{"segment.bytes": 200}, Options{})
	for i := 0; i < 400; i++ {
		adv32Append(t, p, fmt.Sprintf("value-%03d-%s", i, strings.Repeat("v", 60)), "second")
	}
	bases := p.SegmentBases()
	require.Greater(t, len(bases), 300)
	ents, err := os.ReadDir(filepath.Join(mp, "t", "0", "offset"))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{"earliest", "latest"}
	for _, b := range bases {
		want = append(want, fmt.Sprint(b))
	}
	require.ElementsMatch(t, want, names)
	require.Len(t, names, len(want), "no name twice")
	ents, err = os.ReadDir(filepath.Join(mp, "t", "0", "time"))
	require.NoError(t, err)
	require.Empty(t, ents)
	// A file from the middle: every record from there.
	b, err := os.ReadFile(filepath.Join(mp, "t", "0", "offset", fmt.Sprint(bases[200])))
	require.NoError(t, err)
	require.Equal(t, (len(bases)-200)*2, strings.Count(string(b), "\n"))
}

func eventually32(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
