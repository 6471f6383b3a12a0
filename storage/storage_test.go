package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// testLogger keeps test output quiet unless -v.
func testLogger(any) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// clock is a settable clock for tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// openLog opens a log in dir and checks it when the test ends.
func openLog(t testing.TB, dir string, o Options) *Log {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	if o.RetentionCheckInterval == 0 {
		o.RetentionCheckInterval = -1
	}
	l, err := Open(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
	})
	return l
}

func small(kv ...string) Overrides {
	o := Overrides{}
	for _, p := range kv {
		if err := o.SetPair(p); err != nil {
			panic(err)
		}
	}
	return o
}

func values(n int, prefix string) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return recs
}

// readAll reads every record from offset from to the end.
func readAll(t testing.TB, p *Partition, from record.Offset) []string {
	t.Helper()
	r, err := p.NewReader(from)
	require.NoError(t, err)
	defer r.Close()
	out := []string{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%d:%s", rec.Offset, rec.Value))
	}
}

// batchesOf returns the batches of seg's log, their Bytes copied when
// full (headers only otherwise).
func batchesOf(t testing.TB, seg *segment, full bool) []record.Batch {
	t.Helper()
	var out []record.Batch
	sc := record.NewScanner(seg.log, 0, record.Position(seg.size.Load()), record.ScanOptions{HeadersOnly: !full})
	for sc.Next() {
		b := *sc.Batch()
		b.Bytes = bytes.Clone(b.Bytes)
		out = append(out, b)
	}
	require.NoError(t, sc.Err())
	return out
}

// writeLog writes b at pos of seg's .log, behind the log's back.
func writeLog(t testing.TB, seg *segment, b []byte, pos int64) {
	t.Helper()
	f, err := os.OpenFile(seg.logPath(), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, pos)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// readConsecutive reads r, which starts at offset 0, requiring offsets
// 0, 1, 2, … until Next fails; it returns how many records it read and
// the error.
func readConsecutive(t testing.TB, r *Reader) (record.Offset, error) {
	t.Helper()
	for n := record.Offset(0); ; n++ {
		rec, err := r.Next()
		if err != nil {
			return n, err
		}
		require.Equal(t, n, rec.Offset)
	}
}

// shortLivedPartition is a partition of 20 one-record batches whose values
// value(i) returns, in 300-byte segments that retention deletes at once
// (retention.bytes=0) when the test calls EnforceRetention.
func shortLivedPartition(t testing.TB, value func(i int) string) (*Log, *Partition) {
	t.Helper()
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.bytes=0", "retention.ms=-1", "file.delete.delay.ms=0"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 20; i++ {
		_, err := p.Append(values(1, value(i)))
		require.NoError(t, err)
	}
	return l, p
}

func TestAppendReadAcrossRolls(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("orders", 1, small("segment.bytes=2000", "index.interval.bytes=100"))
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	var want []string
	for i := 0; i < 200; i++ {
		n := 1 + i%5
		recs := values(n, fmt.Sprintf("b%d", i))
		first, err := p.Append(recs)
		require.NoError(t, err)
		for j := range recs {
			want = append(want, fmt.Sprintf("%d:%s", int(first)+j, recs[j].Value))
		}
	}
	require.Greater(t, len(p.SegmentBases()), 5, "small segment.bytes rolls")
	require.Equal(t, want, readAll(t, p, 0))
	for _, from := range []int{1, 17, 250, len(want) - 1, len(want)} {
		require.Equal(t, want[from:], readAll(t, p, record.Offset(from)), "from %d", from)
	}
	_, err = p.NewReader(record.Offset(len(want) + 1))
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	_, err = p.NewReader(-1)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
}

func TestReopenContinuesOffsets(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t)})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 2, small("segment.bytes=500"))
	require.NoError(t, err)
	p1, _ := top.Partition(1)
	for i := 0; i < 30; i++ {
		_, err := p1.Append(values(2, "x"))
		require.NoError(t, err)
	}
	before := readAll(t, p1, 0)
	require.NoError(t, l.Close())
	_, err = os.Stat(filepath.Join(dir, layout.CleanShutdownFile))
	require.NoError(t, err, "clean shutdown marker")

	l2 := openLog(t, dir, Options{})
	_, err = os.Stat(filepath.Join(dir, layout.CleanShutdownFile))
	require.ErrorIs(t, err, os.ErrNotExist, "the marker goes when loading starts")
	p, err := l2.Partition("t", 1)
	require.NoError(t, err)
	require.Equal(t, record.Offset(60), p.EndOffset())
	require.Equal(t, before, readAll(t, p, 0))
	first, err := p.Append(values(1, "after"))
	require.NoError(t, err)
	require.Equal(t, record.Offset(60), first)
	require.Equal(t, "500", fmt.Sprint(l2.mustTopic(t, "t").Config().SegmentBytes), "topic settings persist")
}

