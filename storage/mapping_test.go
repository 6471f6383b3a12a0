package storage

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// The active segment is mapped past its end: what is appended after a
// reader mapped it is read through the same mapping, by lookups and by a
// reader that follows.
func TestMappedActiveSegmentSeesAppends(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("index.interval.bytes=100"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	_, err = p.Append(values(10, "a"))
	require.NoError(t, err)
	r, err := p.NewReader(3)
	require.NoError(t, err)
	defer r.Close()
	active := p.segments()[0]
	m := active.mapped.Load()
	require.NotNil(t, m, "a lookup maps the segment")
	require.EqualValues(t, 1<<30, m.Len(), "out to segment.bytes")

	for i := 0; i < 50; i++ {
		_, err = p.Append(values(3, "b"))
		require.NoError(t, err)
	}
	require.Same(t, m, active.mapped.Load(), "no remap")
	n := 0
	for {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 7+150, n)
	for _, off := range []record.Offset{0, 9, 10, 100, 159} {
		require.NoError(t, r.Seek(off))
		rec, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, off, rec.Offset)
	}
}

// A segment's mapping goes with its last reference: retention deletes a
// segment a reader has mapped, and the mapping stays until the reader lets
// go.
func TestMappingGoesWithSegment(t *testing.T) {
	l, p := shortLivedPartition(t, func(int) string { return "v" })
	first := p.segments()[0]
	r, err := p.NewReader(1)
	require.NoError(t, err)
	require.NotNil(t, first.mapped.Load())
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	rec, err := r.Next()
	require.NoError(t, err, "the deleted segment is still read through its mapping")
	require.EqualValues(t, 1, rec.Offset)
	require.NotNil(t, first.mapped.Load())
	require.NoError(t, r.Close())
	// The partition's own reference goes when the delayed delete runs,
	// on a timer, which may be after the reader let go.
	require.Eventually(t, func() bool { return first.mapped.Load() == nil }, 10*time.Second, time.Millisecond,
		"unmapped with the last reference")
}

// newMappedLog writes a file of size patterned bytes and returns it behind
// a mappedLog whose mapping covers its first mapped bytes, and the bytes.
func newMappedLog(t *testing.T, size, mapped int) (*mappedLog, []byte) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "00000000000000000000.log")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(name, data, 0o644))
	f, err := vfs.Default.OpenFile(name, os.O_RDONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	lm, err := index.MapLog(f.(interface{ Fd() uintptr }).Fd(), name, int64(mapped))
	require.NoError(t, err)
	t.Cleanup(func() { lm.Close() })
	return &mappedLog{LogMap: lm, f: f}, data
}

// Bytes past the mapping (an active segment that grew beyond
// segment.bytes, as a broker with a larger setting can make it) are read
// with pread.
func TestMappedLogReadsPastMapping(t *testing.T) {
	m, data := newMappedLog(t, 3*4096, 4096)
	for _, c := range []struct{ off, n int }{{0, 100}, {4000, 96}, {4000, 97}, {4096, 5000}, {8000, 4288}} {
		got := make([]byte, c.n)
		n, err := m.ReadAt(got, int64(c.off))
		require.NoError(t, err, "%+v", c)
		require.Equal(t, c.n, n)
		require.Equal(t, data[c.off:c.off+c.n], got, "%+v", c)
	}
}

// A segment that is not an OS file (crashfs in tests) is read with pread.
func TestNoMappingWithoutFd(t *testing.T) {
	s := &segment{log: noLogFile("x.log"), cfg: &segmentConfig{segmentBytes: 1 << 20}}
	s.size.Store(100)
	require.Nil(t, s.mapping())
	require.True(t, s.noMap.Load())
	require.Equal(t, io.ReaderAt(s.log), s.reader())
}

// How far a lookup prefetches: to the interpolated start of the target's
// batch and an eighth of the span more, never past the next entry's
// header; the whole read span without a next entry.
func TestPrefetchSpan(t *testing.T) {
	sp := index.Span{Off: 100, Pos: 8000, NextOff: 200, NextPos: 16000}
	require.Equal(t, 0+1000+record.HeaderSize, prefetchSpan(sp, 100))
	require.Equal(t, 4000+1000+record.HeaderSize, prefetchSpan(sp, 150))
	require.Equal(t, 8000+record.HeaderSize, prefetchSpan(sp, 199), "capped at the next entry")
	require.Equal(t, 8000+record.HeaderSize, prefetchSpan(sp, 1<<40), "a target past the span")
	last := index.Span{Off: 100, Pos: 8000, NextPos: -1}
	require.Equal(t, readSpan(last), prefetchSpan(last, 150))
	require.Equal(t, lookupReadAhead, readSpan(last))
	require.Equal(t, 8000+spanSlack, readSpan(sp))
}

