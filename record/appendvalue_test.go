package record

import (
	"bytes"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// AppendValue is a faster Append for records with no key and no headers:
// the batches it builds must be Append's, byte for byte, for every value
// length around a varint's boundaries, null and empty values, timestamps
// before, at and far after the batch's first, offset deltas past one
// byte, and mixed with records Append builds (keys, headers, gaps).
func TestAppendValueMatchesAppend(t *testing.T) {
	var lens []int
	// (Lengths around 2^20, where the value's length takes a fourth
	// byte, are TestAppendValueAdvEdges's: here they would take most of
	// the time.)
	for _, edge := range []int{0, 63, 64, 8191, 8192} {
		for d := -2; d <= 2; d++ {
			if edge+d >= 0 {
				lens = append(lens, edge+d)
			}
		}
	}
	rng := rand.New(rand.NewSource(1))
	value := func() []byte {
		switch rng.Intn(8) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		v := make([]byte, lens[rng.Intn(len(lens))])
		rng.Read(v)
		return v
	}
	stamps := []int64{0, 1, -1, 63, 64, -65, 1 << 40, math.MaxInt64 / 4, -(math.MaxInt64 / 4)}
	for round := 0; round < 60; round++ {
		var want, got Builder
		base := int64(1_700_000_000_000)
		n := 1 + rng.Intn(300)
		for i := 0; i < n; i++ {
			ts := base + stamps[rng.Intn(len(stamps))]
			v := value()
			if rng.Intn(10) == 0 {
				// a record AppendValue cannot make: both builders use Append
				k, h := []byte("k"), []Header{{Key: []byte("h"), Value: []byte("v")}}
				want.Append(ts, k, v, h)
				got.Append(ts, k, v, h)
				continue
			}
			want.Append(ts, nil, v, nil)
			got.AppendValue(ts, v)
		}
		w, err := want.Build()
		require.NoError(t, err)
		g, err := got.Build()
		require.NoError(t, err)
		require.True(t, bytes.Equal(w, g), "round %d: %d records", round, n)
	}
}

// BenchmarkBuildValues is BenchmarkBuildLines with AppendValue, and prints
// its speed as a ratio to Append's, measured in the same run.
func BenchmarkBuildValues(b *testing.B) {
	val := bytes.Repeat([]byte("x"), 99)
	const n = (1 << 20) / 100
	build := func(one func(*Builder)) float64 {
		var bl Builder
		start := time.Now()
		for i := 0; i < b.N; i++ {
			bl.Reset()
			for j := 0; j < n; j++ {
				one(&bl)
			}
			if _, err := bl.Build(); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(start))
	}
	b.SetBytes(n * 100)
	b.ReportAllocs()
	general := build(func(bl *Builder) { bl.Append(1_700_000_000_000, nil, val, nil) })
	b.ResetTimer()
	values := build(func(bl *Builder) { bl.AppendValue(1_700_000_000_000, val) })
	b.ReportMetric(general/values, "x-Append")
}
