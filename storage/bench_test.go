package storage

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// The read benchmarks run on a partition of at least -logfs.bench-bytes
// (2 GiB by default) per record size, built once per process with the
// package itself in a temp dir and removed when the process exits. Every
// benchmark reports a ratio against raw file I/O of the same bytes measured
// in the same run ("x-raw": logfs throughput / raw throughput).
var benchBytes = flag.Int64("logfs.bench-bytes", 2<<30, "size of the partition the read benchmarks build")

var (
	benchRoot     string
	benchRootOnce sync.Once
	datasets      = map[[2]int]*dataset{}
	datasetsMu    sync.Mutex
)

// indexBudgetFlag runs the tests with another budget for view indexes'
// entries: 0 thins every sealed segment's index as far as it goes as soon
// as another index is used (see viewbudget.go).
var indexBudgetFlag = flag.Int64("logfs.index-budget", indexBudget, "bytes all view indexes' entries may take (indexBudget)")

func TestMain(m *testing.M) {
	flag.Parse()
	indexBudget = *indexBudgetFlag
	code := m.Run()
	if flagSet("logfs.index-budget") {
		fmt.Printf("view index budget %d bytes: indexes thinned %d times, made whole from sidecars %d times\n",
			*indexBudgetFlag, indexThins.Load(), indexReloads.Load())
	}
	if benchRoot != "" {
		os.RemoveAll(benchRoot)
	}
	os.Exit(code)
}