func (l *Log) mustTopic(t testing.TB, name string) *Topic {
	top, err := l.Topic(name)
	require.NoError(t, err)
	return top
}

func TestOffsetForTime(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=400", "index.interval.bytes=50"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	// Timestamps 1000, 1010, … with one record going back in time.
	for i := 0; i < 100; i++ {
		ts := int64(1000 + 10*i)
		if i == 50 {
			ts = 900
		}
		_, err := p.Append([]Record{{Timestamp: ts, Value: []byte(fmt.Sprint(i))}})
		require.NoError(t, err)
	}
	cases := map[int64]record.Offset{
		0:    0,
		1000: 0,
		1001: 1,
		1500: 51, // record 50 is at 900; 51 is the first at or after 1500
		1495: 51,
		1485: 49,
		1990: 99,
		1991: 100, // nothing that recent: the log end
		5000: 100,
	}
	for ts, want := range cases {
		got, err := p.OffsetForTime(ts)
		require.NoError(t, err)
		require.Equal(t, want, got, "ts %d", ts)
	}
}

func TestRetention(t *testing.T) {
	clk := newClock()
	l := openLog(t, t.TempDir(), Options{Now: clk.Now})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.ms=60000", "file.delete.delay.ms=0"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 40; i++ {
		_, err := p.Append([]Record{{Value: []byte(fmt.Sprintf("value-%02d", i))}})
		require.NoError(t, err)
		if i == 19 {
			clk.Advance(2 * time.Minute)
		}
	}
	segsBefore := len(p.SegmentBases())
	n, err := l.EnforceRetention()
	require.NoError(t, err)
	require.Greater(t, n, 0)
	require.Less(t, len(p.SegmentBases()), segsBefore)
	start := p.StartOffset()
	require.Greater(t, start, record.Offset(0))
	require.LessOrEqual(t, start, record.Offset(20), "only segments older than retention.ms go")
	got := readAll(t, p, start)
	require.Equal(t, fmt.Sprintf("%d:value-%02d", start, start), got[0])
	_, err = p.NewReader(0)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)

	// Everything old: the active segment rolls first, an empty one stays.
	clk.Advance(time.Hour)
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	require.Equal(t, p.EndOffset(), p.StartOffset())
	require.Len(t, p.SegmentBases(), 1)
	first, err := p.Append(values(1, "new"))
	require.NoError(t, err)
	require.Equal(t, record.Offset(40), first)
}

func TestRetentionBytes(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.bytes=700", "retention.ms=-1"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 40; i++ {
		_, err := p.Append(values(1, "v"))
		require.NoError(t, err)
	}
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	require.LessOrEqual(t, p.Size(), int64(700+300))
	require.Greater(t, p.StartOffset(), record.Offset(0))
}

// A reader in a segment that retention deletes finishes it, then says
// that what came after it is gone (ErrDeleted) instead of skipping to
// what is left; a view that had pinned every segment reads them all.
func TestReaderSurvivesDeletion(t *testing.T) {
	l, p := shortLivedPartition(t, func(int) string { return "v" })
	firstSegmentEnd := int(p.SegmentBases()[1])
	r, err := p.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	v, err := p.NewView(Values, 0)
	require.NoError(t, err)
	defer v.Close()
	size, err := v.Size()
	require.NoError(t, err)
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	require.Equal(t, p.EndOffset(), p.StartOffset())
	n := 0
	for {
		_, err := r.Next()
		if errors.Is(err, ErrDeleted) {
			_, again := r.Next()
			require.ErrorIs(t, again, ErrDeleted)
			break
		}
		require.NoError(t, err)
		n++
	}
	require.Equal(t, firstSegmentEnd, n, "the reader finishes the segment it was in; the rest is gone")
	buf := make([]byte, size)
	got, err := v.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, int(size), got)
	require.Equal(t, strings.Repeat("v-0\n", 20), string(buf))
}

func TestBadInput(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	for _, name := range []string{"", ".", "..", "a/b", "a b", strings.Repeat("x", 250), "ü"} {
		_, err := l.CreateTopic(name, 1, nil)
		require.ErrorIs(t, err, ErrInvalidTopic, "%q", name)
	}
	_, err := l.CreateTopic("ok", 0, nil)
	require.ErrorIs(t, err, ErrInvalidPartition)
	top, err := l.CreateTopic("ok", 1, small("max.message.bytes=200"))
	require.NoError(t, err)
	_, err = l.CreateTopic("ok", 1, nil)
	require.ErrorIs(t, err, ErrTopicExists)
	p, _ := top.Partition(0)
	_, err = p.Append([]Record{{Value: []byte("fine")}, {Value: bytes.Repeat([]byte("x"), 200)}})
	require.ErrorIs(t, err, ErrRecordTooLarge)
	require.Equal(t, record.Offset(0), p.EndOffset(), "nothing of a refused batch is written")
	_, err = top.AddPartition(5)
	require.ErrorIs(t, err, ErrInvalidPartition)
	_, err = top.AddPartition(1)
	require.NoError(t, err)
	_, err = l.Partition("ok", 2)
	require.ErrorIs(t, err, ErrNoPartition)
	_, err = l.Topic("nope")
	require.ErrorIs(t, err, ErrNoTopic)
	o := Overrides{}
	require.ErrorIs(t, o.SetPair("segment.bytes=1"), ErrInvalidConfig)
	require.ErrorIs(t, o.SetPair("nope=1"), ErrInvalidConfig)
	require.ErrorIs(t, o.SetPair("segment.bytes"), ErrInvalidConfig)
	require.ErrorIs(t, o.SetPair("retention.ms=abc"), ErrInvalidConfig)
}

