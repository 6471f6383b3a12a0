package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/bench"
	"github.com/logfs/logfs/internal/fusetest"
)

// tinyBench is a whole `logfs bench` run shrunk to a few seconds: every
// phase, two record sizes, two batch sizes, small segments so that the
// data sets roll.
func tinyBench(dir string, extra ...string) []string {
	return append([]string{"bench", "--dir", dir, "-q",
		"--size", "100,1k", "--batch", "1,8", "--records", "400", "--segment-bytes", "64KiB",
		"--lookups", "100", "--phase-time", "200ms", "--fsync-time", "20ms",
		"--readers", "2", "--mixed-records", "300", "--tool-runs", "3", "--segments", "40"}, extra...)
}

// requireBenchCleanedUp checks that a run left nothing behind: no data,
// no mount.
func requireBenchCleanedUp(t *testing.T, dir string) {
	t.Helper()
	require.Empty(t, mountsUnder(t, dir), "a mount was left behind")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "the run's data must be removed")
}

// mountsUnder lists the mount points at or under dir.
func mountsUnder(t *testing.T, dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

func TestBenchTable(t *testing.T) {
	dir := t.TempDir()
	out := ok(t, dir, "", tinyBench(dir)...)
	requireBenchCleanedUp(t, dir)

	require.Contains(t, out, "logfs bench: linux/")
	require.Regexp(t, `load average [0-9.]+ [0-9.]+ [0-9.]+ at start, [0-9.]+ [0-9.]+ [0-9.]+ at end`, out)
	for _, size := range []string{"== record size 100 B: 400 records", "== record size 1024 B: 400 records"} {
		require.Contains(t, out, size)
	}
	require.Regexp(t, `phase\s+batch\s+subject\s+ops\s+time/op\s+MB/s\s+rec/s\s+p50\s+p99\s+x base\s+checked`, out)
	// Every storage phase has a logfs row compared with raw.
	for _, re := range []string{
		`append\s+1\s+logfs\s+400\s+\S+\s+[0-9.]+\s+\S+\s+\S+\s+\S+\s+[0-9.]+ raw\s+400`,
		`append\s+8\s+logfs\s+400 .* raw\s+400`,
		`append\+fsync\s+8\s+logfs .* raw`,
		`lookup\s+-\s+logfs\s+100 .* raw\s+100`,
		`lookup-time\s+-\s+logfs\s+100 .* raw\s+100`,
		`read\s+-\s+logfs\s+400 .* raw\s+400`,
		`mixed\s+8\s+logfs\s+300 .* raw\s+600 .*readers [0-9]+ MB/s, lag p50`,
		`read\s+-\s+raw\s+400`,
	} {
		require.Regexp(t, re, out)
	}
	require.Contains(t, out, "== targets")
	require.Regexp(t, `(met|MISSED)\s+batched append >= 0.7x raw\s+100 B, batch 8: [0-9.]+x raw`, out)
	require.Regexp(t, `(met|MISSED)\s+sequential read >= 0.7x raw`, out)
	require.NotContains(t, out, "WRONG")
}

func TestBenchJSON(t *testing.T) {
	dir := t.TempDir()
	out := ok(t, dir, "", tinyBench(dir, "--json", "--size", "100", "--count", "2")...)
	requireBenchCleanedUp(t, dir)

	var rep bench.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, []int{100}, rep.Options.Sizes)
	require.Equal(t, []int64{400}, rep.Records)
	require.NotEmpty(t, rep.Machine.LoadAvg)
	require.Zero(t, rep.Wrong)
	type key struct{ phase, subj string }
	got := map[key]int{}
	for _, r := range rep.Results {
		got[key{r.Phase, r.Subject}]++
		require.Equal(t, 2, r.Runs, "%+v", r)
		require.Positive(t, r.NsPerOp, "%+v", r)
		require.Zero(t, r.Wrong, "%+v", r)
		if r.Subject == bench.SubjectLogfs {
			require.Positive(t, r.VsBase, "%+v", r)
			require.NotEmpty(t, r.Baseline, "%+v", r)
			require.Positive(t, r.Verified, "logfs answers are checked: %+v", r)
		}
		switch r.Phase {
		case bench.PhaseLookup, bench.PhaseRead:
			require.Positive(t, r.Verified, "%+v", r)
			require.Positive(t, r.MBps, "%+v", r)
		case bench.PhaseMixed:
			require.Positive(t, r.LagP99, "%+v", r)
			require.EqualValues(t, 2*300, r.Verified, "every follower checks every record")
		}
	}
	for _, k := range []key{
		{bench.PhaseAppend, bench.SubjectLogfs}, {bench.PhaseAppend, bench.SubjectRaw}, {bench.PhaseAppendSync, bench.SubjectLogfs}, {bench.PhaseAppendSync, bench.SubjectRaw},
		{bench.PhaseLookup, bench.SubjectLogfs}, {bench.PhaseLookup, bench.SubjectRaw}, {bench.PhaseLookupTime, bench.SubjectLogfs}, {bench.PhaseRead, bench.SubjectLogfs}, {bench.PhaseRead, bench.SubjectRaw},
		{bench.PhaseMixed, bench.SubjectLogfs},
	} {
		want := 1
		if k.phase == bench.PhaseAppend || k.phase == bench.PhaseAppendSync || k.phase == bench.PhaseMixed {
			want = 2 // batch 1 and 8
		}
		require.Equal(t, want, got[k], "%v", k)
	}
	require.NotEmpty(t, rep.Targets)
}

