package integration

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// The read benchmarks share one partition of benchRecords records of
// benchValue bytes (1 KiB rendered with its newline, 1 GiB in all), in
// batches of benchBatch records (16 KiB, a Kafka producer's default
// batch.size), written with package storage into a temporary data
// directory that TestMain removes, and a plain text file with the same
// bytes as offset/0 for the baselines.
const (
	benchValue   = 1023
	benchRecords = 1 << 20
	benchBatch   = 16
	benchTopic   = "bench"
)

var (
	benchOnce sync.Once
	benchDir  string // data directory and plain copy
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchValueOf returns record i's value: printable, no newline.
func benchValueOf(buf []byte, i int) []byte {
	buf = fmt.Appendf(buf[:0], "record %09d ", i)
	for len(buf) < benchValue {
		buf = append(buf, byte('a'+(len(buf)+i)%26))
	}
	return buf
}

// benchData builds (once) the 1 GiB partition and its plain copy and
// returns the data directory and the plain file.
func benchData(b *testing.B) (data, plain string) {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "logfs-bench-")
		if benchErr != nil {
			return
		}
		benchErr = buildBenchData(filepath.Join(benchDir, "data"), filepath.Join(benchDir, "plain.txt"))
	})
	require.NoError(b, benchErr)
	return filepath.Join(benchDir, "data"), filepath.Join(benchDir, "plain.txt")
}

