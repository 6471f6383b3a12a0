package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
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
	ctl bool // a transaction marker: found by time as Kafka finds it, never read
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

// adv34Writer writes random batches as a broker would and keeps the model.
type adv34Writer struct {
	t      *testing.T
	rng    *rand.Rand
	b      *broker.Partition
	m      *tsModel
	styles []int
	clock  int64 // where timestamps are drawn around
	bclock int64 // the broker helper's clock, for markers
	inTxn  map[int64]bool
	i      int
}

func newAdv34Writer(t *testing.T, rng *rand.Rand, b *broker.Partition) *adv34Writer {
	return &adv34Writer{t: t, rng: rng, b: b, m: &tsModel{}, styles: []int{rng.Intn(5), rng.Intn(5), rng.Intn(5)},
		clock: 1_700_000_000_000, bclock: 1_700_000_000_000, inTxn: map[int64]bool{}}
}

// batch writes one random batch (or a transaction marker), and sometimes
// rolls after it.
func (w *adv34Writer) batch() {
	t, rng, b, m, styles := w.t, w.rng, w.b, w.m, w.styles
	i := w.i
	w.i++
	var bl record.Builder
	n := 1 + rng.Intn(6)
	tss := make([]int64, n)
	for k := range tss {
		tss[k] = adv34Timestamp(rng, styles[rng.Intn(len(styles))], &w.clock)
		if rng.Intn(10) == 0 {
			tss[k] = -1
		}
		bl.Append(tss[k], nil, []byte(fmt.Sprintf("v%d-%d", i, k)), nil)
	}
	bo := record.BuildOptions{Compression: record.Compression(rng.Intn(5))}
	if rng.Intn(5) == 0 {
		bo.Attributes = 0x08 // LogAppendTime
		bo.LogAppendTime = adv34Timestamp(rng, styles[0], &w.clock)
		if bo.LogAppendTime < 0 {
			bo.LogAppendTime = w.clock
		}
		for k := range tss {
			tss[k] = bo.LogAppendTime
		}
	}
	pid := int64(1 + rng.Intn(2))
	if w.inTxn[pid] && rng.Intn(3) == 0 {
		ctl := record.ControlCommit
		if rng.Intn(2) == 0 {
			ctl = record.ControlAbort
		}
		off, err := b.Marker(pid, ctl)
		require.NoError(t, err)
		m.recs = append(m.recs, tsRec{off: off, ts: w.bclock, ctl: true})
		w.bclock = max(w.bclock, -1) + 1 // the marker batch's max is at least -1
		w.inTxn[pid] = false
		return
	}
	if rng.Intn(6) == 0 {
		bo.ProducerID, bo.Attributes = pid, bo.Attributes|0x10
		w.inTxn[pid] = true
	}
	raw, err := bl.BuildWith(bo)
	require.NoError(t, err)
	h, err := record.ParseHeader(raw, 0)
	require.NoError(t, err)
	w.bclock = max(w.bclock, h.MaxTimestamp) + 1
	base, err := b.Append(append([]byte(nil), raw...))
	require.NoError(t, err)
	for k, ts := range tss {
		m.recs = append(m.recs, tsRec{off: base + record.Offset(k), ts: ts})
	}
	if rng.Intn(15) == 0 {
		require.NoError(t, b.Roll()) // as a roll by segment.ms
	}
}

