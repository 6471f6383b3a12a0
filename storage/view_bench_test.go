package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// bigBatch is the records of a batch written by one 1 MiB write (cat >>
// append, logfs produce): the batches a random read through the mount
// lands in most often, and must not decode from their start.
func bigBatch(size int) int { return (1 << 20) / (size + 24) }

// BenchmarkViewOpen opens a values view at a random offset and reads its
// first 4 KiB, as `head -n 1 offset/N` makes the mount do, on data in
// batches of 1 MiB writes.
func BenchmarkViewOpen(b *testing.B) {
	for _, size := range recordSizes {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			d := getDataset(b, size, bigBatch(size))
			rng := rand.New(rand.NewSource(1))
			buf := make([]byte, 4096)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := record.Offset(rng.Int63n(d.records))
				v, err := d.p.NewView(Values, off)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := v.ReadAt(buf, 0); err != nil && err != io.EOF {
					b.Fatal(err)
				}
				v.Close()
			}
		})
	}
}

// BenchmarkViewPread reads 8 KiB (the two pages of an unaligned 4 KiB
// pread through the page cache) at random positions of one values view
// from offset 0, on data in batches of 1 MiB writes.
func BenchmarkViewPread(b *testing.B) {
	for _, size := range recordSizes {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			d := getDataset(b, size, bigBatch(size))
			v, err := d.p.NewView(Values, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer v.Close()
			total := d.records * int64(size+1)
			rng := rand.New(rand.NewSource(2))
			buf := make([]byte, 8192)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				at := rng.Int63n(total-int64(len(buf))) &^ 4095
				if n, err := v.ReadAt(buf, at); err != nil || n != len(buf) {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// Views of big batches (those that get marks, see viewinner.go) read the
// same bytes as a sequential rendering everywhere: at random positions and
// sizes before and after the marks exist, sequentially across reads that
// end inside a batch, and from views that start inside one.
func TestViewBigBatches(t *testing.T) {
	t.Parallel() // its own folder and no package settings: runs beside the other slow ones
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=8000000"))
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 7; i++ {
		recs := make([]Record, 300+rng.Intn(700))
		if i%3 == 0 {
			recs = recs[:1+rng.Intn(5)] // small batches between big ones
		}
		for j := range recs {
			v := bytes.Repeat([]byte{byte('a' + rng.Intn(26))}, rng.Intn(400))
			if rng.Intn(400) == 0 {
				v = bytes.Repeat([]byte("x"), 70000) // a record longer than a window
			}
			recs[j] = Record{Value: v, Key: []byte(fmt.Sprint(i, j))}
		}
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	end := int64(p.EndOffset())
	for _, f := range []Format{Values, JSONL} {
		want := renderAll(t, p, f, 0)
		// starts[o]: where offset o's rendering begins in want.
		starts := make([]int, 0, end+1)
		r, err := p.NewReader(0)
		require.NoError(t, err)
		var one []byte
		for at := 0; ; {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			starts = append(starts, at)
			one = f.Append(one[:0], rec)
			at += len(one)
		}
		starts = append(starts, len(want))
		r.Close()
		v, err := p.NewView(f, 0)
		require.NoError(t, err)
		for pass := range 2 { // the first makes the marks, the second uses them
			checkReads(t, v, want, rng)
			s := p.segments()[0]
			require.NotEmpty(t, s.views.get(s, f).inner, "pass %d: big batches have marks", pass)
		}
		require.NoError(t, v.Close())
		for k := 0; k < 60; k++ {
			from := record.Offset(rng.Int63n(end + 1))
			v, err := p.NewView(f, from)
			require.NoError(t, err)
			wantFrom := want[starts[from]:]
			size, err := v.Size()
			require.NoError(t, err)
			require.Equal(t, int64(len(wantFrom)), size, "%v from %d", f, from)
			b := make([]byte, 1+rng.Intn(20000))
			n, err := v.ReadAt(b, 0)
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
			}
			require.Equal(t, string(wantFrom[:min(len(b), len(wantFrom))]), string(b[:n]), "%v from %d", f, from)
			require.NoError(t, v.Close())
		}
	}
}

// BenchmarkViewSequentialBig reads a whole values view in 1 MiB reads, as
// the kernel's read-ahead asks the mount, on data in batches of 1 MiB
// writes, whose batches straddle every read.
func BenchmarkViewSequentialBig(b *testing.B) {
	for _, size := range recordSizes {
		// views=2 serves the reads in turn on two views, as the mount serves
		// the kernel's read-ahead: two requests in flight, each on a view
		// of its own, so that every read starts where the other view's
		// read ended, not its own.
		for _, views := range []int{1, 2} {
			b.Run(fmt.Sprintf("record=%dB/views=%d", size, views), func(b *testing.B) {
				d := getDataset(b, size, bigBatch(size))
				buf := make([]byte, 1<<20)
				var rendered int64
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuTime()
				for i := 0; i < b.N; i++ {
					vs := make([]*View, views)
					for k := range vs {
						v, err := d.p.NewView(Values, 0)
						if err != nil {
							b.Fatal(err)
						}
						vs[k] = v
					}
					for k, rendered0 := 0, int64(-1); rendered != rendered0; k++ {
						if k == 0 {
							rendered = 0
						}
						rendered0 = rendered
						n, err := vs[k%views].ReadAt(buf, rendered)
						rendered += int64(n)
						if err != nil && err != io.EOF {
							b.Fatal(err)
						}
					}
					for _, v := range vs {
						v.Close()
					}
				}
				b.StopTimer()
				cpu := cpuTime() - cpu0
				if want := d.records * int64(d.size+1); rendered != want {
					b.Fatalf("rendered %d bytes, want %d", rendered, want)
				}
				b.ReportMetric(float64(rendered)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s-rendered")
				// CPU time moves less than elapsed time with what else runs.
				b.ReportMetric(float64(cpu.Milliseconds())/(float64(rendered)*float64(b.N)/(1<<30)), "cpu-ms/GiB")
			})
		}
	}
}

// BenchmarkViewFirstReadBig is BenchmarkViewSequentialBig's two views in
// turn on batches that have no marks yet, as a fresh mount's first read
// of data written by 1 MiB writes (cat >> append, logfs produce): every
// request that starts inside a batch reads it whole, checks it and marks
// it, and the request before it, on the other view, reads on into it.
// The marks are dropped before each pass, outside the timer.
func BenchmarkViewFirstReadBig(b *testing.B) {
	for _, size := range recordSizes {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			d := getDataset(b, size, bigBatch(size))
			buf := make([]byte, 1<<20)
			var rendered, total int64
			var cpu time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for _, s := range d.p.segments() {
					s.views.dropInner()
				}
				var vs [2]*View
				for k := range vs {
					v, err := d.p.NewView(Values, 0)
					if err != nil {
						b.Fatal(err)
					}
					vs[k] = v
				}
				b.StartTimer()
				cpu0 := cpuTime()
				// Requests in pairs, the second served first, each pair
				// on the two views, as two requests in flight are.
				rendered = 0
				for off, done := int64(0), false; !done; off += 2 * int64(len(buf)) {
					for _, k := range []int{1, 0} {
						n, err := vs[k].ReadAt(buf, off+int64(k*len(buf)))
						if err != nil && err != io.EOF {
							b.Fatal(err)
						}
						rendered += int64(n)
						done = done || n < len(buf)
					}
				}
				cpu += cpuTime() - cpu0
				b.StopTimer()
				for _, v := range vs {
					v.Close()
				}
				b.StartTimer()
				total += rendered
			}
			b.StopTimer()
			if want := d.records * int64(d.size+1); rendered != want {
				b.Fatalf("rendered %d bytes, want %d", rendered, want)
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds()/1e6, "MB/s-rendered")
			b.ReportMetric(float64(cpu.Milliseconds())/(float64(total)/(1<<30)), "cpu-ms/GiB")
		})
	}
}

// Marks are bounded: past innerMax batches of a segment a batch's marks
// replace another's (and reads stay right), and they go with the segment.
func TestViewMarksBounded(t *testing.T) {
	defer func(n int) { innerMax = n }(innerMax)
	innerMax = 2
	before := innerBytes.Load()
	t.Cleanup(func() { // after the log's own cleanup closed it
		require.Equal(t, before, innerBytes.Load(), "the marks go with the segment")
	})
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=8000000"))
	p, _ := top.Partition(0)
	for i := 0; i < 6; i++ {
		recs := make([]Record, 300)
		for j := range recs {
			recs[j] = Record{Value: bytes.Repeat([]byte{byte('a' + i)}, 300)}
		}
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	want := renderAll(t, p, Values, 0)
	v, err := p.NewView(Values, 0)
	require.NoError(t, err)
	checkReads(t, v, want, rand.New(rand.NewSource(5)))
	s := p.segments()[0]
	vi := s.views.get(s, Values)
	vi.mu.Lock()
	require.Len(t, vi.inner, 2)
	vi.mu.Unlock()
	require.Greater(t, innerBytes.Load(), before)
	require.NoError(t, v.Close())
}

// Every big batch of a full-size segment keeps its marks: a default 1 GiB
// segment of 1 MiB writes holds more than a thousand batches, and random
// reads across it must not drop one batch's marks to make another's (each
// dropped one costs the next read there the whole batch again).
func TestViewMarksWholeSegment(t *testing.T) {
	const batches = 1100 // past the 1024 innerMax once was
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, nil)
	p, _ := top.Partition(0)
	value := bytes.Repeat([]byte("m"), innerMin/2+1) // two make a big batch
	for i := 0; i < batches; i++ {
		_, err := p.Append([]Record{{Value: value}, {Value: value}})
		require.NoError(t, err)
	}
	require.Len(t, p.segments(), 1)
	v, err := p.NewView(Values, 0)
	require.NoError(t, err)
	defer v.Close()
	one := make([]byte, 1)
	for i := 0; i < batches; i++ {
		at := int64(i)*2*int64(len(value)+1) + int64(len(value)) + 1 // the batch's second record
		_, err := v.ReadAt(one, at)
		require.NoError(t, err)
		require.Equal(t, byte('m'), one[0])
	}
	s := p.segments()[0]
	vi := s.views.get(s, Values)
	vi.mu.Lock()
	marked := len(vi.inner)
	vi.mu.Unlock()
	require.Equal(t, batches, marked, "batches with marks")
}

// BenchmarkViewPreadSmallBatches reads at random positions of one values
// view from offset 0, on data in batches of 64 records (what `logfs bench`
// writes): each read lands at a new position, renders from the view index
// entry before it, and checks the batches it passes. read=8KiB is what an
// unaligned 4 KiB pread through the page cache asks of the mount. With
// marks=dropped, every read finds no marks (viewinner.go), as a first read
// of a big batch does (64 records of 1 KiB make one).
func BenchmarkViewPreadSmallBatches(b *testing.B) {
	for _, size := range recordSizes {
		for _, c := range []struct {
			read int
			drop bool
		}{{4 << 10, false}, {8 << 10, false}, {8 << 10, true}} {
			read := c.read
			name := fmt.Sprintf("record=%dB/read=%dKiB", size, read>>10)
			if c.drop {
				name += "/marks=dropped"
			}
			b.Run(name, func(b *testing.B) {
				d := getDataset(b, size, 64)
				v, err := d.p.NewView(Values, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer v.Close()
				total := d.records * int64(size+1)
				rng := rand.New(rand.NewSource(3))
				buf := make([]byte, read)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					at := rng.Int63n(total-int64(len(buf))) &^ 4095
					if c.drop {
						b.StopTimer()
						for _, vi := range v.idx {
							vi.dropInner()
						}
						b.StartTimer()
					}
					if n, err := v.ReadAt(buf, at); err != nil || n != len(buf) {
						b.Fatal(n, err)
					}
				}
			})
		}
	}
}

// BenchmarkPreadByWriteSize is the machine, not logfs: random preads of a
// file that is in the page cache run at about half the speed when it was
// written in small writes (a batch of 64 records of 100 B, 7.5 KB, as
// `logfs bench` writes its data set) as when it was written in 1 MiB
// writes, as the page cache then holds it in small folios. A log's
// random reads through the mount pay this, against a plain file written
// whole. It prints the small writes' time per read as a ratio to the big
// ones' (x-1MiB-writes, above 1 slower), both measured in this run.
func BenchmarkPreadByWriteSize(b *testing.B) {
	const size = 128 << 20
	for _, read := range []int{16 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("read=%dKiB", read>>10), func(b *testing.B) {
			timeReads := func(write int) time.Duration {
				path := filepath.Join(benchDir(b), "file")
				defer os.Remove(path)
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				chunk := make([]byte, write)
				for off := 0; off < size; off += write {
					if _, err := f.WriteAt(chunk[:min(write, size-off)], int64(off)); err != nil {
						b.Fatal(err)
					}
				}
				rng := rand.New(rand.NewSource(1))
				buf := make([]byte, read)
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if _, err := f.ReadAt(buf, rng.Int63n(size-int64(read))); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			small := timeReads(7500)
			big := timeReads(1 << 20)
			b.ReportMetric(float64(small.Nanoseconds())/float64(b.N), "ns/read-small-writes")
			b.ReportMetric(float64(big.Nanoseconds())/float64(b.N), "ns/read-1MiB-writes")
			b.ReportMetric(float64(small)/float64(big), "x-1MiB-writes")
		})
	}
}

// BenchmarkViewIndexMemory reports the heap a log keeps once a view has
// read a whole data set (batches of 64 records), per GB shown, in each
// format: the view indexes, and the marks of big batches, that stay with
// each segment until it is deleted or the log closes, within their budgets
// (README, Limits; the data set is smaller than them). The
// data set is opened again read-only for each pass: its indexes are read
// from the sidecars of sealed segments and built by the reading for the
// others, as a mount of a data directory gets them.
func BenchmarkViewIndexMemory(b *testing.B) {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // and sync.Pool's victims
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for _, size := range recordSizes {
		for _, f := range []Format{Values, JSONL} {
			b.Run(fmt.Sprintf("record=%dB/format=%v", size, f), func(b *testing.B) {
				d := getDataset(b, size, 64)
				buf := make([]byte, 1<<20)
				var kept, shown int64
				for i := 0; i < b.N; i++ {
					l, err := Open(d.l.Dir(), Options{ReadOnly: true, Logger: testLogger(b), RetentionCheckInterval: -1})
					require.NoError(b, err)
					p, err := l.Partition("bench", 0)
					require.NoError(b, err)
					before := heap()
					v, err := p.NewView(f, 0)
					require.NoError(b, err)
					for shown = 0; ; {
						n, err := v.ReadAt(buf, shown)
						shown += int64(n)
						if err == io.EOF {
							break
						}
						require.NoError(b, err)
					}
					require.NoError(b, v.Close())
					kept = int64(heap()) - int64(before)
					require.NoError(b, l.Close())
				}
				b.ReportMetric(float64(kept)/float64(shown)*1e3, "MB-kept/GB-shown")
				b.ReportMetric(float64(kept)/1e6, "MB-kept")
			})
		}
	}
}

// BenchmarkViewIndexBudget reads a partition of segments of 64 MiB (100 B
// records in batches of 64, -logfs.bench-bytes of them) whole, then at
// random positions (4 KiB preads), with the budget of view indexes'
// entries (indexBudget) unbounded and at 1 MiB, about five segments'
// entries: the heap the log keeps after the sequential read, and what a
// random read costs when most land in a segment whose entries were
// dropped and come back, from the sidecar or, without sidecars (a Kafka
// data directory), from the log. "x-unbounded" is the random reads'
// speed against the unbounded budget's in the same run.
func BenchmarkViewIndexBudget(b *testing.B) {
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	dir := benchDir(b)
	func() {
		l, err := Open(dir, Options{Logger: testLogger(b), RetentionCheckInterval: -1})
		require.NoError(b, err)
		defer l.Close()
		top, err := l.CreateTopic("t", 1, small("segment.bytes=67108864", "flush.ms=-1", "retention.ms=-1"))
		require.NoError(b, err)
		p, _ := top.Partition(0)
		recs := make([]Record, 64)
		buf := make([]byte, 64*100)
		for off := int64(0); p.Size() < *benchBytes; off += 64 {
			for i := range recs {
				benchValue(buf[i*100:(i+1)*100], off+int64(i))
				recs[i] = Record{Value: buf[i*100 : (i+1)*100]}
			}
			_, err := p.Append(recs)
			require.NoError(b, err)
		}
		b.Logf("%d MiB in %d segments", p.Size()>>20, len(p.SegmentBases()))
	}()
	var unbounded [2]float64 // µs a random read, with and without sidecars
	for k, sidecars := range []bool{true, false} {
		if !sidecars {
			names, _ := filepath.Glob(filepath.Join(dir, "t-0", "*.viewindex"))
			for _, name := range names {
				require.NoError(b, os.Remove(name))
			}
		}
		for _, budget := range []int64{1 << 50, 1 << 20} {
			name := "unbounded"
			if budget < 1<<50 {
				name = fmt.Sprintf("%dKiB", budget>>10)
			}
			b.Run(fmt.Sprintf("sidecars=%v/budget=%s", sidecars, name), func(b *testing.B) {
				defer func(old int64) { indexBudget = old }(indexBudget)
				indexBudget = budget
				buf := make([]byte, 4096)
				big := make([]byte, 1<<20)
				var kept, shown int64
				var each time.Duration
				thins, reloads := indexThins.Load(), indexReloads.Load()
				for i := 0; i < b.N; i++ {
					l, err := Open(dir, Options{ReadOnly: true, Logger: testLogger(b), RetentionCheckInterval: -1})
					require.NoError(b, err)
					p, err := l.Partition("t", 0)
					require.NoError(b, err)
					before := heap()
					v, err := p.NewView(Values, 0)
					require.NoError(b, err)
					for shown = 0; ; {
						n, err := v.ReadAt(big, shown)
						shown += int64(n)
						if err == io.EOF {
							break
						}
						require.NoError(b, err)
					}
					kept = heap() - before
					rng := rand.New(rand.NewSource(1))
					const reads = 2000
					start := time.Now()
					for r := 0; r < reads; r++ {
						_, err := v.ReadAt(buf, rng.Int63n(shown-int64(len(buf))))
						require.NoError(b, err)
					}
					each = time.Since(start) / reads
					require.NoError(b, v.Close())
					require.NoError(b, l.Close())
				}
				us := float64(each.Nanoseconds()) / 1e3
				if budget == 1<<50 {
					unbounded[k] = us
				} else if unbounded[k] > 0 {
					b.ReportMetric(unbounded[k]/us, "x-unbounded")
				}
				b.ReportMetric(float64(kept)/1e6, "MB-kept")
				b.ReportMetric(us, "µs/random-read")
				b.ReportMetric(float64(indexReloads.Load()-reloads)/float64(b.N), "reloads/op")
				b.ReportMetric(float64(indexThins.Load()-thins)/float64(b.N), "thins/op")
			})
		}
	}
}
