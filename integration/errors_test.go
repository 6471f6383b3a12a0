package integration

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// TestTooLarge: a record over max.message.bytes fails its write with
// EFBIG and appends nothing of that write.
func TestTooLarge(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "small", storage.Overrides{"max.message.bytes": 1000})
	mnt := mount(t, l, fs.Options{})
	app := filepath.Join(part(mnt, "small", 0), "append")

	f, err := os.OpenFile(app, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("fits\n" + strings.Repeat("x", 2000) + "\nalso fits\n"))
	require.ErrorIs(t, err, syscall.EFBIG)
	_, err = f.Write([]byte("next\n"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, record.Offset(1), p.EndOffset())
	require.Equal(t, "next\n", sh(t, "cat %s", q(filepath.Join(part(mnt, "small", 0), "offset", "0"))))

	// The shell sees the error; the long line is not half-appended.
	errOut := shFails(t, "head -c 5000 /dev/zero | tr '\\0' y >> %s", q(app))
	require.Contains(t, errOut, "File too large")
	require.Equal(t, record.Offset(1), p.EndOffset())
}

// TestReadOnly: every change is EROFS on a read-only mount, and on a mount
// of a log opened read-only.
func TestReadOnly(t *testing.T) {
	for name, readOnlyLog := range map[string]bool{"option": false, "log": true} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := storage.Open(dir, storage.Options{Logger: logger(t)})
			require.NoError(t, err)
			p := newPartition(t, l, "ro", nil)
			_, err = p.Append([]storage.Record{{Value: []byte("kept")}})
			require.NoError(t, err)
			require.NoError(t, l.Close())
			l = openLog(t, dir, storage.Options{ReadOnly: readOnlyLog})
			mnt := mount(t, l, fs.Options{ReadOnly: !readOnlyLog})
			dir = part(mnt, "ro", 0)
			require.Contains(t, shFails(t, "echo x >> %s", q(filepath.Join(dir, "append"))), "Read-only file system")
			_, err = os.OpenFile(filepath.Join(dir, "append.jsonl"), os.O_WRONLY, 0)
			require.ErrorIs(t, err, syscall.EROFS)
			require.ErrorIs(t, os.Mkdir(filepath.Join(mnt, "new"), 0o755), syscall.EROFS)
			require.ErrorIs(t, os.Mkdir(filepath.Join(mnt, "ro", "1"), 0o755), syscall.EROFS)
			require.ErrorIs(t, os.Remove(filepath.Join(dir, "info")), syscall.EROFS)
			require.Equal(t, "kept\n", sh(t, "cat %s", q(filepath.Join(dir, "offset", "0"))))
		})
	}
}

// TestNotFound: offsets outside the log, unknown topics and partitions,
// and names that are no offset or time are ENOENT, and not cached: an
// offset appears once it is appended.
func TestNotFound(t *testing.T) {
	l, _ := newLog(t, storage.Overrides{"segment.bytes": 4096, "retention.bytes": 8192})
	p := newPartition(t, l, "n", nil)
	fill(t, p, 400)
	_, err := l.EnforceRetention()
	require.NoError(t, err)
	start, end := p.StartOffset(), p.EndOffset()
	require.Greater(t, start, record.Offset(0))
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "n", 0)
	for _, name := range []string{
		"nope", "n/1", "n/x", "n/0/nope", "n/0/offset/0", "n/0/offset/" + itoa(start-1), "n/0/offset/" + itoa(end+1),
		"n/0/offset/abc", "n/0/time/never", "n/0/offset/latest.json",
	} {
		_, err := os.Stat(filepath.Join(mnt, name))
		require.ErrorIs(t, err, syscall.ENOENT, name)
	}
	require.Equal(t, line(399)+"\n", sh(t, "cat %s", q(filepath.Join(dir, "offset", itoa(start+(399-start))))))
	require.Equal(t, "", sh(t, "cat %s", q(filepath.Join(dir, "offset", itoa(end)))))

	// Not cached: offset end+1 exists as soon as it is appended.
	future := filepath.Join(dir, "offset", itoa(end+1))
	_, err = os.Stat(future)
	require.ErrorIs(t, err, syscall.ENOENT)
	sh(t, "printf 'a\\nb\\n' >> %s", q(filepath.Join(dir, "append")))
	require.Equal(t, "b\n", sh(t, "cat %s", q(future)))
	require.Equal(t, "a\nb\n", sh(t, "cat %s", q(filepath.Join(dir, "offset", itoa(end)))))
}

func itoa(o record.Offset) string { return strconv.FormatInt(int64(o), 10) }