// writeAdv34Partition writes a random partition as a Kafka broker would,
// records the model of it, and leaves it closed cleanly or not.
func writeAdv34Partition(t *testing.T, rng *rand.Rand, dir string, clean bool) *tsModel {
	o := broker.Options{
		SegmentBytes:  int64(300 + rng.Intn(3000)),
		IndexInterval: []int64{0, 1, 100, 500}[rng.Intn(4)],
		IndexBytes:    int64(12 * (2 + rng.Intn(200))),
		NoSnapshots:   true,
	}
	b, err := broker.Create(dir, "tt", 0, o)
	require.NoError(t, err)
	w := newAdv34Writer(t, rng, b)
	m := w.m
	nb := 5 + rng.Intn(60)
	for i := 0; i < nb; i++ {
		w.batch()
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
	if rng.Intn(3) == 0 && m.end > m.start {
		// DeleteRecords: the log start inside a segment.
		m.start += record.Offset(rng.Int63n(int64(m.end - m.start)))
		path := filepath.Join(dir, layout.LogStartFile)
		cp, err := recovery.ReadCheckpoint(vfs.Default, path)
		require.NoError(t, err)
		cp[recovery.TopicPartition{Topic: "tt", Partition: 0}] = m.start
		require.NoError(t, recovery.WriteCheckpoint(vfs.Default, path, cp))
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
		for i < len(m.recs) && m.recs[i].ctl {
			i++
		}
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
	seeds := int64(100)
	if raceEnabled {
		seeds = 20 // .ci/run runs all 100 without the race detector
	}
	for seed := int64(0); seed < seeds; seed++ {
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

// adv34Damages are ways to damage or plant a sealed segment's .timeindex.
var adv34Damages = []struct {
	name string
	do   func(t *testing.T, path string, b []byte)
}{
	{"missing", func(t *testing.T, path string, b []byte) { require.NoError(t, os.Remove(path)) }},
	{"non-multiple of 12", func(t *testing.T, path string, b []byte) { write(t, path, b[:len(b)-5]) }},
	{"zero-filled tail", func(t *testing.T, path string, b []byte) { write(t, path, append(b, make([]byte, 1200)...)) }},
	{"last entry dropped", func(t *testing.T, path string, b []byte) { write(t, path, b[:len(b)-12]) }},
	{"only the first entry", func(t *testing.T, path string, b []byte) { write(t, path, b[:12]) }},
	{"entries swapped", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		copy(c[0:12], b[12:24])
		copy(c[12:24], b[0:12])
		write(t, path, c)
	}},
	{"offset past the log", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		binary.BigEndian.PutUint32(c[len(c)-4:], 1_000_000)
		write(t, path, c)
	}},
	{"offset before the base", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		binary.BigEndian.PutUint32(c[8:12], 0xffffffff)
		write(t, path, c)
	}},
	{"timestamp above the log's", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		binary.BigEndian.PutUint64(c[len(c)-12:], uint64(math.MaxInt64-5))
		write(t, path, c)
	}},
	{"first timestamp above the log's", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b[:12]...)
		binary.BigEndian.PutUint64(c, 1_800_000_000_000)
		write(t, path, c)
	}},
	{"timestamp below the entry's record", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		ts := int64(binary.BigEndian.Uint64(c[len(c)-12:]))
		prev := int64(-1)
		if len(c) >= 24 {
			prev = int64(binary.BigEndian.Uint64(c[len(c)-24:]))
		}
		binary.BigEndian.PutUint64(c[len(c)-12:], uint64(prev+(ts-prev)/2+1))
		write(t, path, c)
	}},
	{"middle timestamp below its record's", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		k := len(c) / 12 / 2 // an entry with one before it and one after
		prev := int64(binary.BigEndian.Uint64(c[(k-1)*12:]))
		binary.BigEndian.PutUint64(c[k*12:], uint64(prev+1))
		write(t, path, c)
	}},
	{"middle timestamp above its record's", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		k := len(c) / 12 / 2
		next := int64(binary.BigEndian.Uint64(c[(k+1)*12:]))
		binary.BigEndian.PutUint64(c[k*12:], uint64(next-1))
		write(t, path, c)
	}},
	{"middle offset moved back", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		k := len(c) / 12 / 2
		prev := binary.BigEndian.Uint32(c[(k-1)*12+8:])
		binary.BigEndian.PutUint32(c[k*12+8:], prev)
		write(t, path, c)
	}},
	{"middle offset moved on", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		k := len(c) / 12 / 2
		next := binary.BigEndian.Uint32(c[(k+1)*12+8:])
		binary.BigEndian.PutUint32(c[k*12+8:], next)
		write(t, path, c)
	}},
	{"negative timestamp", func(t *testing.T, path string, b []byte) {
		c := append([]byte(nil), b...)
		binary.BigEndian.PutUint64(c[0:8], uint64(1<<63))
		write(t, path, c)
	}},
	{"empty", func(t *testing.T, path string, b []byte) { write(t, path, nil) }},
	{"another segment's", func(t *testing.T, path string, b []byte) {
		others, err := filepath.Glob(filepath.Join(filepath.Dir(path), "*"+layout.TimeIndexSuffix))
		require.NoError(t, err)
		for _, o := range others {
			if o != path {
				c, err := os.ReadFile(o)
				require.NoError(t, err)
				write(t, path, c)
				return
			}
		}
		t.Fatal("no other segment")
	}},
	{"directory", func(t *testing.T, path string, b []byte) {
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.Mkdir(path, 0o755))
	}},
	{"symlink", func(t *testing.T, path string, b []byte) {
		other := filepath.Join(filepath.Dir(filepath.Dir(path)), "elsewhere.timeindex")
		write(t, other, b)
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.Symlink(other, path))
	}},
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// writeAdv34Sealed writes a clean broker partition of several segments
// with non-monotonic timestamps and an index entry for every batch.
func writeAdv34Sealed(t *testing.T, dir string, seed int64) *tsModel {
	rng := rand.New(rand.NewSource(seed))
	b, err := broker.Create(dir, "tt", 0, broker.Options{SegmentBytes: 1500, IndexInterval: 1, NoSnapshots: true})
	require.NoError(t, err)
	m := &tsModel{}
	clock := int64(1_700_000_000_000)
	for i := 0; i < 80; i++ {
		var bl record.Builder
		n := 1 + rng.Intn(4)
		tss := make([]int64, n)
		for k := range tss {
			clock += int64(rng.Intn(100)) - 30
			tss[k] = clock
			bl.Append(clock, nil, []byte(fmt.Sprintf("v%d-%d", i, k)), nil)
		}
		raw, err := bl.BuildWith(record.BuildOptions{Compression: record.Compression(rng.Intn(5))})
		require.NoError(t, err)
		base, err := b.Append(append([]byte(nil), raw...))
		require.NoError(t, err)
		for k, ts := range tss {
			m.recs = append(m.recs, tsRec{off: base + record.Offset(k), ts: ts})
		}
	}
	m.end = b.End()
	require.NoError(t, b.Close())
	return m
}