// flagSet reports whether the command line set the flag name.
func flagSet(name string) (set bool) {
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func benchDir(b *testing.B) string {
	benchRootOnce.Do(func() {
		d, err := os.MkdirTemp("", "logfs-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchRoot = d
	})
	d, err := os.MkdirTemp(benchRoot, "run-")
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// benchValue fills v with a value that names its offset.
func benchValue(v []byte, off int64) {
	binary.BigEndian.PutUint64(v, uint64(off))
	for i := 8; i < len(v); i++ {
		v[i] = byte('a' + (off+int64(i))%26)
	}
}

// dataset is a big partition of fixed-size records, appended in batches of
// a fixed number of records, with timestamps increasing by one millisecond
// per record.
type dataset struct {
	l       *Log
	p       *Partition
	records int64
	size    int
	batch   int
	ts0     int64
}

func getDataset(b *testing.B, size, batch int) *dataset {
	datasetsMu.Lock()
	defer datasetsMu.Unlock()
	if d := datasets[[2]int{size, batch}]; d != nil {
		return d
	}
	dir := benchDir(b)
	l, err := Open(dir, Options{Logger: testLogger(b), RetentionCheckInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	top, err := l.CreateTopic("bench", 1, small("flush.ms=-1", "retention.ms=-1"))
	if err != nil {
		b.Fatal(err)
	}
	p, _ := top.Partition(0)
	d := &dataset{l: l, p: p, size: size, batch: batch, ts0: 1_700_000_000_000}
	recs := make([]Record, batch)
	buf := make([]byte, batch*size)
	start := time.Now()
	for p.Size() < *benchBytes {
		for i := range recs {
			off := d.records + int64(i)
			v := buf[i*size : (i+1)*size]
			benchValue(v, off)
			recs[i] = Record{Timestamp: d.ts0 + off, Value: v}
		}
		if _, err := p.Append(recs); err != nil {
			b.Fatal(err)
		}
		d.records += int64(batch)
	}
	b.Logf("built %d MiB of %d-byte records in batches of %d (%d records, %d segments) in %v",
		p.Size()>>20, size, batch, d.records, len(p.SegmentBases()), time.Since(start).Round(time.Millisecond))
	datasets[[2]int{size, batch}] = d
	return d
}

var recordSizes = []int{100, 1024}

// rawAppend writes the same batches with write(2) to a plain file: the
// physical limit for appends. It returns the time taken.
func rawAppend(b *testing.B, batches [][]byte, n int, sync bool) time.Duration {
	f, err := os.Create(filepath.Join(benchDir(b), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var took time.Duration
	start, written := time.Now(), 0
	for i := 0; i < n; i++ {
		if _, err := f.Write(batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
		if written += len(batches[i%len(batches)]); written >= writebackEvery || i == n-1 {
			took += time.Since(start)
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
			start, written = time.Now(), 0
		}
	}
	return took
}

// writebackEvery is how much an append benchmark writes before it flushes,
// untimed: the kernel throttles a writer with too many dirty pages, which
// would measure the disk and the throttle instead of the append path.
const writebackEvery = 256 << 20

func BenchmarkAppend(b *testing.B) {
	for _, size := range recordSizes {
		for _, batch := range []int{1, 64} {
			for _, sync := range []bool{false, true} {
				name := fmt.Sprintf("record=%dB/batch=%d/fsync=%v", size, batch, sync)
				b.Run(name, func(b *testing.B) { benchAppend(b, size, batch, sync) })
			}
		}
	}
}

// benchPartition opens a log in a fresh benchmark directory holding one
// topic of one partition with the settings kv; done closes the log and
// removes the directory (deferred by the caller: b.Cleanup would keep the
// data of every b.N round until the benchmark ends).
func benchPartition(b *testing.B, kv ...string) (p *Partition, done func()) {
	dir := benchDir(b)
	l, err := Open(dir, Options{Logger: testLogger(b), RetentionCheckInterval: -1})
	if err != nil {
		os.RemoveAll(dir)
		b.Fatal(err)
	}
	done = func() {
		l.Close()
		os.RemoveAll(dir)
	}
	top, err := l.CreateTopic("bench", 1, small(kv...))
	if err != nil {
		done()
		b.Fatal(err)
	}
	p, _ = top.Partition(0)
	return p, done
}

func benchAppend(b *testing.B, size, batch int, sync bool) {
	p, done := benchPartition(b, "flush.ms=-1")
	defer done()
	// A few distinct batches, reused: the same bytes go to the raw file.
	sets := make([][]Record, 8)
	raws := make([][]byte, len(sets))
	for s := range sets {
		sets[s] = make([]Record, batch)
		var bl record.Builder
		for i := range sets[s] {
			v := make([]byte, size)
			benchValue(v, int64(s*batch+i))
			sets[s][i] = Record{Timestamp: 1_700_000_000_000, Value: v}
			bl.Append(1_700_000_000_000, nil, v, nil)
		}
		raw, _ := bl.Build()
		raws[s] = append([]byte(nil), raw...)
	}
	// The baseline runs first and ends with its data on disk, so neither
	// side pays for the other's writeback; both flush, untimed, every
	// writebackEvery bytes.
	raw := rawAppend(b, raws, b.N, sync)
	b.SetBytes(int64(size * batch))
	b.ReportAllocs()
	b.ResetTimer()
	written := 0
	for i := 0; i < b.N; i++ {
		if _, err := p.Append(sets[i%len(sets)]); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := p.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		if written += len(raws[i%len(raws)]); written >= writebackEvery {
			b.StopTimer()
			if err := p.Sync(); err != nil {
				b.Fatal(err)
			}
			written = 0
			b.StartTimer()
		}
	}
	b.StopTimer()
	ours := b.Elapsed()
	b.ReportMetric(float64(raw)/float64(ours), "x-raw")
	b.ReportMetric(float64(b.N*batch)/ours.Seconds(), "records/s")
}

// BenchmarkAppendWrite appends what one 1 MiB write(2) to an append file
// hands the partition: a MiB of lines as records with values only, at the
// wall clock's time (timestamp 0), in one call. It is the storage part of
// the mount's cat >> append, without FUSE.
func BenchmarkAppendWrite(b *testing.B) {
	benchAppendWrite(b, func(p *Partition, values [][]byte, recs []Record) error {
		_, err := p.Append(recs)
		return err
	})
}

// BenchmarkAppendValuesWrite is BenchmarkAppendWrite through
// Partition.AppendValues, which the append file calls: the lines of a 1 MiB
// write as values, in one call.
func BenchmarkAppendValuesWrite(b *testing.B) {
	benchAppendWrite(b, func(p *Partition, values [][]byte, recs []Record) error {
		_, err := p.AppendValues(values)
		return err
	})
}

// benchAppendWrite times appendMiB, given a MiB of values and the same as
// records, for each record size, with the page cache written back now and
// then outside the timer.
func benchAppendWrite(b *testing.B, appendMiB func(p *Partition, values [][]byte, recs []Record) error) {
	for _, size := range recordSizes {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			p, done := benchPartition(b, "flush.ms=-1")
			defer done()
			values := make([][]byte, (1<<20)/(size+1))
			recs := make([]Record, len(values))
			for i := range values {
				values[i] = make([]byte, size)
				benchValue(values[i], int64(i))
				recs[i] = Record{Value: values[i]}
			}
			b.SetBytes(int64(len(values) * (size + 1)))
			b.ReportAllocs()
			b.ResetTimer()
			written := 0
			for i := 0; i < b.N; i++ {
				if err := appendMiB(p, values, recs); err != nil {
					b.Fatal(err)
				}
				if written += len(values) * (size + 16); written >= writebackEvery {
					b.StopTimer()
					if err := p.Sync(); err != nil {
						b.Fatal(err)
					}
					written = 0
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkAppendRoll appends 1 MiB batches (64 records of 16 KiB) to a
// partition whose segments hold one each, so every append rolls: it
// measures what a roll costs the appender (new files, sealed indexes, the
// view index sidecar), with the append itself.
func BenchmarkAppendRoll(b *testing.B) {
	p, done := benchPartition(b, "segment.bytes=1200000", "flush.ms=-1", "retention.ms=-1")
	defer done()
	recs := make([]Record, 64)
	for i := range recs {
		recs[i].Value = make([]byte, 16<<10)
		benchValue(recs[i].Value, int64(i))
	}
	b.SetBytes(64 << 14)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Append(recs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if segs := len(p.SegmentBases()); segs < b.N {
		b.Fatalf("%d segments after %d appends: not every append rolled", segs, b.N)
	}
}

// Lookups run on partitions written in batches of 1 record (what a producer
// without linger sends) and of 64: a lookup reads and checks the whole batch
// that holds its record, so big batches cost what reading them costs.
var lookupBatches = []int{1, 64}

func BenchmarkLookupOffset(b *testing.B) {
	for _, size := range recordSizes {
		for _, batch := range lookupBatches {
			b.Run(fmt.Sprintf("record=%dB/batch=%d", size, batch), func(b *testing.B) { benchLookupOffset(b, size, batch) })
		}
	}
}

func benchLookupOffset(b *testing.B, size, batch int) {
	d := getDataset(b, size, batch)
	r, err := d.p.NewReader(0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	rng := rand.New(rand.NewSource(1))
	targets := make([]record.Offset, 1<<16)
	for i := range targets {
		targets[i] = record.Offset(rng.Int63n(d.records))
	}
	// Warm the page cache and the indexes.
	for _, off := range targets[:4096] {
		if err := r.Seek(off); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := targets[i&(len(targets)-1)]
		if err := r.Seek(off); err != nil {
			b.Fatal(err)
		}
		rec, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		if rec.Offset != off || int64(binary.BigEndian.Uint64(rec.Value)) != int64(off) {
			b.Fatalf("lookup %d got offset %d value %x", off, rec.Offset, rec.Value[:8])
		}
	}
	b.StopTimer()
	ours := b.Elapsed() / time.Duration(b.N)
	raw := rawLookup(b, d, targets)
	b.ReportMetric(float64(raw)/float64(ours), "x-raw")
}

// rawLookup is the floor for a lookup: one pread of a record whose position
// is already known (no index, no search). It returns the time per lookup.
func rawLookup(b *testing.B, d *dataset, targets []record.Offset) time.Duration {
	segs := d.p.segments()
	files := make([]*os.File, len(segs))
	for i, s := range segs {
		f, err := os.Open(s.logPath())
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	// Records are fixed-size in batches of one size: compute positions
	// instead of searching.
	seg0 := segs[0]
	sc := record.NewScanner(seg0.log, 0, record.Position(seg0.size.Load()), record.ScanOptions{HeadersOnly: true})
	sc.Next()
	batchSize := sc.Batch().Size()
	buf := make([]byte, d.size)
	start := time.Now()
	for _, off := range targets {
		i := sort.Search(len(segs), func(i int) bool { return segs[i].base > off }) - 1
		rel := int64(off - segs[i].base)
		k := int64(d.batch)
		pos := rel/k*batchSize + record.HeaderSize + (rel%k)*(batchSize-record.HeaderSize)/k
		if _, err := files[i].ReadAt(buf, pos); err != nil && err != io.EOF {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(len(targets))
}

func BenchmarkLookupTime(b *testing.B) {
	for _, size := range recordSizes {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			d := getDataset(b, size, 64)
			rng := rand.New(rand.NewSource(2))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := rng.Int63n(d.records)
				got, err := d.p.OffsetForTime(d.ts0 + off)
				if err != nil {
					b.Fatal(err)
				}
				if int64(got) != off {
					b.Fatalf("time %d: got offset %d, want %d", d.ts0+off, got, off)
				}
			}
		})
	}
}

func BenchmarkSequentialRead(b *testing.B) {
	for _, size := range recordSizes {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			d := getDataset(b, size, 64)
			b.SetBytes(d.p.Size())
			rawBytes, raw := rawRead(b, d)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := d.p.NewReader(0)
				if err != nil {
					b.Fatal(err)
				}
				var n int64
				for {
					rec, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n += int64(len(rec.Value))
				}
				r.Close()
				if n != d.records*int64(d.size) {
					b.Fatalf("read %d value bytes, want %d", n, d.records*int64(d.size))
				}
			}
			b.StopTimer()
			ours := float64(d.p.Size()) * float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(ours/(float64(rawBytes)/raw.Seconds()), "x-raw")
		})
	}
}

// rawRead reads the dataset's .log files with read(2) in 1 MiB chunks: the
// physical limit for a sequential read.
func rawRead(b *testing.B, d *dataset) (int64, time.Duration) {
	buf := make([]byte, 1<<20)
	var n int64
	start := time.Now()
	for _, s := range d.p.segments() {
		f, err := os.Open(filepath.Join(d.p.Dir(), layout.SegmentFileName(s.base, layout.LogSuffix)))
		if err != nil {
			b.Fatal(err)
		}
		for {
			k, err := f.Read(buf)
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
	return n, time.Since(start)
}

// BenchmarkViewRandomRead opens a values view at a random offset and reads
// from its start: 8 KiB, as a pread or tail does, and 1 MiB, a whole
// request, as `head -n 1 offset/N` through the mount does.
func BenchmarkViewRandomRead(b *testing.B) {
	for _, size := range recordSizes {
		for _, read := range []int{8 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("record=%dB/read=%dKiB", size, read>>10), func(b *testing.B) {
				d := getDataset(b, size, 64)
				rng := rand.New(rand.NewSource(1))
				buf := make([]byte, read)
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
}

// BenchmarkViewSequential reads a whole values view in 1 MiB reads, as cat
// through the mount does, against read(2) of the .log files.
func BenchmarkViewSequential(b *testing.B) {
	for _, size := range recordSizes {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			d := getDataset(b, size, 64)
			rawBytes, raw := rawRead(b, d)
			buf := make([]byte, 1<<20)
			var rendered int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				v, err := d.p.NewView(Values, 0)
				if err != nil {
					b.Fatal(err)
				}
				rendered = 0
				for {
					n, err := v.ReadAt(buf, rendered)
					rendered += int64(n)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				v.Close()
			}
			b.StopTimer()
			if want := d.records * int64(d.size+1); rendered != want {
				b.Fatalf("rendered %d bytes, want %d", rendered, want)
			}
			ours := float64(rendered) * float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(ours/1e6, "MB/s-rendered")
			b.ReportMetric(ours/(float64(rawBytes)/raw.Seconds()), "x-raw")
		})
	}
}
