package storage

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/logfs/logfs/record"
)

type modelRecord struct {
	ts    int64
	value []byte
}

// logMachine drives a partition with random appends, rolls, retention and
// reopens, and checks after every step that it reads back exactly what was
// appended, by offset and by time.
type logMachine struct {
	t       *rapid.T
	dir     string
	clk     *clock
	l       *Log
	p       *Partition
	model   []modelRecord // by offset
	lastTS  int64
	reopens int
}

func (m *logMachine) open() {
	l, err := Open(m.dir, Options{Logger: testLogger(m.t), Now: m.clk.Now, RetentionCheckInterval: -1})
	require.NoError(m.t, err)
	m.l = l
	p, err := l.Partition("t", 0)
	require.NoError(m.t, err)
	m.p = p
}

func (m *logMachine) Append(t *rapid.T) {
	n := rapid.IntRange(1, 6).Draw(t, "records")
	recs := make([]Record, n)
	for i := range recs {
		size := rapid.IntRange(0, 600).Draw(t, "size")
		// Mostly increasing timestamps, sometimes a step back.
		m.lastTS += rapid.Int64Range(-50, 200).Draw(t, "dt")
		m.lastTS = max(m.lastTS, 1)
		recs[i] = Record{Timestamp: m.lastTS, Value: bytes.Repeat([]byte{byte('a' + len(m.model)%26)}, size)}
	}
	first, err := m.p.Append(recs)
	require.NoError(t, err)
	require.Equal(t, record.Offset(len(m.model)), first)
	for _, r := range recs {
		m.model = append(m.model, modelRecord{r.Timestamp, r.Value})
	}
}

func (m *logMachine) Retention(t *rapid.T) {
	m.clk.Advance(time.Duration(rapid.IntRange(0, 120).Draw(t, "seconds")) * time.Second)
	before := m.p.StartOffset()
	_, err := m.l.EnforceRetention()
	require.NoError(t, err)
	require.GreaterOrEqual(t, m.p.StartOffset(), before)
}

func (m *logMachine) Reopen(t *rapid.T) {
	require.NoError(t, m.l.Check())
	require.NoError(t, m.l.Close())
	m.open()
	m.reopens++
}

func (m *logMachine) Check(t *rapid.T) {
	start, end := m.p.StartOffset(), m.p.EndOffset()
	require.Equal(t, record.Offset(len(m.model)), end)
	if start == end {
		return
	}
	from := record.Offset(rapid.Int64Range(int64(start), int64(end)-1).Draw(t, "from"))
	r, err := m.p.NewReader(from)
	require.NoError(t, err)
	defer r.Close()
	for off := from; off < end; off++ {
		rec, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, off, rec.Offset)
		require.Equal(t, m.model[off].ts, rec.Timestamp)
		require.Equal(t, m.model[off].value, rec.Value)
	}
	ts := m.model[rapid.IntRange(int(start), int(end)-1).Draw(t, "pick")].ts + rapid.Int64Range(-1, 1).Draw(t, "nudge")
	want := end
	for off := start; off < end; off++ {
		if m.model[off].ts >= ts {
			want = off
			break
		}
	}
	got, err := m.p.OffsetForTime(ts)
	require.NoError(t, err)
	require.Equal(t, want, got, "first offset with timestamp >= %d", ts)
}

func TestPropertyAppendRollRetentionReopen(t *testing.T) {
	t.Parallel() // its own folder and no package settings: runs beside the other slow ones
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		clk := newClock()
		l, err := Open(dir, Options{Logger: testLogger(rt), Now: clk.Now})
		require.NoError(rt, err)
		_, err = l.CreateTopic("t", 1, small(
			fmt.Sprintf("segment.bytes=%d", rapid.IntRange(4000, 12000).Draw(rt, "segment.bytes")),
			fmt.Sprintf("index.interval.bytes=%d", rapid.IntRange(0, 1000).Draw(rt, "index.interval.bytes")),
			// Small indexes also exercise the roll on a full index.
			fmt.Sprintf("segment.index.bytes=%d", rapid.IntRange(24, 4096).Draw(rt, "segment.index.bytes")),
			fmt.Sprintf("retention.ms=%d", rapid.Int64Range(30_000, 600_000).Draw(rt, "retention.ms")),
			"file.delete.delay.ms=0"))
		require.NoError(rt, err)
		require.NoError(rt, l.Close())
		m := &logMachine{t: rt, dir: dir, clk: clk, lastTS: clk.Now().UnixMilli()}
		m.open()
		defer func() {
			require.NoError(rt, m.l.Check())
			require.NoError(rt, m.l.Close())
		}()
		rt.Repeat(rapid.StateMachineActions(m))
	})
}
