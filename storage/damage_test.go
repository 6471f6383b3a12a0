package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// TestTruncatedTimeIndex: a sealed segment's .timeindex cut at an entry
// boundary is a structurally valid file that lost its final entry, so
// the segment's largest timestamp reads too low and a lookup by time
// skipped the segment (time/T started late). The final-entry rule finds
// it: Check reports it on a read-only log, lookups answer from the log,
// and a writable log rebuilds the file on first use.
func TestTruncatedTimeIndex(t *testing.T) {
	for _, readOnly := range []bool{true, false} {
		dir := t.TempDir()
		pdir := buildSegments(t, dir, 400)
		tix := layout.SegmentPath(pdir, 0, layout.TimeIndexSuffix)
		data, err := os.ReadFile(tix)
		require.NoError(t, err)
		require.Greater(t, len(data), 3*index.TimeEntrySize)
		require.NoError(t, os.WriteFile(tix, data[:len(data)-2*index.TimeEntrySize], 0o644))

		var logs logCounter
		l, err := Open(dir, Options{ReadOnly: readOnly, Logger: logs.logger(), RetentionCheckInterval: -1})
		require.NoError(t, err)
		p, err := l.Partition("t", 0)
		require.NoError(t, err)
		if readOnly {
			err := l.Check()
			require.ErrorIs(t, err, ErrCheck)
			require.ErrorContains(t, err, "last timestamp is not the segment's largest")
		}
		segs, err := p.Segments()
		require.NoError(t, err)
		next := segs[1].BaseOffset
		for off := record.Offset(0); off < next+5; off++ {
			got, err := p.OffsetForTime(1_700_000_000_000 + int64(off))
			require.NoError(t, err)
			require.Equal(t, off, got, "read-only=%v: time of offset %d", readOnly, off)
		}
		if !readOnly {
			require.NoError(t, l.Check())
			require.Equal(t, 1, logs.count("rebuilding it from the log"))
			got, err := os.ReadFile(tix)
			require.NoError(t, err)
			require.Equal(t, data, got, "rebuilt byte for byte")
		}
		require.NoError(t, l.Close())
	}
}

// badData reports whether err is one of the errors of bad bytes in a log.
func badData(err error) bool {
	return errors.Is(err, record.ErrCorrupt) || errors.Is(err, record.ErrTruncated) || errors.Is(err, record.ErrUnsupportedMagic) || errors.Is(err, record.ErrTooLarge)
}

// readView reads a whole view in reads of n bytes from the start: the
// bytes, and the error that stopped it (nil at io.EOF).
func readView(t *testing.T, v *View, n int) ([]byte, error) {
	t.Helper()
	var out []byte
	buf := make([]byte, n)
	for {
		k, err := v.ReadAt(buf, int64(len(out)))
		out = append(out, buf[:k]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if k == 0 {
			return out, fmt.Errorf("a read of 0 bytes and no error at %d", len(out))
		}
	}
}

// TestViewsStopAtBadBytes: a record file whose range holds a bad batch
// opens; its size stops where the bad batch starts and so do its reads,
// the read that reaches it fails with the batch's error (EIO through the
// mount), and files from an offset after it are whole. Both formats, both
// isolation levels, with and without the values sidecar, for a bad batch
// in the middle of a sealed segment and for junk after its last batch.
func TestViewsStopAtBadBytes(t *testing.T) {
	for _, damage := range []string{"flipped byte", "junk after the last batch"} {
		for _, sidecar := range []bool{true, false} {
			for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
				name := fmt.Sprintf("%s/sidecar=%v/%v", damage, sidecar, iso)
				t.Run(name, func(t *testing.T) { checkViewsStopAtBadBytes(t, damage, sidecar, iso) })
			}
		}
	}
}

