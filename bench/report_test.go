package bench

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentiles(t *testing.T) {
	cases := map[string]struct {
		samples  []int64
		p50, p99 time.Duration
	}{
		"none":    {},
		"one":     {samples: []int64{7}, p50: 7, p99: 7},
		"1..100":  {samples: []int64{100, 1, 99, 50, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98}, p50: 50, p99: 99},
		"two":     {samples: []int64{20, 10}, p50: 10, p99: 20},
		"outlier": {samples: []int64{1, 1, 1, 1000}, p50: 1, p99: 1000},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p50, p99 := Percentiles(tc.samples)
			require.Equal(t, tc.p50, p50)
			require.Equal(t, tc.p99, p99)
		})
	}
}

func TestMediansAndRatios(t *testing.T) {
	cell := func(phase, subj string, batch int, elapsed time.Duration, records int64, wrong int64) Result {
		r := Result{Phase: phase, Subject: subj, Size: 100, Batch: batch, Elapsed: elapsed, Ops: 10, Records: records, Wrong: wrong}
		if wrong > 0 {
			r.WrongExample = "example"
		}
		r.finish()
		return r
	}
	rs := medians([]Result{
		cell(PhaseAppend, SubjectLogfs, 8, 300, 10, 0),
		cell(PhaseAppend, SubjectRaw, 8, 100, 10, 0),
		cell(PhaseAppend, SubjectLogfs, 8, 200, 10, 1),
		cell(PhaseLookupTime, SubjectLogfs, 0, 40, 0, 0),
		cell(PhaseLookup, SubjectRaw, 0, 20, 10, 0),
		cell(PhaseAppend, SubjectLogfs, 8, 100, 10, 0),
		cell(PhaseMixed, SubjectLogfs, 8, 400, 10, 0),
		cell(PhaseCat, SubjectPlain, 0, 50, 10, 0),
		cell(PhaseCat, SubjectMount, 0, 100, 10, 0),
	})
	ratios(rs)
	var got []string
	for _, r := range rs {
		got = append(got, r.Phase+"/"+r.Subject)
	}
	require.Equal(t, []string{"append/logfs", "append/raw", "lookup/raw", "lookup-time/logfs", "mixed/logfs", "cat/mount", "cat/plain"}, got,
		"by phase in report order, logfs or mount before its baseline")

	app := rs[0]
	require.Equal(t, 3, app.Runs)
	require.EqualValues(t, 200, app.Elapsed, "the median run")
	require.EqualValues(t, 10, app.MinNsOp)
	require.EqualValues(t, 30, app.MaxNsOp)
	require.EqualValues(t, 1, app.Wrong, "wrong answers of every run are kept")
	require.Equal(t, "example", app.WrongExample)
	require.Equal(t, SubjectRaw, app.Baseline)
	require.InDelta(t, 0.5, app.VsBase, 1e-9, "raw's time per record over logfs's")
	require.Zero(t, rs[1].VsBase, "baselines have no ratio")

	lt := rs[3]
	require.Equal(t, SubjectRaw, lt.Baseline, "lookup-time against raw lookup by offset")
	require.InDelta(t, 0.5, lt.VsBase, 1e-9, "per operation when no records move")
	require.InDelta(t, 10.0/40, rs[4].VsBase, 1e-9, "mixed against raw append of the same batch")
	require.Equal(t, SubjectPlain, rs[5].Baseline)
	require.InDelta(t, 0.5, rs[5].VsBase, 1e-9)
}

func TestReportOutput(t *testing.T) {
	rep := &Report{Options: DefaultOptions(), Records: []int64{400}, LoadEnd: "-"}
	rep.Options.Sizes = []int{100}
	rep.Results = []Result{{Phase: PhaseRead, Subject: SubjectLogfs, Size: 100, Ops: 400, Records: 400, Bytes: 40_000, Elapsed: time.Millisecond, Verified: 400}}
	rep.Results[0].finish()
	require.NoError(t, rep.Err())

	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "== record size 100 B: 400 records (39.1 KiB of values) ==")
	require.Regexp(t, `read\s+-\s+logfs\s+400\s+2.50µs\s+40.0\s+400.0k`, table.String())
	require.NotContains(t, table.String(), "WRONG")

	rep.Wrong = 2
	require.ErrorIs(t, rep.Err(), ErrWrongAnswer)
	require.EqualError(t, rep.Err(), "2 wrong answers: logfs returned data other than what was written (see WRONG above)")
	table.Reset()
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "== WRONG ANSWERS: 2 ==")

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Equal(t, rep.Results, back.Results)
	require.Equal(t, rep.Options.Phases, back.Options.Phases)
	require.Empty(t, back.Options.Exe, "not part of the report")
}
