package index

import (
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// The benchmarks run on full default-size indexes: 10 MiB of offset
// entries (1,310,720) and a time index full up to its reserved slot
// (873,812 entries). Each reports its throughput and its ratio to a
// baseline measured in the same run: the same search with sort.Search over
// a []uint32 / []int64 on the Go heap (no mapping, no lock, no decoding),
// or, for appends, an unchecked PutUint32 into a heap slice.

const (
	benchOffsetEntries = DefaultMaxBytes / OffsetEntrySize // 1,310,720
	benchTimeEntries   = DefaultMaxBytes/TimeEntrySize - 1 // 873,812
	benchBase          = record.Offset(5_000_000_000)      // a realistic base offset
	benchTS0           = int64(1_700_000_000_000)          // first timestamp
	benchTargets       = 1 << 16                           // targets per benchmark, a power of two
	benchPosStep       = record.Position(3000)             // keeps positions in uint32
	benchKeyStep       = 2                                 // gaps, so targets miss keys too
)

var benchSink int64

// fullOffsetIndex builds a full offset index in b.TempDir(), closed when b
// ends: entry i (from 1) is (base+2i, 3000i).
func fullOffsetIndex(b *testing.B) *OffsetIndex {
	x, err := CreateOffsetIndex(filepath.Join(b.TempDir(), "bench.index"), benchBase, Options{})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, x.Close()) })
	for i := 1; i <= benchOffsetEntries; i++ {
		require.NoError(b, x.Append(benchBase+record.Offset(benchKeyStep*i), benchPosStep*record.Position(i)))
	}
	require.True(b, x.IsFull())
	return x
}

// fullTimeIndex builds a full time index in b.TempDir(), closed when b
// ends: entry i (from 1) is (ts0+10i, base+i).
func fullTimeIndex(b *testing.B) *TimeIndex {
	x, err := CreateTimeIndex(filepath.Join(b.TempDir(), "bench.timeindex"), benchBase, Options{})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, x.Close()) })
	for i := 1; i <= benchTimeEntries; i++ {
		require.NoError(b, x.MaybeAppend(benchTS0+10*int64(i), benchBase+record.Offset(i), false))
	}
	require.True(b, x.IsFull())
	return x
}

// offsetTargets returns targets over entries [from, benchOffsetEntries].
func offsetTargets(from int) []record.Offset {
	r := rand.New(rand.NewPCG(1, uint64(from)))
	ts := make([]record.Offset, benchTargets)
	for i := range ts {
		ts[i] = benchBase + record.Offset(benchKeyStep*from) + record.Offset(r.IntN(benchKeyStep*(benchOffsetEntries-from+1)))
	}
	return ts
}

func timeTargets(from int) []int64 {
	r := rand.New(rand.NewPCG(2, uint64(from)))
	ts := make([]int64, benchTargets)
	for i := range ts {
		ts[i] = benchTS0 + 10*int64(from) + r.Int64N(10*int64(benchTimeEntries-from+1))
	}
	return ts
}

// heapKeys is the baseline's copy of the offset index keys.
var heapKeys = sync.OnceValue(func() []uint32 {
	k := make([]uint32, benchOffsetEntries)
	for i := range k {
		k[i] = uint32(benchKeyStep * (i + 1))
	}
	return k
})

var heapTimes = sync.OnceValue(func() []int64 {
	k := make([]int64, benchTimeEntries)
	for i := range k {
		k[i] = benchTS0 + 10*int64(i+1)
	}
	return k
})

// baselines caches baseline ns/op by name: each is measured once per run.
// (testing.Benchmark cannot run inside a benchmark: they share a lock.)
var baselines sync.Map

func baseline(name string, fn func(n int)) float64 {
	if v, ok := baselines.Load(name); ok {
		return v.(float64)
	}
	var ns float64
	for n := 1000; ; n *= 4 {
		start := time.Now()
		fn(n)
		if d := time.Since(start); d > 300*time.Millisecond {
			ns = float64(d.Nanoseconds()) / float64(n)
			break
		}
	}
	baselines.Store(name, ns)
	return ns
}

// report prints throughput and the ratio to the baseline.
func report(b *testing.B, unit string, base float64) {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(1e9/ns, unit+"/s")
	b.ReportMetric(ns/base, "x-baseline")
}

func offsetHeapSearch(targets []record.Offset) func(n int) {
	return func(n int) {
		keys := heapKeys()
		for i := range n {
			t := uint32(targets[i&(benchTargets-1)] - benchBase)
			benchSink += int64(sort.Search(len(keys), func(j int) bool { return keys[j] > t }))
		}
	}
}

