package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
)

// A view opens on batch headers where it can (viewopen_test.go): these
// tests damage the log around a view's start (a marker whose length
// swallows the next batch, one that claims the next batch's offsets, bad
// CRCs at and around the start, a lost durable end) and check that every
// view either shows exactly the records from its start or fails with the
// damage's error, in both isolations and formats, with and without a
// view index sidecar, and while appends go on.

// advHeaders lists the batch headers of a .log file, walked without
// checking CRCs.
func advHeaders(t *testing.T, path string) []record.Batch {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	var out []record.Batch
	sc := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{HeadersOnly: true})
	for sc.Next() {
		out = append(out, *sc.Batch())
	}
	require.NoError(t, sc.Err())
	return out
}

// advWriteAt writes b at pos of the file, behind every reader's back.
func advWriteAt(t *testing.T, path string, b []byte, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, pos)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// advOpen opens a data directory with no check at close (the tests damage
// it on purpose).
func advOpen(t *testing.T, dir string, o Options) *Log {
	t.Helper()
	o.Logger = testLogger(t)
	o.RetentionCheckInterval = -1
	l, err := Open(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// advReadView reads a whole view sequentially in pieces of n bytes: what
// it returns and the error that ended it (nil at io.EOF).
func advReadView(v *View, n int) ([]byte, error) {
	var got []byte
	buf := make([]byte, n)
	for off := int64(0); ; {
		k, err := v.ReadAt(buf, off)
		got = append(got, buf[:k]...)
		off += int64(k)
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		if k == 0 {
			return got, nil
		}
	}
}

// A transaction marker (a control batch, which renders as nothing) whose
// batch length was damaged so that it swallows the batch after it. Its
// CRC no longer matches. A view that starts past the swallowed batch must
// not show the swallowed batch's records: an open that walks headers only,
// and skips the marker without reading it whole, counts the bytes before
// the start short by the swallowed batch, and shows it.
func TestAdvNewViewControlBatchLengthSwallowsNext(t *testing.T) {
	for _, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
		for _, f := range []Format{Values, JSONL} {
			t.Run(iso.String()+"/"+f.String(), func(t *testing.T) {
				dir := t.TempDir()
				w := newTxnWriter(t, dir, broker.Options{})
				w.write(-1, false, "a0", "a1", "a2", "a3") // 0-3
				w.write(1, true, "t4")                     // 4
				w.marker(1, false)                         // 5: COMMIT
				w.write(-1, false, "b6", "b7", "b8")       // 6-8: swallowed
				w.write(-1, false, "c9", "c10", "c11")     // 9-11
				w.write(-1, false, "d12")                  // 12
				require.NoError(t, w.p.Close())
				logPath := filepath.Join(w.p.Dir(), "00000000000000000000.log")
				hs := advHeaders(t, logPath)
				require.Len(t, hs, 6)
				c, b := hs[2], hs[3]
				require.True(t, c.Attributes.Control())
				var l [4]byte
				binary.BigEndian.PutUint32(l[:], uint32(c.Length+int32(b.Size())))
				advWriteAt(t, logPath, l[:], int64(c.Pos)+8)

				l2 := advOpen(t, dir, Options{ReadOnly: true, Isolation: iso})
				p, err := l2.Partition("tx", 0)
				require.NoError(t, err)
				v, err := p.NewView(f, 9)
				require.NoError(t, err)
				defer v.Close()
				var want []byte
				for _, r := range []string{"c9", "c10", "c11", "d12"} {
					want = f.Append(want, &record.Record{Offset: 9, Value: []byte(r)})
				}
				got, rerr := advReadView(v, 7)
				size, err := v.Size()
				require.NoError(t, err)
				if f == Values {
					require.Equal(t, string(want), string(got), "view from 9 (read error %v)", rerr)
				} else {
					require.NotContains(t, string(got), "b6", "view from 9 (read error %v)", rerr)
					require.NotContains(t, string(got), "b8", "view from 9 (read error %v)", rerr)
				}
				require.Equal(t, int64(len(got)), size, "size against what reads return")
			})
		}
	}
}

// A transaction marker whose last offset delta was damaged (the CRC covers
// it, so the marker is bad bytes) so that it claims the offsets of the
// batch after it. Views from past it, and from the batch after it, work
// as they did when the open read the marker whole: a view from 9 shows
// offsets 9 on, one from 6 shows 6 on (the hole at the marker is before
// both); none fails with the internal errIndexReplaced.
func TestAdvNewViewControlBatchClaimsNextOffsets(t *testing.T) {
	for _, f := range []Format{Values, JSONL} {
		for _, start := range []record.Offset{6, 9, 12, 13} {
			t.Run(fmt.Sprintf("%v/%d", f, start), func(t *testing.T) {
				dir := t.TempDir()
				w := newTxnWriter(t, dir, broker.Options{})
				w.write(-1, false, "a0", "a1", "a2", "a3") // 0-3
				w.write(1, true, "t4")                     // 4
				w.marker(1, false)                         // 5: COMMIT
				w.write(-1, false, "b6", "b7", "b8")       // 6-8
				w.write(-1, false, "c9", "c10", "c11")     // 9-11
				w.write(-1, false, "d12")                  // 12
				require.NoError(t, w.p.Close())
				logPath := filepath.Join(w.p.Dir(), "00000000000000000000.log")
				hs := advHeaders(t, logPath)
				c := hs[2]
				require.True(t, c.Attributes.Control())
				var d [4]byte
				binary.BigEndian.PutUint32(d[:], 2) // claims 5-7
				advWriteAt(t, logPath, d[:], int64(c.Pos)+23)

				l := advOpen(t, dir, Options{ReadOnly: true, Isolation: ReadUncommitted})
				p, err := l.Partition("tx", 0)
				require.NoError(t, err)
				all := map[record.Offset]string{6: "b6", 7: "b7", 8: "b8", 9: "c9", 10: "c10", 11: "c11", 12: "d12"}
				var want []byte
				for off := start; off <= 12; off++ {
					want = f.Append(want, &record.Record{Offset: off, Timestamp: 1_700_000_000_000 + int64(off), Value: []byte(all[off])})
				}
				v, err := p.NewView(f, start)
				require.NoError(t, err)
				defer v.Close()
				got, rerr := advReadView(v, 5)
				require.NoError(t, rerr)
				size, err := v.Size()
				require.NoError(t, err)
				if f == Values {
					require.Equal(t, string(want), string(got))
				}
				require.Equal(t, int64(len(got)), size)
			})
		}
	}
}

// A bad batch (a flipped byte its CRC covers) at a view's start, at
// offset 0, at the first and last batch of a sealed segment and at the
// last batch of the log; with and without the values sidecar, after a
// reopen or on the live log (the appender's index), both isolations and
// formats. A view either fails to open with the batch's error or shows
// the log up to the bad batch and then fails with its error, and its size
// then says what the reads gave; a view from past the bad batch is whole.
func TestAdvNewViewAtBadBatch(t *testing.T) {
	for _, where := range []string{"offset 0", "first of a segment", "last of a segment", "last of the log"} {
		for _, mode := range []string{"sidecar", "no sidecar", "live"} {
			for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
				t.Run(fmt.Sprintf("%s/%s/%v", where, mode, iso), func(t *testing.T) {
					checkAdvNewViewAtBadBatch(t, where, mode, iso)
				})
			}
		}
	}
}