func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	openLog(t, dir, Options{})
	_, err := Open(dir, Options{Logger: testLogger(t)})
	require.Error(t, err)
	ro, err := Open(dir, Options{ReadOnly: true, Logger: testLogger(t)})
	require.NoError(t, err, "a read-only open takes no lock")
	require.NoError(t, ro.Close())
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t)})
	require.NoError(t, err)
	_, err = l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	ro := openLog(t, dir, Options{ReadOnly: true})
	p, err := ro.Partition("t", 0)
	require.NoError(t, err)
	_, err = p.Append(values(1, "x"))
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = ro.CreateTopic("u", 1, nil)
	require.ErrorIs(t, err, ErrReadOnly)
}

// flush.messages makes the append that reaches the count flush the
// partition before it returns.
func TestFlushMessages(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("flush.messages=3", "flush.ms=-1"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i, want := range []record.Offset{0, 0, 3, 3, 3, 6} {
		_, err := p.Append(values(1, "x"))
		require.NoError(t, err)
		require.Equal(t, want, p.RecoveryPoint(), "after append %d", i)
	}
}

func TestWaitWakesOnAppend(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, nil)
	p, _ := top.Partition(0)
	done := make(chan error)
	go func() {
		r, err := p.NewReader(0)
		if err != nil {
			done <- err
			return
		}
		defer r.Close()
		if err := r.Wait(t.Context()); err != nil {
			done <- err
			return
		}
		rec, err := r.Next()
		if err == nil && string(rec.Value) != "hello" {
			err = fmt.Errorf("got %q", rec.Value)
		}
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	_, err := p.Append(values(1, "ignored")[:0])
	require.NoError(t, err)
	_, err = p.Append([]Record{{Value: []byte("hello")}})
	require.NoError(t, err)
	require.NoError(t, <-done)
}

// Readers running alongside the appender never see part of a batch and see
// every record in order.
func TestConcurrentReaders(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=4000", "index.interval.bytes=64"))
	p, _ := top.Partition(0)
	const batches = 300
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.NewReader(0)
			if err != nil {
				errs <- err
				return
			}
			defer r.Close()
			want := record.Offset(0)
			for want < batches*3 {
				rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					if err := r.Wait(t.Context()); err != nil {
						errs <- err
						return
					}
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if rec.Offset != want || string(rec.Value) != fmt.Sprint(want) {
					errs <- fmt.Errorf("got %d:%s, want %d", rec.Offset, rec.Value, want)
					return
				}
				want++
			}
		}()
	}
	for i := 0; i < batches; i++ {
		recs := make([]Record, 3)
		for j := range recs {
			recs[j].Value = []byte(fmt.Sprint(i*3 + j))
		}
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// renderAll renders a partition from an offset the slow way: a Reader.
func renderAll(t testing.TB, p *Partition, f Format, from record.Offset) []byte {
	t.Helper()
	r, err := p.NewReader(from)
	require.NoError(t, err)
	defer r.Close()
	var out []byte
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = f.Append(out, rec)
	}
}

// Every byte of a view, read at random positions and sizes, matches the
// sequential rendering, in both formats, across segments, as it grows.
func TestViewRandomAccess(t *testing.T) {
	t.Parallel() // its own folder and no package settings: runs beside the other slow ones
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=20000", "index.interval.bytes=200"))
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(1))
	appendSome := func(n int) {
		for i := 0; i < n; i++ {
			recs := make([]Record, 1+rng.Intn(8))
			for j := range recs {
				v := bytes.Repeat([]byte{byte('a' + rng.Intn(26))}, rng.Intn(300))
				if rng.Intn(10) == 0 {
					v = []byte{0xff, 0xfe, '"', '\n'}
				}
				recs[j] = Record{Value: v, Key: []byte(fmt.Sprint(i)), Headers: []record.Header{{Key: []byte("h"), Value: []byte{byte(i)}}}}
			}
			_, err := p.Append(recs)
			require.NoError(t, err)
		}
	}
	appendSome(300)
	for _, f := range []Format{Values, JSONL} {
		for _, from := range []record.Offset{0, 1, 333, p.EndOffset() - 1, p.EndOffset()} {
			v, err := p.NewView(f, from)
			require.NoError(t, err)
			want := renderAll(t, p, f, from)
			size, err := v.Size()
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), size, "%v from %d", f, from)
			checkReads(t, v, want, rng)
			require.NoError(t, v.Close())
		}
	}
	v, err := p.NewView(Values, 10)
	require.NoError(t, err)
	defer v.Close()
	appendSome(100)
	want := renderAll(t, p, Values, 10)
	size, err := v.Size()
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), size, "a view grows with the log")
	checkReads(t, v, want, rng)
}

