package recovery_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// benchPartition writes a partition folder of about total bytes of valid
// batches of about batchSize bytes each, in segments of segSize, directly
// (one batch built once, its base offset rewritten: the CRC does not cover
// it). It returns the folder and the .log files.
func benchPartition(b testing.TB, dir string, total, segSize, batchSize int) []string {
	b.Helper()
	var bld record.Builder
	for n := 0; n < batchSize; {
		v := make([]byte, 200)
		for i := range v {
			v[i] = byte('a' + (n+i)%26)
		}
		bld.Append(1_700_000_000_000+int64(n), nil, v, nil)
		n += len(v) + 12
	}
	raw, err := bld.Build()
	require.NoError(b, err)
	h, err := record.ParseHeader(raw, 0)
	require.NoError(b, err)
	perBatch := record.Offset(h.RecordCount)
	var files []string
	next := record.Offset(0)
	for written := 0; written < total; {
		p := layout.SegmentPath(dir, next, layout.LogSuffix)
		f, err := os.Create(p)
		require.NoError(b, err)
		buf := make([]byte, 0, segSize+len(raw))
		for len(buf)+len(raw) <= segSize {
			record.SetBaseOffset(raw, next)
			buf = append(buf, raw...)
			next += perBatch
		}
		_, err = f.Write(buf)
		require.NoError(b, err)
		require.NoError(b, f.Close())
		files = append(files, p)
		written += len(buf)
	}
	return files
}

// catOnce times one `cat` of the files to /dev/null: reading the same
// bytes from the page cache, the baseline.
func catOnce(b *testing.B, files []string) time.Duration {
	b.Helper()
	cmd := exec.Command("cat", files...)
	start := time.Now()
	require.NoError(b, cmd.Run()) // Stdout nil: os.DevNull
	return time.Since(start)
}

// benchDir is where the recovery benchmark writes its data: $LOGFS_BENCH_DIR
// (say a tmpfs, to leave the disk out of the index writes) or b.TempDir().
func benchDir(b *testing.B) string {
	if d := os.Getenv("LOGFS_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "logfs-bench-")
		require.NoError(b, err)
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// BenchmarkRecovery measures an unclean load that scans every segment of a
// partition (size, magic, CRC-32C and offsets of every batch), rebuilding
// both indexes and writing them, on a warm page cache, in MB/s of log
// scanned. Each iteration also runs cat over the same files, untimed, so
// that both are measured under the same load; it reports the best of each
// (best_MB/s, cat_MB/s) and their ratio (x_cat).
//
//	go test ./recovery -run '^$' -bench Recovery -benchtime 10x
func BenchmarkRecovery(b *testing.B) {
	if _, err := exec.LookPath("cat"); err != nil {
		b.Skip("no cat")
	}
	const total = 512 << 20
	for _, bs := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB", bs>>10), func(b *testing.B) {
			dir := filepath.Join(benchDir(b), "bench-0")
			require.NoError(b, os.MkdirAll(dir, 0o755))
			files := benchPartition(b, dir, total, 128<<20, bs)
			var size int64
			for _, f := range files {
				st, err := os.Stat(f)
				require.NoError(b, err)
				size += st.Size()
			}
			catOnce(b, files) // warms the page cache
			opts := recovery.PartitionOptions{FS: vfs.Default, Dir: dir, RecoveryPoint: -1, LogStart: -1,
				IndexConfig: recovery.IndexConfig{IndexInterval: 4096}, Logger: testLogger()}
			// One load first: it writes the index files the timed loads replace.
			_, err := recovery.LoadPartition(opts)
			require.NoError(b, err)
			b.SetBytes(size)
			b.ResetTimer()
			var best, bestCat time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if d := catOnce(b, files); bestCat == 0 || d < bestCat {
					bestCat = d
				}
				b.StartTimer()
				start := time.Now()
				st, err := recovery.LoadPartition(opts)
				d := time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if st.Report.ScannedBytes != size || len(st.Report.Cuts) > 0 {
					b.Fatalf("scanned %d of %d bytes, %d cuts", st.Report.ScannedBytes, size, len(st.Report.Cuts))
				}
				if best == 0 || d < best {
					best = d
				}
			}
			b.StopTimer()
			recMBs, catMBs := float64(size)/best.Seconds()/1e6, float64(size)/bestCat.Seconds()/1e6
			b.ReportMetric(recMBs, "best_MB/s")
			b.ReportMetric(catMBs, "cat_MB/s")
			b.ReportMetric(recMBs/catMBs, "x_cat")
		})
	}
}