// TestTimeIndexDamagedAdv34 damages the time index of a sealed segment
// after a clean shutdown (trusted, not recovered) and checks that every
// lookup by time gives the oracle's offset or an error, never a wrong
// offset, read-only and writable; and that Check reports the damage.
func TestTimeIndexDamagedAdv34(t *testing.T) {
	t.Parallel() // its own folders and no package settings
	for i, d := range adv34Damages {
		for _, seg := range []int{0, 1} {
			for mode, ro := range []bool{true, false, false} {
				repair := mode == 2 // as logfs check --repair
				if raceEnabled && (i+seg*3+mode)%12 != 0 {
					continue // one case in twelve; .ci/run runs all without the race detector
				}
				t.Run(fmt.Sprintf("%s/seg%d/ro=%v/repair=%v", d.name, seg, ro, repair), func(t *testing.T) {
					dir := t.TempDir()
					m := writeAdv34Sealed(t, dir, int64(seg))
					pdir := filepath.Join(dir, "tt-0")
					logs, err := filepath.Glob(filepath.Join(pdir, "*"+layout.LogSuffix))
					require.NoError(t, err)
					require.Greater(t, len(logs), 2)
					path := logs[seg][:len(logs[seg])-len(layout.LogSuffix)] + layout.TimeIndexSuffix
					b, err := os.ReadFile(path)
					require.NoError(t, err)
					require.GreaterOrEqual(t, len(b), 36)
					d.do(t, path, b)
					l, err := Open(dir, Options{Logger: testLogger(t), ReadOnly: ro, ForceRecovery: repair, RetentionCheckInterval: -1})
					require.NoError(t, err)
					defer l.Close()
					if ro && d.name != "missing" && d.name != "zero-filled tail" {
						require.ErrorContains(t, l.Check(), filepath.Base(path), "check names the damaged index")
					}
					p, err := l.Partition("tt", 0)
					require.NoError(t, err)
					var errs int
					for _, ts := range m.probes() {
						got, err := p.OffsetForTime(ts)
						if err != nil {
							errs++
							continue
						}
						require.Equal(t, m.first(ts), got, "OffsetForTime(%d)", ts)
					}
					require.Zero(t, errs, "lookups by time fail")
					if !ro {
						require.NoError(t, p.Check(), "the index is rebuilt; the log is whole")
						checkAdv34(t, p, m, "after the rebuild") // every record kept
					}
					if d.name == "directory" {
						// A folder is never removed: a writable open that
						// rebuilds the index moves it aside.
						aside, err := os.Stat(path + vfs.PlantedSuffix)
						if ro {
							require.ErrorIs(t, err, os.ErrNotExist, "a read-only open changes nothing")
						} else {
							require.NoError(t, err, "moved aside")
							require.True(t, aside.IsDir())
						}
					}
				})
			}
		}
	}
}