func checkViewsStopAtBadBytes(t *testing.T, damage string, sidecar bool, iso Isolation) {
	dir := t.TempDir()
	pdir := buildSegments(t, dir, 400)
	l, err := Open(dir, Options{Isolation: iso, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	segs := p.segments()
	require.Greater(t, len(segs), 4)
	seg := segs[2]
	batches := batchesOf(t, seg, true)
	require.Greater(t, len(batches), 4)
	bad := batches[len(batches)/2]
	badFrom, resume := bad.BaseOffset, bad.NextOffset() // the records that go, and where they start again
	if damage == "junk after the last batch" {
		badFrom, resume = segs[3].base, segs[3].base
	}
	starts := []record.Offset{0, seg.base, badFrom - 1, badFrom, resume, resume + 1, segs[4].base, p.EndOffset() - 1}
	want := wantAroundBad(t, p, starts, badFrom, resume)
	require.NoError(t, l.Close())
	logPath := layout.SegmentPath(pdir, seg.base, layout.LogSuffix)
	switch damage {
	case "flipped byte":
		f, err := os.OpenFile(logPath, os.O_RDWR, 0)
		require.NoError(t, err)
		b := bad.Bytes[len(bad.Bytes)-3] ^ 0x40
		_, err = f.WriteAt([]byte{b}, int64(bad.Pos)+int64(len(bad.Bytes))-3)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	default:
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.Write([]byte(strings.Repeat("junk", 40)))
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	if !sidecar {
		views, _ := filepath.Glob(filepath.Join(pdir, "*"+layout.ViewIndexSuffix))
		for _, v := range views {
			require.NoError(t, os.Remove(v))
		}
	}
	l, err = Open(dir, Options{Isolation: iso, ReadOnly: true, Logger: testLogger(t)})
	require.NoError(t, err)
	defer l.Close()
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	for _, f := range []Format{Values, JSONL} {
		for _, n := range starts {
			v, err := p.NewView(f, n)
			require.NoError(t, err, "%v from %d", f, n)
			_, err = v.Size() // with the sidecar, it may count past bad bytes no read has met
			require.NoError(t, err, "%v from %d", f, n)
			got, rerr := readView(t, v, 1000)
			if n < resume {
				require.True(t, badData(rerr), "%v from %d: the read that reaches the bad batch fails with it: %v", f, n, rerr)
			} else {
				require.NoError(t, rerr, "%v from %d", f, n)
			}
			require.True(t, bytes.Equal(want[f][n], got), "%v from %d: %d bytes, want %d", f, n, len(got), len(want[f][n]))
			size2, err := v.Size()
			require.NoError(t, err)
			require.Equal(t, int64(len(want[f][n])), size2, "%v from %d: the size stops at the bad batch", f, n)
			require.NoError(t, v.Close())
		}
	}
}

// TestReadsAfterBadBytes: readers from an offset past a bad batch read to
// the end, in the same segment with no index entry between, on a
// read-only log indexed in memory as well as a writable one; readers from
// before it stop at it with its error.
func TestReadsAfterBadBytes(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		dir := t.TempDir()
		pdir := buildSegments(t, dir, 400)
		l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		p, err := l.Partition("t", 0)
		require.NoError(t, err)
		seg := p.segments()[2]
		batches := batchesOf(t, seg, true)
		bad := batches[len(batches)/2]
		want := readAll(t, p, 0)
		require.NoError(t, l.Close())
		f, err := os.OpenFile(layout.SegmentPath(pdir, seg.base, layout.LogSuffix), os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{bad.Bytes[len(bad.Bytes)-2] ^ 1}, int64(bad.Pos)+int64(len(bad.Bytes))-2)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		// No index entry between the bad batch and what follows: lookups
		// past it walk over it.
		require.NoError(t, os.WriteFile(layout.SegmentPath(pdir, seg.base, layout.IndexSuffix), nil, 0o644))

		l, err = Open(dir, Options{ReadOnly: readOnly, Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		p, err = l.Partition("t", 0)
		require.NoError(t, err)
		for _, from := range []record.Offset{bad.NextOffset(), bad.NextOffset() + 3} {
			got := readAll(t, p, from)
			require.Equal(t, want[from:], got, "read-only=%v from %d", readOnly, from)
		}
		r, err := p.NewReader(seg.base)
		require.NoError(t, err)
		n := 0
		for ; ; n++ {
			if _, err = r.Next(); err != nil {
				break
			}
		}
		require.True(t, badData(err), "%v", err)
		require.Equal(t, int(bad.BaseOffset-seg.base), n, "records before the bad batch")
		r.Close()
		_, err = p.NewReader(bad.BaseOffset)
		if err == nil {
			r, _ := p.NewReader(bad.BaseOffset)
			_, err = r.Next()
			r.Close()
		}
		require.True(t, badData(err), "a reader at the bad batch's own offset: %v", err)
		require.NoError(t, l.Close())
	}
}

// wantAroundBad returns, before the damage, what a view from each of
// starts must show once the records from badFrom to resume are bad, in
// both formats: the records up to the bad ones from a start before them,
// nothing from a start among them (the view stops at once), everything
// from a start after them.
func wantAroundBad(t *testing.T, p *Partition, starts []record.Offset, badFrom, resume record.Offset) map[Format]map[record.Offset][]byte {
	t.Helper()
	want := map[Format]map[record.Offset][]byte{}
	for _, f := range []Format{Values, JSONL} {
		want[f] = map[record.Offset][]byte{}
		for _, n := range starts {
			all := renderAll(t, p, f, n)
			switch {
			case n < badFrom:
				all = all[:len(all)-len(renderAll(t, p, f, badFrom))]
			case n < resume:
				all = nil
			}
			want[f][n] = all
		}
	}
	return want
}