func checkReads(t *testing.T, v *View, want []byte, rng *rand.Rand) {
	t.Helper()
	// Sequential, in chunk sizes that cut records and batches anywhere;
	// the last also reads elsewhere every fifth time, which makes the next
	// sequential read start afresh.
	for _, c := range []struct{ size, every int }{{1, 0}, {7, 0}, {777, 0}, {64 << 10, 0}, {500, 5}} {
		var got []byte
		buf := make([]byte, c.size)
		// Byte by byte under the race detector would take minutes on a
		// large view, so there it reads the first 256 KiB that way; the
		// plain run, which .ci/run also makes, reads all of it.
		stop := int64(len(want)) + 1 // past the end: to the end of file
		if raceEnabled && c.size < 64 {
			stop = min(stop, 256<<10)
		}
		for off, reads := int64(0), 1; off < stop; reads++ {
			n, err := v.ReadAt(buf, off)
			got = append(got, buf[:n]...)
			off += int64(n)
			if errors.Is(err, io.EOF) || n == 0 {
				break
			}
			require.NoError(t, err)
			if c.every > 0 && reads%c.every == 0 && len(want) > 0 {
				at := rng.Int63n(int64(len(want)))
				b := make([]byte, 100)
				k, _ := v.ReadAt(b, at)
				require.Equal(t, string(want[at:min(at+100, int64(len(want)))]), string(b[:k]), "read at %d", at)
			}
		}
		if stop > int64(len(want)) {
			require.Equal(t, string(want), string(got), "reads of %d bytes", c.size)
		} else {
			require.GreaterOrEqual(t, int64(len(got)), stop, "reads of %d bytes", c.size)
			require.Equal(t, string(want[:len(got)]), string(got), "reads of %d bytes", c.size)
		}
	}
	for i := 0; i < 200 && len(want) > 0; i++ {
		off := rng.Int63n(int64(len(want)))
		b := make([]byte, 1+rng.Intn(5000))
		n, err := v.ReadAt(b, off)
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
		}
		end := min(off+int64(len(b)), int64(len(want)))
		require.Equal(t, string(want[off:end]), string(b[:n]), "read at %d", off)
	}
	n, err := v.ReadAt(make([]byte, 10), int64(len(want)))
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF)
}

// The values view index survives a clean restart in its sidecar and is
// rebuilt when the sidecar is bad.
func TestViewIndexSidecar(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t)})
	require.NoError(t, err)
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=100000"))
	p, _ := top.Partition(0)
	for i := 0; i < 500; i++ {
		_, err := p.Append(values(3, strings.Repeat("z", i%100)))
		require.NoError(t, err)
	}
	want := renderAll(t, p, Values, 0)
	require.NoError(t, l.Close())
	sidecars, _ := filepath.Glob(filepath.Join(dir, "t-0", "*"+layout.ViewIndexSuffix))
	require.NotEmpty(t, sidecars)

	for name, damage := range map[string]func(string){
		"intact":    func(string) {},
		"flipped":   func(p string) { b, _ := os.ReadFile(p); b[len(b)/2] ^= 1; os.WriteFile(p, b, 0o644) },
		"truncated": func(p string) { os.Truncate(p, 20) },
		"removed":   func(p string) { os.Remove(p) },
	} {
		t.Run(name, func(t *testing.T) {
			for _, s := range sidecars {
				damage(s)
			}
			l, err := Open(dir, Options{Logger: testLogger(t)})
			require.NoError(t, err)
			p, _ := l.Partition("t", 0)
			v, err := p.NewView(Values, 0)
			require.NoError(t, err)
			size, err := v.Size()
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), size)
			checkReads(t, v, want, rand.New(rand.NewSource(2)))
			v.Close()
			require.NoError(t, l.Check())
			require.NoError(t, l.Close())
		})
	}
}