func checkAdvNewViewAtBadBatch(t *testing.T, where, mode string, iso Isolation) {
	dir := t.TempDir()
	pdir := buildSegments(t, dir, 200)
	l, err := Open(dir, Options{Isolation: iso, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	segs := p.segments()
	require.Greater(t, len(segs), 3)
	var seg *segment
	var bad record.Batch
	switch where {
	case "offset 0":
		seg = segs[0]
		bad = batchesOf(t, seg, true)[0]
	case "first of a segment":
		seg = segs[1]
		bad = batchesOf(t, seg, true)[0]
	case "last of a segment":
		seg = segs[1]
		bs := batchesOf(t, seg, true)
		bad = bs[len(bs)-1]
	case "last of the log":
		seg = segs[len(segs)-1]
		bs := batchesOf(t, seg, true)
		bad = bs[len(bs)-1]
	}
	badFrom, resume, end := bad.BaseOffset, bad.NextOffset(), p.EndOffset()
	starts := []record.Offset{0, badFrom, resume, end}
	if badFrom > 0 {
		starts = append(starts, badFrom-1)
	}
	if resume < end {
		starts = append(starts, resume+1)
	}
	want := wantAroundBad(t, p, starts, badFrom, resume)
	logPath := seg.logPath()
	damage := func() {
		at := int64(bad.Pos) + int64(len(bad.Bytes)) - 3
		advWriteAt(t, logPath, []byte{bad.Bytes[len(bad.Bytes)-3] ^ 0x40}, at)
	}
	if mode == "live" {
		t.Cleanup(func() { l.Close() })
		damage()
	} else {
		require.NoError(t, l.Close())
		damage()
		if mode == "no sidecar" {
			views, _ := filepath.Glob(filepath.Join(pdir, "*.viewindex"))
			for _, v := range views {
				require.NoError(t, os.Remove(v))
			}
		}
		l = advOpen(t, dir, Options{Isolation: iso, ReadOnly: true})
		p, err = l.Partition("t", 0)
		require.NoError(t, err)
	}
	for _, f := range []Format{Values, JSONL} {
		for _, n := range starts {
			v, err := p.NewView(f, n)
			if err != nil {
				require.True(t, badData(err), "%v from %d: %v", f, n, err)
				continue
			}
			_, err = v.Size()
			require.NoError(t, err, "%v from %d", f, n)
			got, rerr := readView(t, v, 1000)
			switch {
			case n < resume && n < end:
				require.True(t, badData(rerr), "%v from %d: the read that reaches the bad batch fails with it: %v", f, n, rerr)
			case n == end && resume == end:
				// The end, right after the bad last batch: the view may
				// stop there (as the parent commit's does), or be empty.
				require.True(t, rerr == nil || badData(rerr), "%v from %d: %v", f, n, rerr)
			default:
				require.NoError(t, rerr, "%v from %d", f, n)
			}
			require.Equal(t, string(want[f][n]), string(got), "%v from %d", f, n)
			size2, err := v.Size()
			require.NoError(t, err)
			require.Equal(t, int64(len(got)), size2, "%v from %d: the size stops at the bad batch", f, n)
			require.NoError(t, v.Close())
		}
	}
}

// Views of a broker's partition with interleaved, aborted and open
// transactions, opened after views from 0 have covered every segment's
// view index (so that a view of a segment's covered end takes the index's
// total, less what ReadCommitted hides), from every batch boundary and the
// end: each against the model.
func TestAdvNewViewAfterIndexCoveredTxns(t *testing.T) {
	for _, c := range []struct {
		name string
		o    broker.Options
		open bool
		seed int64
	}{
		{name: "segments", o: broker.Options{SegmentBytes: 2048}, seed: 11},
		{name: "one segment, open", o: broker.Options{SegmentBytes: 1 << 20, IndexInterval: 256}, open: true, seed: 12},
		{name: "segments, open", o: broker.Options{SegmentBytes: 2048}, open: true, seed: 13},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(c.seed))
			dir := t.TempDir()
			w := newTxnWriter(t, dir, c.o)
			w.scenario(rng, 50, c.open)
			require.NoError(t, w.p.Close())
			for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
				t.Run(iso.String(), func(t *testing.T) {
					l := openLog(t, dir, Options{ReadOnly: true, Isolation: iso})
					p, err := l.Partition("tx", 0)
					require.NoError(t, err)
					starts := []record.Offset{p.EndOffset(), p.LastStableOffset()}
					for _, s := range p.segments() {
						for _, b := range batchesOf(t, s, false) {
							starts = append(starts, b.BaseOffset, b.NextOffset())
						}
					}
					for _, f := range []Format{Values, JSONL} {
						v, err := p.NewView(f, 0)
						require.NoError(t, err)
						_, err = readView(t, v, 4096)
						require.NoError(t, err)
						require.NoError(t, v.Close())
						for _, start := range starts {
							if start > p.EndOffset() {
								continue
							}
							checkView(t, p, f, start, w.expected(t, p, f, iso, start), rng)
						}
					}
				})
			}
		})
	}
}