// A lookup's T between two milliseconds rounds up: the record stamped
// the millisecond below was stamped before T. A record's own timestamp
// (append.jsonl) keeps rounding down, as Java's toEpochMilli.
func TestParseTimeBoundAdv34(t *testing.T) {
	for s, want := range map[string][2]int64{
		"2024-10-10T12:00:00Z":           {1_728_561_600_000, 1_728_561_600_000},
		"2024-10-10T12:00:00.0005Z":      {1_728_561_600_000, 1_728_561_600_001},
		"2024-10-10T12:00:00.999999999Z": {1_728_561_600_999, 1_728_561_601_000},
		"2024-10-10T12:00:00.001Z":       {1_728_561_600_001, 1_728_561_600_001},
		"1969-12-31T23:59:59.999Z":       {-1, -1},
		"1969-12-31T23:59:59.9995Z":      {-1, 0},
		"1700000000":                     {1_700_000_000_000, 1_700_000_000_000},
		"2024-10-10":                     {1_728_518_400_000, 1_728_518_400_000},
	} {
		got, err := ParseTimestamp(s)
		require.NoError(t, err, s)
		require.Equal(t, want[0], got, "ParseTimestamp(%q)", s)
		got, err = ParseTimeBound(s)
		require.NoError(t, err, s)
		require.Equal(t, want[1], got, "ParseTimeBound(%q)", s)
	}
}

// A segment whose only record is stamped 0 has the time index entry
// (0, 0) after its roll: Kafka appends it (0 is above the empty index's
// -1) and trims the file to it. It is a real entry, not the zeros of a
// preallocated tail: the segment's largest timestamp is 0, and time/T for
// T = 0 starts there.
func TestTimeIndexEntryZeroZeroAdv34(t *testing.T) {
	for _, clean := range []bool{true, false} {
		for mode, ro := range []bool{true, false, false} {
			repair := mode == 2 // recovery rebuilds the index: (0, 0) again
			dir := t.TempDir()
			b, err := broker.Create(dir, "tt", 0, broker.Options{NoSnapshots: true})
			require.NoError(t, err)
			for _, ts := range []int64{0, 7} {
				var bl record.Builder
				bl.Append(ts, nil, []byte("v"), nil)
				raw, err := bl.Build()
				require.NoError(t, err)
				_, err = b.Append(append([]byte(nil), raw...))
				require.NoError(t, err)
				require.NoError(t, b.Roll())
			}
			if clean {
				require.NoError(t, b.Close())
			} else {
				require.NoError(t, b.Checkpoint(b.End()))
			}
			idx, err := os.ReadFile(filepath.Join(dir, "tt-0", "00000000000000000000.timeindex"))
			require.NoError(t, err)
			require.Equal(t, make([]byte, 12), idx, "Kafka's index: the one entry (0, 0)")
			what := fmt.Sprintf("clean %v read-only %v repair %v", clean, ro, repair)
			l, err := Open(dir, Options{Logger: testLogger(t), ReadOnly: ro, ForceRecovery: repair, RetentionCheckInterval: -1})
			require.NoError(t, err)
			p, err := l.Partition("tt", 0)
			require.NoError(t, err)
			for ts, want := range map[int64]record.Offset{-1: 0, 0: 0, 1: 1, 7: 1, 8: 2} {
				got, err := p.OffsetForTime(ts)
				require.NoError(t, err, what)
				assert.Equal(t, want, got, "%s: OffsetForTime(%d)", what, ts)
			}
			if ro {
				assert.NoError(t, l.Check(), "%s: Kafka's own index is not damage", what)
			}
			s := p.segments()[0]
			s.idxMu.RLock()
			assert.Nil(t, s.fallback, "%s: the index files stay in use", what)
			s.idxMu.RUnlock()
			require.NoError(t, l.Close())
		}
	}
}

