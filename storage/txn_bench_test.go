package storage

import (
	"fmt"
	"io"
	"math/rand"
	"testing"
	"time"

	"github.com/logfs/logfs/record"
)

// BenchmarkViewIsolation measures what read_committed's filtering costs on
// data without transactions, the common case: each iteration reads the
// whole values view in 1 MiB reads and opens 200 views at random offsets
// for an 8 KiB read, once in ReadCommitted and once in ReadUncommitted
// (the path views had before filtering), alternating, on the same log.
// It reports both throughputs and committed's time as a multiple of
// uncommitted's.
func BenchmarkViewIsolation(b *testing.B) {
	for _, size := range recordSizes {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			d := getDataset(b, size, 64)
			buf := make([]byte, 1<<20)
			small := make([]byte, 8<<10)
			var seq, rnd [2]time.Duration
			var bytes int64
			for i := 0; i < b.N; i++ {
				for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
					d.l.opts.Isolation = iso
					start := time.Now()
					v, err := d.p.NewView(Values, 0)
					if err != nil {
						b.Fatal(err)
					}
					var off int64
					for {
						n, err := v.ReadAt(buf, off)
						off += int64(n)
						if err == io.EOF {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					v.Close()
					seq[iso] += time.Since(start)
					bytes = off
					rng := rand.New(rand.NewSource(int64(i)))
					start = time.Now()
					for k := 0; k < 200; k++ {
						v, err := d.p.NewView(Values, record.Offset(rng.Int63n(d.records)))
						if err != nil {
							b.Fatal(err)
						}
						if _, err := v.ReadAt(small, 0); err != nil && err != io.EOF {
							b.Fatal(err)
						}
						v.Close()
					}
					rnd[iso] += time.Since(start)
				}
			}
			d.l.opts.Isolation = ReadCommitted
			n := float64(b.N)
			b.ReportMetric(float64(bytes)*n/seq[ReadCommitted].Seconds()/1e6, "MB/s-committed")
			b.ReportMetric(float64(bytes)*n/seq[ReadUncommitted].Seconds()/1e6, "MB/s-uncommitted")
			b.ReportMetric(seq[ReadCommitted].Seconds()/seq[ReadUncommitted].Seconds(), "x-seq-time")
			b.ReportMetric(float64(rnd[ReadCommitted].Microseconds())/n/200, "us/random-committed")
			b.ReportMetric(float64(rnd[ReadUncommitted].Microseconds())/n/200, "us/random-uncommitted")
			b.ReportMetric(rnd[ReadCommitted].Seconds()/rnd[ReadUncommitted].Seconds(), "x-random-time")
		})
	}
}