// TestBenchFailsOnWrongData: a report with a wrong answer is printed and
// fails the command. That the workloads catch wrong data, through the
// storage API and through the mount, is tested in package bench, which can
// corrupt a data set between writing and reading it.
func TestBenchFailsOnWrongData(t *testing.T) {
	runBench = func(ctx context.Context, o bench.Options, progress io.Writer) (*bench.Report, error) {
		rep, err := bench.Run(ctx, o, progress)
		if rep != nil && len(rep.Results) > 0 {
			rep.Results[0].Wrong, rep.Results[0].WrongExample = 1, "offset 0: value bytes differ"
			rep.Wrong++
		}
		return rep, err
	}
	t.Cleanup(func() { runBench = bench.Run })
	dir := t.TempDir()
	args := tinyBench(dir, "--size", "100", "--batch", "8", "--phases", "read")
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, exitFailure, code, "stdout: %s\nstderr: %s", &stdout, &stderr)
	require.Contains(t, stderr.String(), "wrong answer")
	require.Contains(t, stdout.String(), "WRONG")
	requireBenchCleanedUp(t, dir)
}

func TestBenchMount(t *testing.T) {
	fusetest.Require(t)
	dir := t.TempDir()
	out := ok(t, dir, "", tinyBench(dir, "--mount", "--json", "--size", "100", "--phases", "cat,tail,head,cat>>append,memory")...)
	requireBenchCleanedUp(t, dir)

	var rep bench.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Zero(t, rep.Wrong)
	got := map[string]bench.Result{}
	for _, r := range rep.Results {
		got[r.Phase+"/"+r.Subject] = r
	}
	for _, phase := range []string{bench.PhaseCat, bench.PhaseTail, bench.PhaseHead, bench.PhaseCatAppend} {
		m, p := got[phase+"/"+bench.SubjectMount], got[phase+"/"+bench.SubjectPlain]
		require.Positive(t, m.NsPerOp, phase)
		require.Positive(t, p.NsPerOp, phase)
		require.Positive(t, m.Verified, "%s through the mount is checked", phase)
		require.Equal(t, bench.SubjectPlain, m.Baseline, phase)
		require.Positive(t, m.VsBase, phase)
	}
	require.EqualValues(t, 400, got[bench.PhaseCat+"/"+bench.SubjectMount].Records)
	require.EqualValues(t, 3*400, got[bench.PhaseCatAppend+"/"+bench.SubjectMount].Verified, "three runs of 400 lines appended")

	mem := rep.Memory
	require.NotNil(t, mem)
	require.Equal(t, 40, mem.Segments)
	require.Len(t, mem.Steps, 3)
	require.Positive(t, mem.PeakRSS)
	require.Positive(t, mem.SegmentsRead)
	// Whether segments nobody read are mapped is a target (reported), not a
	// property of the benchmark; the counts must add up.
	require.LessOrEqual(t, mem.MappedUnread, mem.Mapped)
	require.Equal(t, mem.Mapped, mem.Steps[2].SegsMapped)
	require.Zero(t, mem.Steps[0].FileMaps, "a fresh mount of a clean directory maps no segment file")
	require.GreaterOrEqual(t, mem.PeakRSS, mem.Steps[0].RSS)
	require.Positive(t, mem.Verified)
}

func TestBenchInterruptRemovesEverything(t *testing.T) {
	args := []string{"--size", "1k", "--records", "2000000", "--max-records", "2000000", "--phases", "append"}
	mount := false
	if _, err := os.Stat("/dev/fuse"); err == nil && os.Geteuid() == 0 {
		// Interrupted while mounted: the mount must go too.
		mount = true
		args = []string{"--mount", "--phases", "tail", "--size", "100", "--records", "1000", "--tool-runs", "1000000"}
	}
	dir := t.TempDir()
	cmd := exec.Command(logfsBin, append([]string{"bench", "--dir", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill() // if the test fails before the interrupt
	// The interrupt comes once the run is under way: its data folder made
	// and, with --mount, the mount up. (A fixed 1.5 s came, on a loaded
	// machine, before the mount.)
	waitFor(t, "the bench run under way", func() bool {
		ents, err := os.ReadDir(dir)
		return err == nil && len(ents) > 0 && (!mount || len(mountsUnder(t, dir)) > 0)
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr: %s", &stderr)
	require.Equal(t, exitFailure, ee.ExitCode(), "stderr: %s", &stderr)
	require.Contains(t, stderr.String(), "interrupted; data removed")
	requireBenchCleanedUp(t, dir)
}

func TestBenchUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"bench", "--size", "10"},
		{"bench", "--phases", "nope"},
		{"bench", "--phases", "cat"},
		{"bench", "--batch", "64", "--size", "16k", "--segment-bytes", "1MiB"},
		{"bench", "extra"},
	} {
		r := logfs(t, dir, "", args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}
}

// TestBenchFlagDefaults: the flags written as text (lists, byte counts)
// default to bench.DefaultOptions, as the numeric ones do by construction.
func TestBenchFlagDefaults(t *testing.T) {
	f := newBenchCommand().Flags()
	d := bench.DefaultOptions()
	def := func(name string) string { return f.Lookup(name).DefValue }
	sizes, err := parseBenchSizes(def("size"))
	require.NoError(t, err)
	require.Equal(t, d.Sizes, sizes)
	batches, err := parseBenchSizes(def("batch"))
	require.NoError(t, err)
	require.Equal(t, d.Batches, batches)
	dataBytes, err := parseBenchBytes(def("data-bytes"))
	require.NoError(t, err)
	require.Equal(t, d.DataBytes, dataBytes)
	segBytes, err := parseBenchBytes(def("segment-bytes"))
	require.NoError(t, err)
	require.Equal(t, d.SegmentBytes, segBytes)
	phases, err := parseBenchPhases(def("phases"), false)
	require.NoError(t, err)
	require.Equal(t, d.Phases, phases)
}
