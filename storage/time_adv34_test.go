package storage

import (
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// This file is an independent oracle for lookups by time, written from
// Kafka's rules (reference/kafka-storage.md 4.4) and README's promise:
// time/T starts at the first record, in offset order, stamped T or later
// among those at or above the log start; with none, at the log end. A
// LogAppendTime batch stamps each of its records with the batch's max
// timestamp; a CreateTime record's timestamp is its own.

// tsRec is one record of the oracle's model: its offset and timestamp.
type tsRec struct {
	off record.Offset
	ts  int64
}

// tsModel is a partition as the oracle sees it.
type tsModel struct {
	recs  []tsRec // in offset order
	start record.Offset
	end   record.Offset
}

// first is the oracle: the offset time/T starts at.
func (m *tsModel) first(t int64) record.Offset {
	for _, r := range m.recs {
		if r.off >= m.start && r.ts >= t {
			return r.off
		}
	}
	return m.end
}

// probes are the T the oracle is asked about: every timestamp, +-1, and
// the extremes.
func (m *tsModel) probes() []int64 {
	set := map[int64]bool{math.MinInt64: true, math.MaxInt64: true, -2: true, -1: true, 0: true, 1: true}
	for _, r := range m.recs {
		for _, d := range []int64{-1, 0, 1} {
			if v := r.ts + d; (d < 0 && v < r.ts) || (d > 0 && v > r.ts) || d == 0 {
				set[v] = true
			}
		}
	}
	out := make([]int64, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// adv34Timestamp draws a timestamp in one of several styles.
func adv34Timestamp(rng *rand.Rand, style int, clock *int64) int64 {
	switch style {
	case 0: // mostly increasing, sometimes back
		*clock += int64(rng.Intn(300)) - 60
		return *clock
	case 1: // equal timestamps
		return *clock
	case 2: // anywhere in a small range, non-monotonic
		return 1_700_000_000_000 + int64(rng.Intn(2000))
	case 3: // negative and no timestamp
		return []int64{-1, -1, -2, -1000, math.MinInt64}[rng.Intn(5)]
	case 4: // near the limits
		return []int64{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 2, math.MinInt64 + 1, 0}[rng.Intn(5)]
	}
	return 0
}

// writeAdv34Partition writes a random partition as a Kafka broker would,
// records the model of it, and leaves it closed cleanly or not.
func writeAdv34Partition(t *testing.T, rng *rand.Rand, dir string, clean bool) *tsModel {
	o := broker.Options{
		SegmentBytes:  int64(300 + rng.Intn(3000)),
		IndexInterval: []int64{-1, 0, 100, 500}[rng.Intn(4)],
		IndexBytes:    int64(12 * (2 + rng.Intn(200))),
		NoSnapshots:   true,
	}
	b, err := broker.Create(dir, "tt", 0, o)
	require.NoError(t, err)
	m := &tsModel{}
	clock := int64(1_700_000_000_000)
	styles := []int{rng.Intn(5), rng.Intn(5), rng.Intn(5)}
	nb := 5 + rng.Intn(60)
	for i := 0; i < nb; i++ {
		var bl record.Builder
		n := 1 + rng.Intn(6)
		tss := make([]int64, n)
		for k := range tss {
			tss[k] = adv34Timestamp(rng, styles[rng.Intn(len(styles))], &clock)
			if rng.Intn(10) == 0 {
				tss[k] = -1
			}
			bl.Append(tss[k], nil, []byte(fmt.Sprintf("v%d-%d", i, k)), nil)
		}
		bo := record.BuildOptions{Compression: record.Compression(rng.Intn(5))}
		if rng.Intn(5) == 0 {
			bo.Attributes = 0x08 // LogAppendTime
			bo.LogAppendTime = adv34Timestamp(rng, styles[0], &clock)
			if bo.LogAppendTime < 0 {
				bo.LogAppendTime = clock
			}
			for k := range tss {
				tss[k] = bo.LogAppendTime
			}
		}
		raw, err := bl.BuildWith(bo)
		require.NoError(t, err)
		base, err := b.Append(append([]byte(nil), raw...))
		require.NoError(t, err)
		for k, ts := range tss {
			m.recs = append(m.recs, tsRec{base + record.Offset(k), ts})
		}
		if rng.Intn(15) == 0 {
			require.NoError(t, b.Roll()) // as a roll by segment.ms
		}
	}
	m.end = b.End()
	if rng.Intn(3) == 0 {
		if err := b.DeleteOldest(true); err == nil {
			m.start = m.recs[0].off
			files, _ := os.ReadDir(b.Dir())
			for _, f := range files {
				if filepath.Ext(f.Name()) == layout.LogSuffix {
					var base int64
					fmt.Sscanf(f.Name(), "%020d", &base)
					m.start = record.Offset(base)
					break
				}
			}
		}
	}
	if clean {
		require.NoError(t, b.Close())
	} else {
		require.NoError(t, b.Checkpoint(b.End()))
	}
	return m
}

// checkAdv34 compares p's reads by time with the oracle's.
func checkAdv34(t *testing.T, p *Partition, m *tsModel, what string) {
	t.Helper()
	require.Equal(t, m.start, p.StartOffset(), "%s: log start", what)
	require.Equal(t, m.end, p.EndOffset(), "%s: log end", what)
	// The model itself: the records read back with its timestamps.
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	i := sort.Search(len(m.recs), func(i int) bool { return m.recs[i].off >= m.start })
	for ; ; i++ {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Equal(t, m.recs[i].off, rec.Offset)
		require.Equal(t, m.recs[i].ts, rec.Timestamp, "%s: timestamp of offset %d", what, rec.Offset)
	}
	require.NoError(t, r.Close())
	require.Equal(t, len(m.recs), i)
	for _, ts := range m.probes() {
		got, err := p.OffsetForTime(ts)
		require.NoError(t, err, "%s: OffsetForTime(%d)", what, ts)
		require.Equal(t, m.first(ts), got, "%s: OffsetForTime(%d)", what, ts)
	}
}

func TestTimeOracleBrokerPartitionsAdv34(t *testing.T) {
	for seed := int64(0); seed < 100; seed++ {
		rng := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		clean := rng.Intn(2) == 0
		m := writeAdv34Partition(t, rng, dir, clean)
		for _, ro := range []bool{true, false} {
			what := fmt.Sprintf("seed %d clean %v read-only %v", seed, clean, ro)
			l, err := Open(dir, Options{Logger: testLogger(t), ReadOnly: ro, RetentionCheckInterval: -1})
			require.NoError(t, err, what)
			p, err := l.Partition("tt", 0)
			require.NoError(t, err, what)
			checkAdv34(t, p, m, what)
			require.NoError(t, l.Close())
		}
	}
}

// A batch of one record stamped below -1 (-2 here) has the max timestamp
// -1 in its header, as Kafka's MemoryRecordsBuilder and LogValidator
// write it (their max starts at NO_TIMESTAMP). The record is still stamped
// -2: time/T for T = -1 (1969-12-31T23:59:59.999Z) must not start at it.
func TestTimeSingleRecordBelowNoTimestampAdv34(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Create(dir, "tt", 0, broker.Options{NoSnapshots: true})
	require.NoError(t, err)
	for _, ts := range []int64{-2, -1, 5} {
		var bl record.Builder
		bl.Append(ts, nil, []byte("v"), nil)
		raw, err := bl.Build()
		require.NoError(t, err)
		h, err := record.ParseHeader(raw, 0)
		require.NoError(t, err)
		require.Equal(t, max(ts, -1), h.MaxTimestamp, "the header as Kafka writes it")
		_, err = b.Append(append([]byte(nil), raw...))
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())
	l := openLog(t, dir, Options{ReadOnly: true})
	p, err := l.Partition("tt", 0)
	require.NoError(t, err)
	for ts, want := range map[int64]record.Offset{-3: 0, -2: 0, -1: 1, 0: 2, 5: 2, 6: 3} {
		got, err := p.OffsetForTime(ts)
		require.NoError(t, err)
		require.Equal(t, want, got, "OffsetForTime(%d)", ts)
	}
}
