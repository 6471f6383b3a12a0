package peers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/logfs/logfs/bench"
)

// Inner loops of every adapter for `go test -bench .`. One op is one record
// (append, read) or one lookup; MB/s counts value bytes. The same offsets and
// timestamps are used for every log. cmd/peerbench is the full harness
// (percentiles, fsync, mixed, ratios to raw); these are for profiling one
// loop, e.g.
//
//	go test -run '^$' -bench 'Lookup/liftbridge/1024' -cpuprofile cpu.prof

var benchSizes = []int{100, 1024, 16384}

// benchSegment is the segment size of the benchmark logs (the harness default).
const benchSegment = 64 << 20

// benchRoot holds the read fixtures; TestMain removes it.
var benchRoot string

func TestMain(m *testing.M) {
	var err error
	if benchRoot, err = os.MkdirTemp("", "peers-bench-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := os.RemoveAll(benchRoot); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// fixture is a closed, settled data set of n records of one size, shared by
// the read benchmarks of one log.
type fixture struct {
	dir string
	n   int64
	p   *payload
}

var (
	fixturesMu sync.Mutex
	fixtures   = map[string]*fixture{}
)

func benchFixture(b *testing.B, name string, size int) *fixture {
	b.Helper()
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	key := fmt.Sprintf("%s-%d", name, size)
	if f := fixtures[key]; f != nil {
		return f
	}
	f := &fixture{
		dir: filepath.Join(benchRoot, key),
		n:   int64(min(100_000, (32<<20)/size)),
		p:   newPayload(size, 1),
	}
	l, err := Open(name, f.dir, Config{SegmentBytes: benchSegment})
	if err != nil {
		b.Fatal(err)
	}
	appendN(b, l, f.p, 0, f.n, 64)
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	fixtures[key] = f
	return f
}

// openFixture opens the fixture and warms its files (outside the timer).
func (f *fixture) open(b *testing.B, name string) Log {
	b.Helper()
	if _, err := bench.Settle(f.dir); err != nil {
		b.Fatal(err)
	}
	l, err := Open(name, f.dir, Config{SegmentBytes: benchSegment})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := l.Close(); err != nil {
			b.Error(err)
		}
	})
	return l
}

func forEachLog(b *testing.B, fn func(b *testing.B, name string, size int)) {
	for _, name := range realAdapters() {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", name, size), func(b *testing.B) { fn(b, name, size) })
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			forEachLog(b, func(b *testing.B, name string, size int) { benchAppend(b, name, size, batch) })
		})
	}
}

// benchAppend appends b.N records; every 256 MiB it starts a fresh log
// (outside the timer) to bound the disk used.
func benchAppend(b *testing.B, name string, size, batch int) {
	const maxBytes = 256 << 20
	p := newPayload(size, 1)
	bb := newBatchBuf(size, batch)
	var (
		l   Log
		dir string
		off int64
	)
	drop := func() {
		if l != nil {
			if err := l.Close(); err != nil {
				b.Error(err)
			}
			if err := os.RemoveAll(dir); err != nil {
				b.Error(err)
			}
		}
	}
	fresh := func() {
		drop()
		var err error
		if dir, err = os.MkdirTemp(benchRoot, "append-"); err != nil {
			b.Fatal(err)
		}
		if l, err = Open(name, dir, Config{SegmentBytes: benchSegment}); err != nil {
			b.Fatal(err)
		}
		off = 0
	}
	fresh()
	b.Cleanup(drop)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for done := 0; done < b.N; {
		if off*int64(size) >= maxBytes {
			b.StopTimer()
			fresh()
			b.StartTimer()
		}
		k := min(batch, b.N-done)
		vals, ts := bb.prepare(p, off, k)
		if err := l.Append(vals, ts); err != nil {
			b.Fatal(err)
		}
		off += int64(k)
		done += k
	}
}

func BenchmarkLookup(b *testing.B) {
	forEachLog(b, func(b *testing.B, name string, size int) {
		f := benchFixture(b, name, size)
		l := f.open(b, name)
		offs := lookupOffsets(1, size, f.n, 1<<16)
		b.SetBytes(int64(size))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			off := offs[i&(len(offs)-1)]
			v, err := l.LookupFirst(off)
			if err != nil {
				b.Fatal(err)
			}
			if !f.p.quick(v, off) {
				b.Fatalf("offset %d: wrong value", off)
			}
		}
	})
}

func BenchmarkLookupTime(b *testing.B) {
	forEachLog(b, func(b *testing.B, name string, size int) {
		f := benchFixture(b, name, size)
		l := f.open(b, name)
		if _, err := l.LookupTime(tsOf(0)); errors.Is(err, ErrUnsupported) {
			b.Skipf("%s has no time lookup", name)
		}
		offs := lookupOffsets(1, size, f.n, 1<<16)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			off := offs[i&(len(offs)-1)]
			got, err := l.LookupTime(tsOf(off)) // exact: not hit by liftbridge's gap bug
			if err != nil {
				b.Fatal(err)
			}
			if got != off {
				b.Fatalf("ts(%d) -> offset %d", off, got)
			}
		}
	})
}

// BenchmarkReadAll: one op is a sequential pass over the whole fixture;
// ns/record is reported besides.
func BenchmarkReadAll(b *testing.B) {
	forEachLog(b, func(b *testing.B, name string, size int) {
		f := benchFixture(b, name, size)
		l := f.open(b, name)
		b.SetBytes(f.n * int64(size))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var next int64
			n, err := l.ReadAll(func(v []byte) {
				if !f.p.quick(v, next) {
					b.Fatalf("offset %d: wrong value", next)
				}
				next++
			})
			if err != nil {
				b.Fatal(err)
			}
			if int64(n) != f.n {
				b.Fatalf("read %d of %d", n, f.n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*f.n), "ns/record")
	})
}

// BenchmarkFollow: one op is one record appended (batch 64) and received by
// one follower; only logs that can wait for data.
func BenchmarkFollow(b *testing.B) {
	forEachLog(b, func(b *testing.B, name string, size int) {
		l, err := Open(name, b.TempDir(), Config{SegmentBytes: benchSegment})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		fl, ok := l.(Follower)
		if !ok {
			b.Skipf("%s cannot wait for data", name)
		}
		p := newPayload(size, 1)
		bb := newBatchBuf(size, 64)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		n := int64(b.N)
		done := make(chan error, 1)
		var got int64
		b.SetBytes(int64(size))
		b.ResetTimer()
		go func() {
			done <- fl.Follow(ctx, 0, func(off int64, v []byte) bool {
				if !p.quick(v, off) {
					return false
				}
				got++
				return got < n
			})
		}()
		for off := int64(0); off < n; {
			k := int(min(64, n-off))
			vals, ts := bb.prepare(p, off, k)
			if err := l.Append(vals, ts); err != nil {
				b.Fatal(err)
			}
			off += int64(k)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if got != n {
			b.Fatalf("follower got %d good records of %d", got, n)
		}
	})
}