// Recovery cut the damaged last record of the log (offset end-1) and kept
// the log end: offset end-1 is a hole. A view from end-1, whose segment's
// covered batches end exactly there (the fast path of a view of the end),
// must not show the record appended after the hole as if end-1 were
// there: it fails to open with ErrHole or stops with it. A view from end
// shows the appended record.
func TestAdvNewViewAtLostDurableEnd(t *testing.T) {
	for _, f := range []Format{Values, JSONL} {
		t.Run(f.String(), func(t *testing.T) {
			dir := t.TempDir()
			pdir, bases := buildSalvage(t, dir, 1720)
			end := record.Offset(1720)
			logPath := filepath.Join(pdir, fmt.Sprintf("%020d.log", bases[len(bases)-1]))
			data, err := os.ReadFile(logPath)
			require.NoError(t, err)
			data[len(data)-3] ^= 0x40
			require.NoError(t, os.WriteFile(logPath, data, 0o644))
			l := repairDir(t, dir)
			t.Cleanup(func() { l.Close() })
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			require.Equal(t, end, p.EndOffset())
			// A view from the start covers the index first.
			if v, err := p.NewView(f, bases[len(bases)-1]); err == nil {
				readView(t, v, 4096)
				v.Close()
			}
			check := func(when string, appended bool) {
				v, err := p.NewView(f, end-1)
				if err != nil {
					require.ErrorIs(t, err, ErrHole, "%s: view from %d", when, end-1)
				} else {
					got, rerr := readView(t, v, 4096)
					require.NotContains(t, string(got), "after", "%s: view from %d shows what follows the hole", when, end-1)
					if appended {
						require.ErrorIs(t, rerr, ErrHole, "%s: view from %d", when, end-1)
					}
					size, err := v.Size()
					require.NoError(t, err)
					require.Equal(t, int64(len(got)), size, "%s: view from %d", when, end-1)
					v.Close()
				}
				v, err = p.NewView(f, end)
				require.NoError(t, err, when)
				got, rerr := readView(t, v, 4096)
				require.NoError(t, rerr, when)
				if appended {
					require.Contains(t, string(got), "after", when)
				} else {
					require.Empty(t, got, when)
				}
				v.Close()
			}
			check("before the append", false)
			_, err = p.Append([]Record{{Value: []byte("after")}})
			require.NoError(t, err)
			check("after the append", true)
		})
	}
}