// TestTimeOracleLogfsWriterAdv34 checks lookups by time on partitions
// logfs writes itself, with wild timestamps, rolls by size and by time
// (segment.ms on the records' timestamps), small indexes, clean reopens
// and retention by size.
func TestTimeOracleLogfsWriterAdv34(t *testing.T) {
	for seed := int64(0); seed < 25; seed++ {
		rng := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		clk := newClock()
		o := Options{Logger: testLogger(t), Now: clk.Now, RetentionCheckInterval: -1}
		l, err := Open(dir, o)
		require.NoError(t, err)
		_, err = l.CreateTopic("tt", 1, small(
			fmt.Sprintf("segment.bytes=%d", 400+rng.Intn(3000)),
			fmt.Sprintf("segment.ms=%d", 1+rng.Intn(2000)),
			fmt.Sprintf("index.interval.bytes=%d", rng.Intn(600)),
			fmt.Sprintf("segment.index.bytes=%d", 24+12*rng.Intn(30)),
			"retention.ms=-1", fmt.Sprintf("retention.bytes=%d", 3000+rng.Intn(20000)),
			"file.delete.delay.ms=0"))
		require.NoError(t, err)
		p, err := l.Partition("tt", 0)
		require.NoError(t, err)
		m := &tsModel{}
		clock := int64(1_700_000_000_000)
		styles := []int{rng.Intn(5), rng.Intn(5), rng.Intn(5)}
		for step := 0; step < 60; step++ {
			switch rng.Intn(12) {
			case 0: // a clean reopen
				require.NoError(t, l.Close())
				l, err = Open(dir, o)
				require.NoError(t, err)
				p, err = l.Partition("tt", 0)
				require.NoError(t, err)
			case 1: // retention by size
				_, err := l.EnforceRetention()
				require.NoError(t, err)
				m.start = p.StartOffset()
			default:
				recs := make([]Record, 1+rng.Intn(5))
				for i := range recs {
					ts := adv34Timestamp(rng, styles[rng.Intn(3)], &clock)
					if ts == 0 {
						ts = 1 // 0 asks for the wall clock
					}
					recs[i] = Record{Timestamp: ts, Value: []byte(fmt.Sprintf("%d-%d", step, i))}
				}
				base, err := p.Append(recs)
				require.NoError(t, err)
				for i, r := range recs {
					m.recs = append(m.recs, tsRec{off: base + record.Offset(i), ts: r.Timestamp})
				}
			}
			m.end = p.EndOffset()
		}
		checkAdv34(t, p, m, fmt.Sprintf("seed %d", seed))
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
		l, err = Open(dir, o)
		require.NoError(t, err)
		p, err = l.Partition("tt", 0)
		require.NoError(t, err)
		checkAdv34(t, p, m, fmt.Sprintf("seed %d reopened", seed))
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
	}
}