// TestBadJSON: a line of append.jsonl that is not a record object fails
// its write with EINVAL and appends nothing of it.
func TestBadJSON(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "j", nil)
	mnt := mount(t, l, fs.Options{})
	app := filepath.Join(part(mnt, "j", 0), "append.jsonl")
	for _, bad := range []string{`{"value":"ok"}` + "\nnot json\n", `{"value":1}` + "\n", `{"unknown":"x"}` + "\n", `[1,2]` + "\n"} {
		f, err := os.OpenFile(app, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.Write([]byte(bad))
		require.ErrorIs(t, err, syscall.EINVAL, bad)
		require.NoError(t, f.Close())
	}
	require.Contains(t, shFails(t, "echo '{oops' >> %s", q(app)), "Invalid argument")
	require.Equal(t, record.Offset(0), p.EndOffset())
}

// TestNoSpace: a full disk fails the write with ENOSPC and leaves no
// partial record; the mount goes on once there is room.
func TestNoSpace(t *testing.T) {
	fusetest.Require(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	l := openLog(t, dir, storage.Options{Defaults: storage.Overrides{"segment.index.bytes": 4096}})
	p := newPartition(t, l, "full", nil)
	mnt := mount(t, l, fs.Options{})
	app := filepath.Join(part(mnt, "full", 0), "append")
	f, err := os.OpenFile(app, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	chunk := []byte(strings.Repeat(strings.Repeat("n", 99)+"\n", 1000)) // 100 KB, 1000 records
	var werr error
	for range 40 {
		if _, werr = f.Write(chunk); werr != nil {
			break
		}
	}
	require.ErrorIs(t, werr, syscall.ENOSPC)
	require.NoError(t, f.Close())
	end := p.EndOffset()
	require.Equal(t, record.Offset(0), end%1000, "whole writes only")
	require.NoError(t, p.Check())
	out, err := os.ReadFile(filepath.Join(part(mnt, "full", 0), "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, int(end)*100, len(out))
}

// TestFsync: after fsync(2) on the append file the records are durable;
// a copy of the data directory taken then holds them.
func TestFsync(t *testing.T) {
	l, data := newLog(t, storage.Overrides{"flush.ms": -1})
	p := newPartition(t, l, "d", nil)
	mnt := mount(t, l, fs.Options{})
	f, err := os.OpenFile(filepath.Join(part(mnt, "d", 0), "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("one\ntwo\n"))
	require.NoError(t, err)
	require.Less(t, p.RecoveryPoint(), record.Offset(2), "not flushed yet (flush.ms=-1)")
	require.NoError(t, f.Sync())
	require.Equal(t, record.Offset(2), p.RecoveryPoint())
	require.NoError(t, f.Close())

	copyDir := filepath.Join(t.TempDir(), "copy")
	sh(t, "cp -a %s %s", q(data), q(copyDir))
	os.Remove(filepath.Join(copyDir, layout.LockFile))
	l2 := openLog(t, copyDir, storage.Options{})
	p2, err := l2.Partition("d", 0)
	require.NoError(t, err)
	r, err := p2.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	var got []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, string(rec.Value))
	}
	require.Equal(t, []string{"one", "two"}, got)
}

// TestCorruptBatch: a corrupt batch in an old segment is EIO for the read
// that reaches it; the rest of the log and the mount go on.
func TestCorruptBatch(t *testing.T) {
	dir := t.TempDir()
	l, err := storage.Open(dir, storage.Options{Logger: logger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p := newPartition(t, l, "bad", storage.Overrides{"segment.bytes": 16 << 10})
	want := fill(t, p, 1000)
	bases := p.SegmentBases()
	require.Greater(t, len(bases), 3)
	require.NoError(t, l.Close())

	// Flip a byte in the middle of the second segment: its CRC fails.
	seg := layout.SegmentPath(filepath.Join(dir, layout.PartitionDirName("bad", 0)), bases[1], layout.LogSuffix)
	b, err := os.ReadFile(seg)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(seg, b, 0o644))

	l = openLog(t, dir, storage.Options{ReadOnly: true})
	mnt := mount(t, l, fs.Options{})
	off := filepath.Join(part(mnt, "bad", 0), "offset")
	got, err := os.ReadFile(filepath.Join(off, "0"))
	require.ErrorIs(t, err, syscall.EIO)
	require.True(t, strings.HasPrefix(want, string(got)), "what comes before the corrupt batch is right")
	require.Contains(t, shFails(t, "cat %s > /dev/null", q(filepath.Join(off, "0"))), "Input/output error")

	// The file's size stops where the bad batch starts and so do its
	// reads (#12.3). (offset/0's size came from the segment's view index
	// sidecar, written before the damage: it says more until a read meets
	// the bad batch; see docs/durability.md.)
	jgot, err := os.ReadFile(filepath.Join(off, "0.jsonl"))
	require.ErrorIs(t, err, syscall.EIO, "offset/0.jsonl opens, and the read that reaches the bad batch fails")
	// Through the page cache a read that reaches the bad batch fails
	// whole (see fs/records.go): what comes before it is served to a page
	// before it.
	p, err = l.Partition("bad", 0)
	require.NoError(t, err)
	r, err := p.NewReader(0)
	require.NoError(t, err)
	bad := 0 // the first offset of the bad batch
	for ; ; bad++ {
		if _, err := r.Next(); err != nil {
			break
		}
	}
	r.Close()
	require.Greater(t, bad, int(bases[1]))
	for _, g := range [][]byte{got, jgot} {
		require.LessOrEqual(t, strings.Count(string(g), "\n"), bad)
		require.GreaterOrEqual(t, strings.Count(string(g), "\n"), bad-4096/len(line(bad)))
	}
	st, err := os.Stat(filepath.Join(off, "0.jsonl"))
	require.NoError(t, err)
	jv, err := p.NewView(storage.JSONL, 0)
	require.NoError(t, err)
	jsize, err := jv.Size()
	require.NoError(t, err)
	jv.Close()
	// The kernel is told one byte more, so that it asks for the bytes at
	// the bad batch and gets EIO rather than an end of file.
	require.Equal(t, jsize+1, st.Size(), "offset/0.jsonl's size is what lies before the bad batch, and one byte")
	require.Less(t, jsize-int64(len(jgot)), int64(4096))
	// A file from the bad batch's first offset opens (its batch is
	// checked by the read, not the open) and its first read fails.
	g, err := os.ReadFile(filepath.Join(off, itoa(record.Offset(bad))))
	require.ErrorIs(t, err, syscall.EIO)
	require.Empty(t, g)
	// A file from an offset after the bad batch, in the same segment, is
	// whole; one from inside it is empty and its read fails.
	after := -1
	for n := bad + 1; n < int(bases[2]); n++ {
		g, err := os.ReadFile(filepath.Join(off, itoa(record.Offset(n))))
		if err != nil {
			require.ErrorIs(t, err, syscall.EIO)
			require.Empty(t, g)
			continue
		}
		require.Equal(t, want[strings.Index(want, line(n)+"\n"):], string(g))
		after = n
		break
	}
	require.Greater(t, after, bad, "some offset after the bad batch in its segment reads")

	// Later segments, listings and info still work.
	tail := want[strings.Index(want, line(int(bases[2]))+"\n"):]
	require.Equal(t, tail, sh(t, "cat %s", q(filepath.Join(off, itoa(bases[2])))))
	require.Contains(t, sh(t, "ls %s", q(off)), "earliest")
	require.Contains(t, sh(t, "cat %s", q(filepath.Join(part(mnt, "bad", 0), "info"))), "log_end_offset")
}

// TestMountpoints: Mount refuses a mount point that is not an empty
// directory or is mounted already; an external umount ends Wait.
func TestMountpoints(t *testing.T) {
	l, _ := newLog(t, nil)
	srv, mnt := mountServer(t, l, fs.Options{})
	_, err := fs.Mount(mnt, l, fs.Options{Logger: logger(t)})
	require.ErrorIs(t, err, fs.ErrMountpoint)
	require.Contains(t, err.Error(), "already a mount point")

	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o644))
	_, err = fs.Mount(full, l, fs.Options{Logger: logger(t)})
	require.ErrorIs(t, err, fs.ErrMountpoint)
	_, err = fs.Mount(filepath.Join(full, "x"), l, fs.Options{Logger: logger(t)})
	require.ErrorIs(t, err, fs.ErrMountpoint)
	_, err = fs.Mount(filepath.Join(full, "missing"), l, fs.Options{Logger: logger(t)})
	require.ErrorIs(t, err, fs.ErrMountpoint)

	// Programs started after the mount do not inherit its /dev/fuse.
	require.NotContains(t, sh(t, "ls -l /proc/self/fd/"), "/dev/fuse")

	sh(t, "umount %s", q(mnt))
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after umount")
	}
	require.NoError(t, srv.Unmount(), "unmounting an unmounted server is a no-op")
	require.NotContains(t, sh(t, "cat /proc/self/mounts"), mnt)
}

// TestHoleAfterRepair: in a data directory of logfs's own (it never
// compacts), the offsets repair cut out (a batch with a flipped byte) or
// set aside (a renamed segment) are a hole. A record file whose range
// holds the hole opens, its size and reads stop where the hole starts, the
// read that reaches it fails with EIO, a file from inside the hole fails,
// and files from an offset after it are whole (#12.3, #12.4).
func TestHoleAfterRepair(t *testing.T) {
	dir := t.TempDir()
	l, err := storage.Open(dir, storage.Options{Logger: logger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	over := storage.Overrides{"segment.bytes": 16 << 10}
	want := map[string]string{}
	bases := map[string][]record.Offset{}
	for _, topic := range []string{"cut", "aside"} {
		p := newPartition(t, l, topic, over)
		want[topic] = fill(t, p, 1000)
		bases[topic] = p.SegmentBases()
		require.Greater(t, len(bases[topic]), 3)
	}
	require.NoError(t, l.Close())
	cut := layout.SegmentPath(filepath.Join(dir, layout.PartitionDirName("cut", 0)), bases["cut"][1], layout.LogSuffix)
	b, err := os.ReadFile(cut)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(cut, b, 0o644))
	aside := layout.SegmentPath(filepath.Join(dir, layout.PartitionDirName("aside", 0)), bases["aside"][1], "")
	moved := layout.SegmentPath(filepath.Join(dir, layout.PartitionDirName("aside", 0)), bases["aside"][1]+3, "")
	for _, suf := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix} {
		require.NoError(t, os.Rename(aside+suf, moved+suf))
	}
	l, err = storage.Open(dir, storage.Options{ForceRecovery: true, Logger: logger(t), RetentionCheckInterval: -1}) // check --repair
	require.NoError(t, err)
	require.NoError(t, l.Close())

	l = openLog(t, dir, storage.Options{ReadOnly: true})
	mnt := mount(t, l, fs.Options{})
	for _, topic := range []string{"cut", "aside"} {
		p, err := l.Partition(topic, 0)
		require.NoError(t, err)
		// Where the hole starts and where records start again.
		r, err := p.NewReader(0)
		require.NoError(t, err)
		hole := 0
		for ; ; hole++ {
			if _, err = r.Next(); err != nil {
				break
			}
		}
		r.Close()
		require.ErrorIs(t, err, storage.ErrHole, topic)
		resume := hole + 1
		for ; resume < 1000; resume++ {
			if r, err := p.NewReader(record.Offset(resume)); err == nil {
				_, err = r.Next()
				r.Close()
				if err == nil {
					break
				}
			}
		}
		require.Less(t, resume, 1000, topic)
		if topic == "aside" {
			require.Equal(t, int(bases[topic][1]), hole)
			require.Equal(t, int(bases[topic][2]), resume)
		}
		at := func(n int) int { // where line(n) starts in want
			if n == 0 {
				return 0
			}
			return strings.Index(want[topic], "\n"+line(n)+"\n") + 1
		}
		before := want[topic][:at(hole)]

		off := filepath.Join(part(mnt, topic, 0), "offset")
		for _, from := range []int{0, hole - 1} {
			name := filepath.Join(off, itoa(record.Offset(from)))
			wantFrom := before[at(from):]
			st, err := os.Stat(name)
			require.NoError(t, err, "%s: offset/%d opens", topic, from)
			// One byte more than what lies before the hole, so that the
			// page cache asks for the bytes there and gets EIO.
			require.Equal(t, int64(len(wantFrom))+1, st.Size(), "%s: offset/%d's size stops at the hole", topic, from)
			got, err := os.ReadFile(name)
			require.ErrorIs(t, err, syscall.EIO, "%s: offset/%d: the read that reaches the hole", topic, from)
			require.True(t, strings.HasPrefix(wantFrom, string(got)), "%s: offset/%d: what comes before the hole is right", topic, from)
			require.Less(t, len(wantFrom)-len(got), 4096, "%s: offset/%d: all of it but the page the hole is in", topic, from)
			require.Contains(t, shFails(t, "cat %s > /dev/null", q(name)), "Input/output error")
		}
		_, err = os.ReadFile(filepath.Join(off, itoa(record.Offset(hole))))
		require.ErrorIs(t, err, syscall.EIO, "%s: a file from inside the hole", topic)
		for _, from := range []int{resume, resume + 1} {
			require.Equal(t, want[topic][at(from):], sh(t, "cat %s", q(filepath.Join(off, itoa(record.Offset(from))))), "%s: offset/%d is whole", topic, from)
		}
	}
}