func buildBenchData(data, plain string) error {
	l, err := storage.Open(data, storage.Options{RetentionCheckInterval: -1, Defaults: storage.Overrides{"retention.ms": -1}})
	if err != nil {
		return err
	}
	defer l.Close()
	t, err := l.CreateTopic(benchTopic, 1, nil)
	if err != nil {
		return err
	}
	p, _ := t.Partition(0)
	f, err := os.Create(plain)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	const batch = benchBatch
	recs := make([]storage.Record, 0, batch)
	bufs := make([][]byte, batch)
	for i := 0; i < benchRecords; {
		recs = recs[:0]
		for j := 0; j < batch && i < benchRecords; j, i = j+1, i+1 {
			bufs[j] = benchValueOf(bufs[j], i)
			recs = append(recs, storage.Record{Value: bufs[j]})
			w.Write(bufs[j])
			w.WriteByte('\n')
		}
		if _, err := p.Append(recs); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return l.Close()
}

// benchMount opens the benchmark data read-only and mounts it.
func benchMount(b *testing.B, o fs.Options) (mnt, data, plain string) {
	data, plain = benchData(b)
	l := openLog(b, data, storage.Options{ReadOnly: true})
	return mount(b, l, o), data, plain
}

// readModes are the two ways record files can be read (fs.Options.DirectIO).
var readModes = []struct {
	name string
	opts fs.Options
}{
	{"pagecache", fs.Options{}},
	{"direct", fs.Options{DirectIO: true}},
}

// timeScript runs a script n times and returns the fastest run.
func timeScript(b *testing.B, n int, script string) time.Duration {
	b.Helper()
	best := time.Duration(1<<63 - 1)
	for range n {
		start := time.Now()
		_, errOut, err := run(context.Background(), script)
		require.NoError(b, err, "%s: %s", script, errOut)
		best = min(best, time.Since(start))
	}
	return best
}

// reportRatio reports how fast the mount was against the plain-file
// baseline measured in the same run: x-plain > 1 means faster.
func reportRatio(b *testing.B, base time.Duration, baseBytes int64, elapsed time.Duration, bytesPerOp int64) {
	perOp := elapsed / time.Duration(b.N)
	if baseBytes > 0 && bytesPerOp > 0 {
		b.ReportMetric((float64(bytesPerOp)/perOp.Seconds())/(float64(baseBytes)/base.Seconds()), "x-plain")
		b.ReportMetric(float64(baseBytes)/base.Seconds()/1e6, "plain-MB/s")
	} else {
		b.ReportMetric(float64(base)/float64(perOp), "x-plain")
		b.ReportMetric(float64(base.Microseconds())/1e3, "plain-ms/op")
	}
	b.ReportMetric(float64(perOp.Microseconds())/1e3, "ms/op")
}

func fileSize(b *testing.B, paths ...string) int64 {
	var n int64
	for _, p := range paths {
		st, err := os.Stat(p)
		require.NoError(b, err)
		n += st.Size()
	}
	return n
}

// BenchmarkCat reads the whole 1 GiB partition through the mount with cat,
// against cat of the raw .log files, both from a warm page cache: the
// mount's file is read once before the timer starts (see BenchmarkCatCold
// for the first read). It runs with direct I/O (the default) and with
// fs.Options.DirectIO.
func BenchmarkCat(b *testing.B) {
	for _, m := range readModes {
		b.Run(m.name, func(b *testing.B) {
			mnt, data, _ := benchMount(b, m.opts)
			benchCat(b, data, func(*testing.B) string { return mnt }, !m.opts.DirectIO, true)
		})
	}
}

// BenchmarkCatCold is BenchmarkCat with a new mount for every read, so the
// kernel has nothing of the file cached and every byte is rendered by the
// mount (the .log files stay in the page cache, as for the baseline).
func BenchmarkCatCold(b *testing.B) {
	for _, m := range readModes {
		b.Run(m.name, func(b *testing.B) {
			data, _ := benchData(b)
			l := openLog(b, data, storage.Options{ReadOnly: true})
			benchCat(b, data, func(b *testing.B) string {
				fusetest.Require(b)
				mp := b.TempDir()
				o := m.opts
				o.Logger = logger(b)
				srv, err := fs.Mount(mp, l, o)
				require.NoError(b, err)
				b.Cleanup(func() { unmount(b, srv) })
				return mp
			}, !m.opts.DirectIO, false)
		})
	}
}

func benchCat(b *testing.B, data string, mnt func(*testing.B) string, pageCache, warm bool) {
	logs, err := filepath.Glob(filepath.Join(data, benchTopic+"-0", "*.log"))
	require.NoError(b, err)
	rawBytes := fileSize(b, logs...)
	rawScript := "cat " + joinQ(logs) + " > /dev/null"
	timeScript(b, 1, rawScript) // warm
	base := timeScript(b, 3, rawScript)
	offset0 := func() string { return filepath.Join(part(mnt(b), benchTopic, 0), "offset", "0") }
	var file string
	if warm {
		file = offset0()
		timeScript(b, 1, "cat "+q(file)+" > /dev/null")
	}
	var elapsed time.Duration
	var size int64
	b.ResetTimer()
	for range b.N {
		if !warm {
			b.StopTimer()
			file = offset0()
			b.StartTimer()
		}
		size = fileSize(b, file)
		start := time.Now()
		sh(b, "cat %s > /dev/null", q(file))
		elapsed += time.Since(start)
	}
	b.StopTimer()
	b.SetBytes(size)
	reportRatio(b, base, rawBytes, elapsed, size)
	if !pageCache {
		// Every byte goes through the server: compare with one that
		// does nothing but reply.
		floor := timeFloor(b, size)
		perOp := elapsed / time.Duration(b.N)
		b.ReportMetric(float64(size)/floor.Seconds()/1e6, "floor-MB/s")
		b.ReportMetric(floor.Seconds()/perOp.Seconds(), "x-floor")
	}
}

// timeFloor returns the fastest of three cats of a floor file of size
// bytes with direct I/O (see floor_test.go): the reads benchCat times,
// from a server that does nothing but reply. Like the plain baseline it is
// the best of three runs where the mount's figure is the mean over b.N,
// which leans the ratios a little against the mount.
func timeFloor(b *testing.B, size int64) time.Duration {
	file := mountFloor(b, size)
	return timeScript(b, 3, "cat "+q(file)+" > /dev/null")
}

// BenchmarkTail runs tail -n 10 on the partition, against tail -n 10 of a
// plain file with the same bytes.
func BenchmarkTail(b *testing.B) {
	mnt, _, plain := benchMount(b, fs.Options{})
	base := timeScript(b, 20, "tail -n 10 "+q(plain)+" > /dev/null")
	file := filepath.Join(part(mnt, benchTopic, 0), "offset", "0")
	want := sh(b, "tail -n 10 %s", q(plain))
	require.Equal(b, want, sh(b, "tail -n 10 %s", q(file)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		sh(b, "tail -n 10 %s > /dev/null", q(file))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportRatio(b, base, 0, elapsed, 0)
}

// BenchmarkHeadRandom runs head -n 1 on offset/N for random N (a lookup,
// an open and a read in the middle of the log per op, 100 per shell),
// against head -n 1 of the plain file.
func BenchmarkHeadRandom(b *testing.B) {
	mnt, _, plain := benchMount(b, fs.Options{})
	const perShell = 100
	base := timeScript(b, 5, fmt.Sprintf("for i in $(seq %d); do head -n 1 %s; done > /dev/null", perShell, q(plain)))
	dir := filepath.Join(part(mnt, benchTopic, 0), "offset")
	rng := rand.New(rand.NewSource(1))
	n := rng.Intn(benchRecords)
	var buf []byte
	require.Equal(b, string(benchValueOf(buf, n))+"\n", sh(b, "head -n 1 %s", q(filepath.Join(dir, fmt.Sprint(n)))))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		script := "cd / && for n in"
		for range perShell {
			script += fmt.Sprintf(" %d", rng.Intn(benchRecords))
		}
		sh(b, "%s; do head -n 1 %s/$n; done > /dev/null", script, q(dir))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportRatio(b, base, 0, elapsed, 0)
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N*perShell), "µs/head")
}

// BenchmarkAppend appends a 256 MiB file of 1 KiB lines with
// cat file >> append, against cat file >> a plain file on the same disk.
func BenchmarkAppend(b *testing.B) {
	const size = 256 << 20
	dir := b.TempDir()
	src := filepath.Join(dir, "lines.txt")
	f, err := os.Create(src)
	require.NoError(b, err)
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for i := 0; i < size/(benchValue+1); i++ {
		w.Write(benchValueOf(buf, i))
		w.WriteByte('\n')
	}
	require.NoError(b, w.Flush())
	require.NoError(b, f.Close())
	srcSize := fileSize(b, src)
	plainOut := filepath.Join(dir, "out.txt")
	base := timeScript(b, 3, fmt.Sprintf("rm -f %s; cat %s >> %s", q(plainOut), q(src), q(plainOut)))
	os.Remove(plainOut)

	l, _ := newLog(b, storage.Overrides{"retention.ms": -1})
	_, err = l.CreateTopic(benchTopic, 1, nil)
	require.NoError(b, err)
	mnt := mount(b, l, fs.Options{})
	appendFile := filepath.Join(part(mnt, benchTopic, 0), "append")
	p, err := l.Partition(benchTopic, 0)
	require.NoError(b, err)
	b.SetBytes(srcSize)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		sh(b, "cat %s >> %s", q(src), q(appendFile))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	require.Equal(b, record.Offset(b.N*(size/(benchValue+1))), p.EndOffset())
	reportRatio(b, base, srcSize, elapsed, srcSize)
}

func joinQ(paths []string) string {
	s := ""
	for i, p := range paths {
		if i > 0 {
			s += " "
		}
		s += q(p)
	}
	return s
}