// TestTimeAfterTornWriteAdv34: a broker killed in the middle of a write
// leaves the active segment's .log cut inside a batch and its indexes
// untrimmed, with entries for what was cut (they are written before the
// log is flushed). After recovery, lookups by time find only what is
// left; a read-only open, which recovers nothing on disk, must not serve
// anything else either.
func TestTimeAfterTornWriteAdv34(t *testing.T) {
	for seed := int64(0); seed < 30; seed++ {
		rng := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		m := writeAdv34Partition(t, rng, dir, false)
		logs, err := filepath.Glob(filepath.Join(dir, "tt-0", "*"+layout.LogSuffix))
		require.NoError(t, err)
		active := logs[len(logs)-1]
		data, err := os.ReadFile(active)
		require.NoError(t, err)
		if len(data) == 0 {
			continue
		}
		cut := 1 + rng.Intn(len(data))
		require.NoError(t, os.Truncate(active, int64(cut)))
		// What is left: the batches wholly below the cut.
		end := m.end
		sc := record.NewScanner(bytes.NewReader(data), 0, record.Position(len(data)), record.ScanOptions{HeadersOnly: true})
		for sc.Next() {
			h := sc.Batch()
			if int64(h.Pos)+h.Size() > int64(cut) {
				end = h.BaseOffset
				break
			}
		}
		require.NoError(t, sc.Err())
		kept := *m
		kept.recs = nil
		for _, r := range m.recs {
			if r.off < end {
				kept.recs = append(kept.recs, r)
			}
		}
		kept.end = end
		if kept.start > end {
			continue // the log start checkpoint past the cut: not this test's subject
		}
		path := filepath.Join(dir, layout.RecoveryPointFile)
		cp, err := recovery.ReadCheckpoint(vfs.Default, path)
		require.NoError(t, err)
		cp[recovery.TopicPartition{Topic: "tt", Partition: 0}] = 0
		require.NoError(t, recovery.WriteCheckpoint(vfs.Default, path, cp))
		what := fmt.Sprintf("seed %d cut %d of %d", seed, cut, len(data))

		l, err := Open(dir, Options{Logger: testLogger(t), ReadOnly: true, RetentionCheckInterval: -1})
		require.NoError(t, err, what)
		p, err := l.Partition("tt", 0)
		require.NoError(t, err, what)
		for _, ts := range kept.probes() {
			got, err := p.OffsetForTime(ts)
			if err == nil {
				require.Equal(t, kept.first(ts), got, "%s read-only: OffsetForTime(%d)", what, ts)
			}
		}
		require.NoError(t, l.Close())

		l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err, what)
		p, err = l.Partition("tt", 0)
		require.NoError(t, err, what)
		checkAdv34(t, p, &kept, what)
		require.NoError(t, l.Check(), what)
		require.NoError(t, l.Close())
	}
}

// TestTimeOracleFollowedAdv34: lookups by time on a broker's partition
// followed read-only while it writes, rolls and deletes its oldest
// segment: the followed active segment's max timestamp grows with it.
func TestTimeOracleFollowedAdv34(t *testing.T) {
	for seed := int64(0); seed < 8; seed++ {
		rng := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		b, err := broker.Create(dir, "f", 0, broker.Options{SegmentBytes: int64(300 + rng.Intn(2000)), IndexInterval: 100, NoSnapshots: true})
		require.NoError(t, err)
		w := newAdv34Writer(t, rng, b)
		for i := 0; i < 10; i++ {
			w.batch()
		}
		require.NoError(t, b.Checkpoint(b.End()))
		_, p := followed(t, dir, ReadUncommitted)
		for round := 0; round < 4; round++ {
			w.m.end = b.End()
			eventually(t, "the followed end", func() bool { return p.EndOffset() == w.m.end })
			checkAdv34(t, p, w.m, fmt.Sprintf("seed %d round %d", seed, round))
			for i := 0; i < 5+rng.Intn(20); i++ {
				w.batch()
			}
			if round == 2 && b.DeleteOldest(true) == nil {
				start := b.Dir() // the new log start: the oldest .log left
				logs, err := filepath.Glob(filepath.Join(start, "*"+layout.LogSuffix))
				require.NoError(t, err)
				var base int64
				fmt.Sscanf(filepath.Base(logs[0]), "%020d", &base)
				w.m.start = record.Offset(base)
				eventually(t, "the followed start", func() bool { return p.StartOffset() == w.m.start })
			}
			require.NoError(t, b.Checkpoint(b.End()))
		}
	}
}