func TestJSONRecordRoundTrip(t *testing.T) {
	recs := []record.Record{
		{Offset: 1, Timestamp: 5, Key: nil, Value: []byte("plain")},
		{Offset: 2, Timestamp: 6, Key: []byte("k\"\\\n\t\x01"), Value: nil},
		{Offset: 3, Timestamp: 7, Key: []byte{}, Value: []byte{0xff, 0x00}, Headers: []record.Header{{Key: []byte("a"), Value: nil}, {Key: []byte("b"), Value: []byte{0xc3}}}},
		{Offset: 4, Timestamp: 8, Value: []byte("ünïcode ✓")},
	}
	for _, r := range recs {
		line := JSONL.Append(nil, &r)
		require.True(t, bytes.HasSuffix(line, []byte("}\n")))
		back, err := ParseJSONRecord(line)
		require.NoError(t, err, "%s", line)
		require.Equal(t, r.Timestamp, back.Timestamp)
		require.Equal(t, r.Key, back.Key)
		require.Equal(t, r.Value, back.Value)
		require.Len(t, back.Headers, len(r.Headers))
		for i := range r.Headers {
			require.Equal(t, r.Headers[i].Key, back.Headers[i].Key)
			require.Equal(t, r.Headers[i].Value, back.Headers[i].Value)
		}
	}
	for _, bad := range []string{`{`, `[]`, `{"value": 5}`, `{"nope": 1}`, `{"timestamp": -5}`, `{"headers": [{"value": "x"}]}`, `{"value": {"base64": "!!"}}`, `{} {}`} {
		_, err := ParseJSONRecord([]byte(bad))
		require.ErrorIs(t, err, ErrInvalidRecord, bad)
	}
	r, err := ParseJSONRecord([]byte(`{"headers": {"z": "1", "a": null}, "value": "v"}`))
	require.NoError(t, err)
	require.Equal(t, "a", string(r.Headers[0].Key))
}

func TestParseTimestamp(t *testing.T) {
	cases := map[string]int64{
		"1700000000":                  1700000000000,
		"1700000000123":               1700000000123,
		"0":                           0,
		"2023-11-14T22:13:20Z":        1700000000000,
		"2023-11-14T23:13:20.5+01:00": 1700000000500,
		"2023-11-14":                  1699920000000, // midnight UTC
		"1970-01-01":                  0,
		"99999999999":                 99999999999000, // 11 digits: seconds
		"100000000000":                100000000000,   // 12 digits: milliseconds
	}
	for in, want := range cases {
		got, err := ParseTimestamp(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "-5", "yesterday", "2023-11-4", "2023-13-01", "2023-02-30", "99999999999999999999", "1.5"} {
		_, err := ParseTimestamp(bad)
		require.ErrorIs(t, err, ErrInvalidTimestamp, bad)
	}
}

// Asking every segment for its max timestamp (the mount's info file,
// retention) maps no index: sealed indexes give their last entry with one
// small read each.
func TestSegmentsMapsNoIndex(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t)})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "index.interval.bytes=10"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 60; i++ {
		_, err := p.Append([]Record{{Timestamp: int64(1000 + i), Value: []byte("some value")}})
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())

	l2 := openLog(t, dir, Options{})
	p2, _ := l2.Partition("t", 0)
	infos, err := p2.Segments()
	require.NoError(t, err)
	require.Greater(t, len(infos), 10)
	require.Equal(t, int64(1059), infos[len(infos)-1].MaxTimestamp)
	for _, s := range p2.segments() {
		s.idxMu.RLock()
		require.False(t, s.offIdx != nil && s.offIdx.Mapped(), "segment %d offset index", s.base)
		require.False(t, s.timeIdx != nil && s.timeIdx.Mapped(), "segment %d time index", s.base)
		s.idxMu.RUnlock()
	}
}