// A read larger than mappedReadMax goes to the file: the bytes are the
// same either way.
func TestMappedLogBigReads(t *testing.T) {
	m, data := newMappedLog(t, 2*mappedReadMax+100, 2*mappedReadMax+100)
	for _, n := range []int{mappedReadMax, mappedReadMax + 1, 2 * mappedReadMax} {
		got := make([]byte, n)
		k, err := m.ReadAt(got, 50)
		require.NoError(t, err)
		require.Equal(t, n, k)
		require.Equal(t, data[50:50+n], got)
	}
}

// mappedRSS returns how much of the mappings of path the process has in
// its page tables (Rss in /proc/self/smaps), in bytes.
func mappedRSS(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	var rss int64
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.Contains(f[0], "-") {
			in = f[len(f)-1] == path
			continue
		}
		if in && len(f) == 3 && f[0] == "Rss:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			rss += kb << 10
		}
	}
	return rss
}

// A sequential reader and a view read with pread once their reads grow:
// reading a whole segment leaves next to none of it mapped, where reading
// it through the mapping left all of it in the process's RSS.
func TestStreamingLeavesNothingMapped(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, _ := top.Partition(0)
	v := bytes.Repeat([]byte("x"), 1000)
	for i := 0; i < 32<<10; i++ {
		_, err := p.Append([]Record{{Value: v}})
		require.NoError(t, err)
	}
	seg := p.segments()[0]
	r, err := p.NewReader(4000) // a lookup: maps the segment
	require.NoError(t, err)
	defer r.Close()
	require.NotNil(t, seg.mapped.Load())
	for {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	view, err := p.NewView(Values, 0)
	require.NoError(t, err)
	defer view.Close()
	buf := make([]byte, 1<<20)
	for off := int64(0); ; {
		n, err := view.ReadAt(buf, off)
		off += int64(n)
		if errors.Is(err, io.EOF) || n == 0 {
			break
		}
		require.NoError(t, err)
	}
	size := seg.size.Load()
	require.Greater(t, size, int64(32<<20))
	// What the lookup and the reader's first reads touch through the
	// mapping is a few hundred KiB, but the kernel maps more than the
	// pages touched: 64 KiB around a fault, or a large folio of the page
	// cache whole. After other tests in the same process (under -race),
	// the lookup alone (one walk of 596 bytes) left 1.6-1.8 MB mapped in
	// some runs, and 80 KiB in others; two CI runs failed a 1 MiB bound
	// with 2.5 MB. A quarter of the segment allows a 2 MiB folio for
	// each place touched and still tells a read of all of it through the
	// mapping.
	rss := mappedRSS(t, seg.logPath())
	require.Less(t, rss, size/4, "%d of the segment's %d bytes left mapped", rss, size)
}

// A seek below a segment's base (a reader racing retention can land in
// the next segment) finds its first batch, instead of a prefetch of a
// negative length passing for a fault of the mapping.
func TestSeekBelowSegmentBase(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=2000", "index.interval.bytes=100"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 100; i++ {
		_, err := p.Append(values(1+i%3, "v"))
		require.NoError(t, err)
	}
	segs := p.segments()
	require.Greater(t, len(segs), 2)
	s := segs[1]
	require.True(t, s.acquire())
	defer s.release()
	var sc record.Scanner
	found, _, err := s.seek(&sc, s.base-5, readerScan)
	require.NoError(t, err)
	require.True(t, found)
	require.True(t, sc.Next())
	require.Equal(t, s.base, sc.Batch().BaseOffset)
	require.Equal(t, 0, prefetchSpan(index.Span{Off: 1000, Pos: 100, NextOff: 1050, NextPos: 4096}, 990)-record.HeaderSize-int(4096-100)/8,
		"a target below the span prefetches from its start")
}
