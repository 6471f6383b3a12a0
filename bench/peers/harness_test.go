package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/bench"
)

// tinyOptions is a full run shrunk to well under a second per log.
func tinyOptions(t *testing.T) Options {
	o := DefaultOptions()
	o.Logs = realAdapters()
	o.Sizes = []int{16, 4096}
	o.Batches = []int{1, 8}
	o.Records = 300
	o.SegmentBytes = testSegment
	o.Dir = t.TempDir()
	o.Lookups = 100
	o.PhaseTime = time.Second
	o.FsyncTime = 20 * time.Millisecond
	o.Readers = 2
	o.MixedRecords = 200
	o.Repeat = 2
	return o
}

func TestRunMeasuresEveryCellAndCleansUp(t *testing.T) {
	o := tinyOptions(t)
	rep, err := Run(context.Background(), o)
	require.NoError(t, err)

	ents, err := os.ReadDir(o.Dir)
	require.NoError(t, err)
	require.Empty(t, ents, "the run's data directory must be removed")

	type key struct {
		log, phase  string
		size, batch int
	}
	got := map[key]Result{}
	for _, r := range rep.Results {
		k := key{r.Log, r.Phase, r.Size, r.Batch}
		_, dup := got[k]
		require.False(t, dup, "duplicate cell %+v", k)
		got[k] = r
	}
	for _, log := range o.Logs {
		for _, size := range o.Sizes {
			for _, phase := range Phases {
				batches := o.Batches
				switch phase {
				case PhaseReopen, PhaseLookup, PhaseLookupTime, PhaseRead:
					batches = []int{0}
				}
				for _, batch := range batches {
					r, ok := got[key{log, phase, size, batch}]
					require.True(t, ok, "missing %s %s size=%d batch=%d", log, phase, size, batch)
					require.Equal(t, o.Repeat, r.Runs, "%+v", r)
					if r.NA != "" {
						require.Contains(t, []string{PhaseLookupTime, PhaseMixed}, phase, "%s cannot %s?", log, phase)
						continue
					}
					require.Positive(t, r.Ops, "%+v", r)
					require.Positive(t, r.NsPerOp, "%+v", r)
					switch phase {
					case PhaseAppend, PhaseRead:
						require.EqualValues(t, o.Records, r.Records, "%+v", r)
					case PhaseMixed:
						require.EqualValues(t, o.MixedRecords, r.Records, "%+v", r)
					}
					if phase == PhaseMixed {
						require.Equal(t, o.Readers, r.Readers)
						require.Positive(t, r.ReaderMBps)
						require.Positive(t, r.LagP99)
					}
					if phase != PhaseLookupTime && phase != PhaseMixed { // raw has neither
						require.Positive(t, r.VsRaw, "%+v", r)
					}
					if !(log == "liftbridge" && phase == PhaseLookupTime) { // see TestLiftbridgeTimeLookupGapBug
						require.Zero(t, r.Wrong, "%+v", r)
					}
				}
			}
		}
	}
	// What the survey says each peer can do.
	require.Empty(t, got[key{"liftbridge", PhaseLookupTime, 16, 0}].NA)
	require.Empty(t, got[key{"liftbridge", PhaseMixed, 16, 8}].NA)
	require.NotEmpty(t, got[key{"tidwall", PhaseMixed, 16, 8}].NA)
	require.NotEmpty(t, got[key{RawName, PhaseLookupTime, 16, 0}].NA)

	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, rep))
	require.Contains(t, table.String(), "== record size 4096 B: 300 records")
	require.Contains(t, table.String(), "liftbridge")
	require.Contains(t, table.String(), "n/a (readers cannot wait for data): raw, rosedb, tidwall")
	require.Contains(t, table.String(), "logfs time/op / peer time/op", "logfs is registered: compared with every peer")
	require.Empty(t, got[key{LogfsName, PhaseLookupTime, 16, 0}].NA)
	require.Empty(t, got[key{LogfsName, PhaseMixed, 16, 8}].NA, "logfs followers wait with Reader.Wait")

	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, rep))
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Len(t, back.Results, len(rep.Results))
}

func TestRunCancelledRemovesData(t *testing.T) {
	o := tinyOptions(t)
	o.Records = 200_000
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := Run(ctx, o)
	require.ErrorIs(t, err, context.Canceled)
	ents, err := os.ReadDir(o.Dir)
	require.NoError(t, err)
	require.Empty(t, ents)
}

func TestLogfsComparisonTable(t *testing.T) {
	// Synthetic results: the logfs section appears once a "logfs" log ran.
	rs := []Result{
		{Log: RawName, Phase: PhaseLookup, Size: 100, Ops: 1, Elapsed: 100},
		{Log: LogfsName, Phase: PhaseLookup, Size: 100, Ops: 1, Elapsed: 300},
		{Log: "liftbridge", Phase: PhaseLookup, Size: 100, Ops: 1, Elapsed: 600},
	}
	for i := range rs {
		rs[i].finish()
	}
	computeRatios(rs)
	require.InDelta(t, 3.0, rs[1].VsRaw, 1e-9)
	var b bytes.Buffer
	require.NoError(t, writeLogfsVsPeers(&b, rs))
	require.Contains(t, b.String(), "logfs time/op / peer time/op")
	require.Regexp(t, `100\s+lookup\s+0\s+3\.00\s+0\.50`, b.String())
}

func TestPercentilesNearestRank(t *testing.T) {
	s := make([]int64, 100)
	for i := range s {
		s[i] = int64(100 - i) // 100..1, unsorted
	}
	p50, p99 := bench.Percentiles(s)
	require.EqualValues(t, 50, p50)
	require.EqualValues(t, 99, p99)
	p50, p99 = bench.Percentiles([]int64{7})
	require.EqualValues(t, 7, p50)
	require.EqualValues(t, 7, p99)
}

func TestMedianRunsKeepsMedianAndAllWrongAnswers(t *testing.T) {
	mk := func(ns float64, wrong int64) Result {
		r := Result{Log: "x", Phase: PhaseLookup, Size: 100, Ops: 10, NsPerOp: ns, Wrong: wrong}
		if wrong > 0 {
			r.WrongExample = "bad"
		}
		return r
	}
	rs := medianRuns([]Result{mk(30, 0), mk(10, 2), mk(20, 0), {Log: "y", Phase: PhaseLookup, Size: 100, NsPerOp: 5}})
	require.Len(t, rs, 2)
	require.InDelta(t, 20.0, rs[0].NsPerOp, 0)
	require.Equal(t, 3, rs[0].Runs)
	require.InDelta(t, 10.0, rs[0].MinNsPerOp, 0)
	require.InDelta(t, 30.0, rs[0].MaxNsPerOp, 0)
	require.EqualValues(t, 2, rs[0].Wrong, "wrong answers of every run are kept")
	require.Equal(t, "bad", rs[0].WrongExample)
	require.Equal(t, 1, rs[1].Runs)
}