// Views of the end (offset/latest) opened while an appender writes and
// rolls segments: each shows offsets from its start on, consecutive, and
// its size never disagrees with its reads. Run with -race.
func TestAdvNewViewAtEndWhileAppending(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=3000", "index.interval.bytes=200"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	const n = 300
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			k := 1 + i%3
			recs := make([]Record, 0, k)
			for j := 0; j < k; j++ {
				recs = append(recs, Record{})
			}
			if _, err := p.Append(recs); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Values are "" (each record renders as "\n"): use JSONL, which names
	// offsets.
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				start := p.EndOffset()
				v, err := p.NewView(JSONL, start)
				if err != nil {
					t.Error(err)
					return
				}
				v2, err := p.NewView(Values, start)
				if err != nil {
					t.Error(err)
					return
				}
				size, err := v.Size()
				if err != nil {
					t.Error(err)
					return
				}
				size2, err := v2.Size()
				if err != nil {
					t.Error(err)
					return
				}
				got, rerr := advReadView(v, 1000)
				got2, rerr2 := advReadView(v2, 1000)
				v.Close()
				v2.Close()
				if rerr != nil || rerr2 != nil {
					t.Error(rerr, rerr2)
					return
				}
				if int64(len(got)) < size || int64(len(got2)) < size2 {
					t.Errorf("view from %d: size %d/%d, reads %d/%d", start, size, size2, len(got), len(got2))
					return
				}
				want := record.Offset(start)
				for _, line := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
					if line == "" {
						continue
					}
					var r struct{ Offset int64 }
					if err := json.Unmarshal([]byte(line), &r); err != nil || record.Offset(r.Offset) != want {
						t.Errorf("view from %d: line %q, want offset %d", start, line, want)
						return
					}
					want++
				}
				if strings.Count(string(got2), "\n") < int(want-start) && len(got2) < len(got) {
					// Values was read after JSONL: it shows at least as much.
					t.Errorf("view from %d: values %d records, jsonl %d", start, strings.Count(string(got2), "\n"), want-start)
					return
				}
			}
		}()
	}
	wg.Wait()
	<-done
	// Now quiet: every view of a batch boundary is exact.
	rng := rand.New(rand.NewSource(7))
	segs := p.segments()
	for _, start := range []record.Offset{segs[1].base, segs[len(segs)-1].base, p.EndOffset()} {
		{
			for _, f := range []Format{Values, JSONL} {
				v, err := p.NewView(f, start)
				require.NoError(t, err)
				want := renderAll(t, p, f, start)
				size, err := v.Size()
				require.NoError(t, err)
				require.Equal(t, int64(len(want)), size)
				checkReads(t, v, want, rng)
				v.Close()
			}
		}
	}
}