// TestReaderRefusesBatchesOutOfOffsetOrder: the CRC does not cover a
// batch's base offset, so a corrupt one is caught by its place among the
// other batches. A reader returns every record before the batch, then the
// same corruption error on every call until a Seek; a Seek, a lookup by
// time and the views that pass over it fail the same way.
func TestReaderRefusesBatchesOutOfOffsetOrder(t *testing.T) {
	cases := map[string]struct {
		segment, batch int    // the batch to corrupt, counted in its segment; -1 is the last
		base           uint64 // its new base offset; 0 with next: the next segment's base
		next           bool
		interval       string // index.interval.bytes; "" for the default
	}{
		"below the batch before":    {segment: 0, batch: 3, base: 1},
		"at an index entry":         {segment: 0, batch: 3, base: 5, interval: "0"},
		"below the segment's base":  {segment: 1, batch: 0, base: 0},
		"beyond a relative offset":  {segment: 0, batch: 5, base: 6365935208268564448},
		"negative":                  {segment: 1, batch: 2, base: 1 << 63},
		"into the next segment":     {segment: 0, batch: -1, next: true},
		"into the next, from first": {segment: 1, batch: 0, next: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := Open(t.TempDir(), Options{Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
			defer l.Close()
			o := small("segment.bytes=2000")
			if c.interval != "" {
				o = small("segment.bytes=2000", "index.interval.bytes="+c.interval)
			}
			top, err := l.CreateTopic("t", 1, o)
			require.NoError(t, err)
			p, err := top.Partition(0)
			require.NoError(t, err)
			ts := func(off record.Offset) int64 { return 1_700_000_000_000 + 10*int64(off) }
			for i := 0; i < 60; i++ {
				recs := values(2, fmt.Sprintf("b%d", i))
				for j := range recs {
					recs[j].Timestamp = ts(record.Offset(2*i + j))
				}
				_, err := p.Append(recs)
				require.NoError(t, err)
			}
			segs := p.segments()
			require.Greater(t, len(segs), c.segment+1)
			seg := segs[c.segment]
			batches := batchesOf(t, seg, false)
			bad := batches[(c.batch+len(batches))%len(batches)]
			base := c.base
			if c.next {
				base = uint64(segs[c.segment+1].base)
			}
			writeLog(t, seg, binary.BigEndian.AppendUint64(nil, base), int64(bad.Pos))
			isBad := func(err error) {
				t.Helper()
				require.ErrorIs(t, err, record.ErrCorrupt)
				require.Contains(t, err.Error(), seg.logPath())
				require.Contains(t, err.Error(), fmt.Sprintf("position %d", bad.Pos))
			}

			r, err := p.NewReader(0)
			require.NoError(t, err)
			defer r.Close()
			n, err := readConsecutive(t, r)
			isBad(err)
			_, again := r.Next()
			require.Equal(t, err, again)
			require.Equal(t, bad.BaseOffset, n, "every record before the batch")
			require.NoError(t, r.Seek(0))
			rec, err := r.Next()
			require.NoError(t, err, "a Seek clears the error")
			require.Equal(t, record.Offset(0), rec.Offset)

			// A Seek to the bad batch's records walks over it and fails; a
			// Seek past them fails too, or, where valid batches start again
			// after it, finds the record asked for.
			for _, off := range []record.Offset{bad.BaseOffset, bad.LastOffset(), bad.NextOffset()} {
				if off >= segs[c.segment+1].base || off == seg.base {
					continue // in the next segment, or found by the index
				}
				err := r.Seek(off)
				var rec *record.Record
				if err == nil {
					rec, err = r.Next()
				}
				if err == nil && off == bad.NextOffset() {
					require.Equal(t, off, rec.Offset, "a Seek past the bad batch")
					require.Equal(t, fmt.Sprintf("b%d-%d", off/2, off%2), string(rec.Value))
					continue
				}
				isBad(err)
			}
			// So does a lookup by time that reaches it.
			if bad.BaseOffset > seg.base {
				_, err = p.OffsetForTime(ts(bad.LastOffset()))
				isBad(err)
			}

			// A view refuses it too, read on from before it, and again
			// at the same place.
			for f := Format(0); f < numFormats; f++ {
				v, err := p.NewView(f, 0)
				require.NoError(t, err)
				defer v.Close()
				buf := make([]byte, 100)
				var off int64
				for {
					k, err := v.ReadAt(buf, off)
					off += int64(k)
					if err != nil {
						require.ErrorIs(t, err, record.ErrCorrupt, "%v view", f)
						break
					}
				}
				_, err = v.ReadAt(buf, off)
				require.ErrorIs(t, err, record.ErrCorrupt, "%v view, read again", f)
			}
		})
	}
}

// TestViewsFollowRolls: views read while the partition rolls under them
// (tiny segments, an appender flat out) see every record, in order: a
// segment that grew between a read's look at its size and its roll is
// read to its end before the view moves on.
func TestViewsFollowRolls(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=400"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	const n = 5000
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if _, err := p.Append([]Record{{Value: []byte(strconv.Itoa(i))}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := p.NewView(Values, 0)
			if err != nil {
				errs <- err
				return
			}
			defer v.Close()
			var off int64
			var line []byte
			next := 0
			buf := make([]byte, 4096)
			for next < n {
				k, err := v.ReadAt(buf, off)
				if err != nil && !errors.Is(err, io.EOF) {
					errs <- err
					return
				}
				off += int64(k)
				for _, c := range buf[:k] {
					if c != '\n' {
						line = append(line, c)
						continue
					}
					if string(line) != strconv.Itoa(next) {
						errs <- fmt.Errorf("at byte %d: record %q, want %d", off, line, next)
						return
					}
					line, next = line[:0], next+1
				}
				if k == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, <-done)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestViewEndsAtDeletedSegments: a view that had not pinned the segments
// retention deletes reads what it pinned, then gets ErrDeleted where they
// were, not the records after them as if nothing were missing.
func TestViewEndsAtDeletedSegments(t *testing.T) {
	l, p := shortLivedPartition(t, func(i int) string { return fmt.Sprint(i) })
	v, err := p.NewView(Values, 0) // pins the first segment only
	require.NoError(t, err)
	defer v.Close()
	_, err = l.EnforceRetention() // deletes all but the active segment
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		_, err := p.Append(values(1, fmt.Sprint(20+i)))
		require.NoError(t, err)
	}
	buf := make([]byte, 1<<16)
	n, err := v.ReadAt(buf, 0)
	if err == nil {
		_, err = v.ReadAt(buf[n:], int64(n))
	}
	require.ErrorIs(t, err, ErrDeleted)
	_, err = v.Size()
	require.ErrorIs(t, err, ErrDeleted, "a size that stopped at the gap would leave tail -f waiting")
	lines := strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n")
	require.Less(t, len(lines), 20, "only the first segment's records")
	for i, line := range lines {
		require.Equal(t, fmt.Sprintf("%d-0", i), line)
	}
}

// TestViewStartAndSizeCheckOffsets: where a view from an offset starts,
// and the size of a view whose index is built after the corruption, come
// from scans of batch offsets too; a bad one stops the view there instead
// of shifting every byte after it, and a view from past it starts after
// it.
func TestViewStartAndSizeCheckOffsets(t *testing.T) {
	setup := func(t *testing.T) (*Partition, []*segment, func(*segment, int, uint64)) {
		l, err := Open(t.TempDir(), Options{Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		top, err := l.CreateTopic("t", 1, small("segment.bytes=2000"))
		require.NoError(t, err)
		p, err := top.Partition(0)
		require.NoError(t, err)
		for i := 0; i < 60; i++ {
			_, err := p.Append(values(2, fmt.Sprintf("b%d", i)))
			require.NoError(t, err)
		}
		setBase := func(seg *segment, batch int, base uint64) {
			batches := batchesOf(t, seg, false)
			writeLog(t, seg, binary.BigEndian.AppendUint64(nil, base), int64(batches[(batch+len(batches))%len(batches)].Pos))
		}
		return p, p.segments(), setBase
	}
	t.Run("view from an offset", func(t *testing.T) {
		// The first batch's base raised into segment 1: a view from an
		// offset past it starts right, after the bad batch, not shifted.
		p, segs, setBase := setup(t)
		want := renderAll(t, p, Values, 10)
		setBase(segs[0], 0, uint64(segs[1].base))
		v, err := p.NewView(Values, 10)
		require.NoError(t, err)
		defer v.Close()
		got, err := readView(t, v, 100)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		// One from before it stops at it, at once.
		v0, err := p.NewView(Values, 0)
		require.NoError(t, err)
		defer v0.Close()
		size, err := v0.Size()
		require.NoError(t, err)
		require.Zero(t, size)
		_, err = v0.ReadAt(make([]byte, 10), 0)
		require.ErrorIs(t, err, record.ErrCorrupt)
	})
	t.Run("view index built after", func(t *testing.T) {
		// The last batch of segment 0 raised past the log: a view built
		// after the damage has the size of what lies before it.
		p, segs, setBase := setup(t)
		batches := batchesOf(t, segs[0], false)
		last := batches[len(batches)-1]
		want := renderAll(t, p, JSONL, 0)
		want = want[:len(want)-len(renderAll(t, p, JSONL, last.BaseOffset))]
		setBase(segs[0], -1, uint64(segs[1].base)+100000)
		v, err := p.NewView(JSONL, 0)
		require.NoError(t, err)
		defer v.Close()
		size, err := v.Size()
		require.NoError(t, err)
		require.Equal(t, int64(len(want)), size)
		got, err := readView(t, v, 100)
		require.ErrorIs(t, err, record.ErrCorrupt)
		require.Equal(t, string(want), string(got))
	})
}

// TestReaderDecodeErrorRepeats: a batch whose CRC holds but whose records
// do not decode (a record count raised, the CRC made to match) fails the
// read that reaches it, and every read after it until a Seek, instead of
// the reader going on past it.
func TestReaderDecodeErrorRepeats(t *testing.T) {
	l, err := Open(t.TempDir(), Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		_, err := p.Append(values(2, fmt.Sprintf("b%d", i)))
		require.NoError(t, err)
	}
	seg := p.segments()[0]
	bad := batchesOf(t, seg, true)[3]
	raw := bad.Bytes
	binary.BigEndian.PutUint32(raw[57:], 3) // record count 2 -> 3
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	writeLog(t, seg, raw, int64(bad.Pos))

	r, err := p.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	n, err := readConsecutive(t, r)
	require.ErrorIs(t, err, record.ErrCorrupt)
	for range 3 {
		_, again := r.Next()
		require.Equal(t, err, again)
	}
	require.Equal(t, bad.LastOffset()+1, n, "the batch's own records come first")
}

// TestViewReadAfterErrorRendersAgain: a view serves every byte rendered
// before a corrupt batch, then fails the read that reaches it, and keeps
// failing there: a read after the error is not answered from what a
// render left behind. (With render-ahead, a read of good bytes used to fail
// when the rendering ahead of it met the bad batch, and a read after that
// got the wrong bytes.)
func TestViewReadAfterErrorRendersAgain(t *testing.T) {
	for f := Format(0); f < numFormats; f++ {
		t.Run(f.String(), func(t *testing.T) {
			l := openLog(t, t.TempDir(), Options{})
			top, err := l.CreateTopic("t", 1, nil)
			require.NoError(t, err)
			p, err := top.Partition(0)
			require.NoError(t, err)
			// Enough batches that the bad one lies past the log the first
			// read reads (up to the view index entry after it, ~8 KiB
			// rendered), which holds its bytes from before they went bad.
			for i := 0; i < 1000; i++ {
				_, err := p.Append(values(4, fmt.Sprintf("record-%03d", i)))
				require.NoError(t, err)
			}
			want := renderAll(t, p, f, 0)
			v, err := p.NewView(f, 0)
			require.NoError(t, err)
			defer v.Close()
			_, err = v.Size() // the view index covers every batch from here on
			require.NoError(t, err)
			buf := make([]byte, 100)
			_, err = v.ReadAt(buf, 0)
			require.NoError(t, err)

			// Corrupt a value a third of the way in (the CRC fails), and
			// put it back at the end for openLog's Check.
			seg := p.segments()[0]
			batches := batchesOf(t, seg, false)
			bad := len(batches) / 3
			before := len(want) - len(renderAll(t, p, f, record.Offset(4*bad))) // the batches before the bad one
			at := int64(batches[bad].Pos) + record.HeaderSize + 20
			lf, err := os.OpenFile(seg.logPath(), os.O_RDWR, 0)
			require.NoError(t, err)
			orig := make([]byte, 2)
			_, err = lf.ReadAt(orig, at)
			require.NoError(t, err)
			_, err = lf.WriteAt([]byte{orig[0] ^ 0xff, orig[1] ^ 0xff}, at)
			require.NoError(t, err)
			t.Cleanup(func() {
				_, err := lf.WriteAt(orig, at)
				require.NoError(t, err)
				require.NoError(t, lf.Close())
			})

			var got []byte
			off := int64(100)
			got = append(got, want[:100]...)
			for {
				k, err := v.ReadAt(buf, off)
				got = append(got, buf[:k]...)
				off += int64(k)
				if err != nil {
					require.ErrorIs(t, err, record.ErrCorrupt)
					break
				}
			}
			require.Equal(t, string(want[:before]), string(got), "every byte before the bad batch, and only those")
			for range 3 {
				_, err = v.ReadAt(buf, off)
				require.ErrorIs(t, err, record.ErrCorrupt, "read again at %d", off)
			}
		})
	}
}

// A values view index written with another interval between its entries
// (an older logfs's 32 KiB, or a denser one) is read back and used as it
// is: its entries are batch starts, right whatever the interval, so reads
// anywhere match a sequential rendering, before and after the log grows
// under the interval of now.
func TestViewIndexSidecarOtherInterval(t *testing.T) {
	now := viewInterval
	defer func() { viewInterval = now }()
	for _, old := range []int64{32 << 10, 1 << 10} {
		t.Run(fmt.Sprintf("written every %d bytes", old), func(t *testing.T) {
			viewInterval = old
			dir := t.TempDir()
			l, err := Open(dir, Options{Logger: testLogger(t)})
			require.NoError(t, err)
			top, _ := l.CreateTopic("t", 1, small("segment.bytes=400000"))
			p, _ := top.Partition(0)
			appendSome := func(n int) {
				for i := 0; i < n; i++ {
					recs := make([]Record, 64)
					for j := range recs {
						recs[j] = Record{Value: []byte(strings.Repeat(string(rune('a'+j%26)), 50+(i*7+j)%100))}
					}
					_, err := p.Append(recs)
					require.NoError(t, err)
				}
			}
			appendSome(80) // two segments: a sealed one and the active one
			require.Greater(t, len(p.SegmentBases()), 1)
			entries := func(p *Partition) []int {
				var n []int
				for _, s := range p.segments() {
					vi := s.views.get(s, Values)
					vi.mu.Lock()
					n = append(n, len(vi.entries))
					vi.mu.Unlock()
				}
				return n
			}
			written := entries(p)
			require.NoError(t, l.Close())

			viewInterval = now
			l, err = Open(dir, Options{Logger: testLogger(t)})
			require.NoError(t, err)
			defer l.Close()
			p, _ = l.Partition("t", 0)
			require.Equal(t, written, entries(p), "the sidecars are used as they were written")
			want := renderAll(t, p, Values, 0)
			v, err := p.NewView(Values, 0)
			require.NoError(t, err)
			checkReads(t, v, want, rand.New(rand.NewSource(3)))
			require.NoError(t, v.Close())

			appendSome(40) // the active segment's index goes on at the interval of now
			want = renderAll(t, p, Values, 0)
			v, err = p.NewView(Values, 0)
			require.NoError(t, err)
			checkReads(t, v, want, rand.New(rand.NewSource(4)))
			require.NoError(t, v.Close())
			require.NoError(t, l.Check())
		})
	}
}