func timeHeapSearch(targets []int64) func(n int) {
	return func(n int) {
		keys := heapTimes()
		for i := range n {
			t := targets[i&(benchTargets-1)]
			benchSink += int64(sort.Search(len(keys), func(j int) bool { return keys[j] > t }))
		}
	}
}

func benchOffsetLookup(b *testing.B, x *OffsetIndex, name string, targets []record.Offset) {
	base := baseline("offset "+name, offsetHeapSearch(targets))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off, pos, err := x.Lookup(targets[i&(benchTargets-1)])
		if err != nil {
			b.Fatal(err)
		}
		benchSink += int64(off) + int64(pos)
	}
	b.StopTimer()
	report(b, "lookups", base)
}

func benchTimeLookup(b *testing.B, x *TimeIndex, name string, targets []int64) {
	base := baseline("time "+name, timeHeapSearch(targets))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts, off, err := x.Lookup(targets[i&(benchTargets-1)])
		if err != nil {
			b.Fatal(err)
		}
		benchSink += ts + int64(off)
	}
	b.StopTimer()
	report(b, "lookups", base)
}

// BenchmarkOffsetLookup: warm = targets in the last 8 KiB of entries, what
// consumers near the end of the log ask; newest = the last entry; cold =
// uniform over the whole index.
func BenchmarkOffsetLookup(b *testing.B) {
	x := fullOffsetIndex(b)
	newest := make([]record.Offset, benchTargets)
	for i := range newest {
		newest[i] = benchBase + benchKeyStep*benchOffsetEntries
	}
	b.Run("warm", func(b *testing.B) {
		benchOffsetLookup(b, x, "warm", offsetTargets(benchOffsetEntries-offsetWarmEntries+1))
	})
	b.Run("newest", func(b *testing.B) { benchOffsetLookup(b, x, "newest", newest) })
	b.Run("cold", func(b *testing.B) { benchOffsetLookup(b, x, "cold", offsetTargets(1)) })
}

func BenchmarkTimeLookup(b *testing.B) {
	x := fullTimeIndex(b)
	newest := make([]int64, benchTargets)
	for i := range newest {
		newest[i] = benchTS0 + 10*benchTimeEntries
	}
	b.Run("warm", func(b *testing.B) { benchTimeLookup(b, x, "warm", timeTargets(benchTimeEntries-timeWarmEntries+1)) })
	b.Run("newest", func(b *testing.B) { benchTimeLookup(b, x, "newest", newest) })
	b.Run("cold", func(b *testing.B) { benchTimeLookup(b, x, "cold", timeTargets(1)) })
}

// BenchmarkOffsetAppend appends into a fresh preallocated index, resetting
// it (timer stopped) whenever it fills.
func BenchmarkOffsetAppend(b *testing.B) {
	base := baseline("offset append", func(n int) {
		buf := make([]byte, DefaultMaxBytes)
		for i := range n {
			j := i % benchOffsetEntries
			be.PutUint32(buf[j*OffsetEntrySize:], uint32(j+1))
			be.PutUint32(buf[j*OffsetEntrySize+4:], uint32(j+1))
		}
		benchSink += int64(buf[0])
	})
	x, err := CreateOffsetIndex(filepath.Join(b.TempDir(), "append.index"), benchBase, Options{})
	require.NoError(b, err)
	defer x.Close()
	b.ReportAllocs()
	b.SetBytes(OffsetEntrySize)
	b.ResetTimer()
	for i, j := 0, 0; i < b.N; i, j = i+1, j+1 {
		if j == benchOffsetEntries {
			b.StopTimer()
			require.NoError(b, x.Reset())
			j = 0
			b.StartTimer()
		}
		if err := x.Append(benchBase+record.Offset(j+1), record.Position(j+1)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, "appends", base)
}

func BenchmarkTimeAppend(b *testing.B) {
	base := baseline("time append", func(n int) {
		buf := make([]byte, DefaultMaxBytes)
		for i := range n {
			j := i % benchTimeEntries
			be.PutUint64(buf[j*TimeEntrySize:], uint64(j+1))
			be.PutUint32(buf[j*TimeEntrySize+8:], uint32(j+1))
		}
		benchSink += int64(buf[0])
	})
	x, err := CreateTimeIndex(filepath.Join(b.TempDir(), "append.timeindex"), benchBase, Options{})
	require.NoError(b, err)
	defer x.Close()
	b.ReportAllocs()
	b.SetBytes(TimeEntrySize)
	b.ResetTimer()
	for i, j := 0, 0; i < b.N; i, j = i+1, j+1 {
		if j == benchTimeEntries {
			b.StopTimer()
			require.NoError(b, x.Reset())
			j = 0
			b.StartTimer()
		}
		if err := x.MaybeAppend(benchTS0+int64(j+1), benchBase+record.Offset(j), false); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, "appends", base)
}