// advRaw builds a batch at base: values of producer pid (-1: none),
// transactional when txnl; or, when marker is set, pid's COMMIT or ABORT.
func advRaw(t *testing.T, base record.Offset, pid int64, txnl bool, marker record.ControlType, isMarker bool, values ...string) []byte {
	t.Helper()
	var b record.Builder
	o := record.BuildOptions{ProducerID: pid}
	if pid < 0 {
		o.ProducerID = 0
	}
	if isMarker {
		b.Append(1_700_000_000_000+int64(base), record.MarkerKey(marker), record.MarkerValue(0), nil)
		o.Attributes = 0x30
	} else {
		for i, v := range values {
			b.Append(1_700_000_000_000+int64(base)+int64(i), nil, []byte(v), nil)
		}
		if txnl {
			o.Attributes |= 0x10
		}
	}
	raw, err := b.BuildWith(o)
	require.NoError(t, err)
	raw = append([]byte(nil), raw...)
	record.SetBaseOffset(raw, base)
	return raw
}

// The damaged-length marker of TestAdvNewViewControlBatchLengthSwallowsNext
// in a follower copy (AppendFetched) reopened with its values sidecar, so
// that the view index covers the log before any view is opened.
func TestAdvNewViewControlLengthWithSidecar(t *testing.T) {
	for _, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
		for _, f := range []Format{Values, JSONL} {
			t.Run(iso.String()+"/"+f.String(), func(t *testing.T) {
				dir := t.TempDir()
				l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1, Gaps: true})
				require.NoError(t, err)
				topic, err := l.CreateTopic("copy", 1, nil)
				require.NoError(t, err)
				p, _ := topic.Partition(0)
				batches := [][]byte{
					advRaw(t, 0, -1, false, 0, false, "a0", "a1", "a2", "a3"),
					advRaw(t, 4, 1, true, 0, false, "t4"),
					advRaw(t, 5, 1, false, record.ControlCommit, true),
					advRaw(t, 6, -1, false, 0, false, "b6", "b7", "b8"),
					advRaw(t, 9, -1, false, 0, false, "c9", "c10", "c11"),
					advRaw(t, 12, -1, false, 0, false, "d12"),
				}
				require.NoError(t, p.ResetFetched(0, batches))
				for _, ff := range []Format{Values, JSONL} {
					v, err := p.NewView(ff, 0)
					require.NoError(t, err)
					_, err = readView(t, v, 100)
					require.NoError(t, err)
					v.Close()
				}
				seg := p.segments()[0]
				logPath := seg.logPath()
				require.NoError(t, l.Close())
				require.FileExists(t, filepath.Join(filepath.Dir(logPath), "00000000000000000000.viewindex"))
				hs := advHeaders(t, logPath)
				c, b := hs[2], hs[3]
				require.True(t, c.Attributes.Control())
				var n [4]byte
				binary.BigEndian.PutUint32(n[:], uint32(c.Length+int32(b.Size())))
				advWriteAt(t, logPath, n[:], int64(c.Pos)+8)

				l2 := advOpen(t, dir, Options{Isolation: iso, Gaps: true})
				p2, err := l2.Partition("copy", 0)
				require.NoError(t, err)
				v, err := p2.NewView(f, 9)
				require.NoError(t, err)
				defer v.Close()
				got, rerr := advReadView(v, 7)
				size, err := v.Size()
				require.NoError(t, err)
				require.NotContains(t, string(got), "b6", "view from 9 (read error %v)", rerr)
				require.NotContains(t, string(got), "b8", "view from 9 (read error %v)", rerr)
				require.NoError(t, rerr, "view from 9")
				require.Contains(t, string(got), "d12")
				require.Equal(t, int64(len(got)), size, "size against what reads return")
			})
		}
	}
}
