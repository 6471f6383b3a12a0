package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// The logfs binary that serves the mounts of the tests that mount, built
// on first use and removed by TestMain.
var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func logfsBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "logfs-bench-test-"); binErr != nil {
			return
		}
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		out, err := exec.Command(goTool, "build", "-o", filepath.Join(binDir, "logfs"), "github.com/logfs/logfs/cmd/logfs").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return filepath.Join(binDir, "logfs")
}

// tinyOptions is a run of phases shrunk to a second or two: one record
// size, small segments so that the data set rolls.
func tinyOptions(t *testing.T, phases ...string) Options {
	o := DefaultOptions()
	o.Sizes, o.Batches, o.Records, o.SegmentBytes = []int{100}, []int{8}, 400, 64<<10
	o.Lookups, o.PhaseTime, o.FsyncTime = 100, 200*time.Millisecond, 20*time.Millisecond
	o.Readers, o.MixedRecords, o.ToolRuns, o.Segments = 2, 300, 3, 40
	o.Phases, o.Dir = phases, t.TempDir()
	return o
}

// requireCleanedUp checks that a run left nothing behind: no data, no
// mount.
func requireCleanedUp(t *testing.T, dir string) {
	t.Helper()
	require.Empty(t, mountsUnder(dir), "a mount was left behind")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "the run's data must be removed")
}

// corruptFirstValue changes the last byte of the value of offset 0 in the
// data set and fixes the batch's CRC, so that logfs itself cannot tell:
// only the benchmark's own checks can.
func corruptFirstValue(dir string) error {
	logs, err := filepath.Glob(filepath.Join(dir, layout.PartitionDirName(topic, 0), "*"+layout.LogSuffix))
	if err != nil || len(logs) == 0 {
		return os.ErrNotExist
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		return err
	}
	h, err := record.ParseHeader(b, 0)
	if err != nil {
		return err
	}
	size := int(h.Size())
	i := bytes.Index(b[:size], []byte("0000000000000000"))
	if i < 0 {
		return os.ErrNotExist
	}
	end := i + 100 - 1 // 100-byte values
	b[end] = map[bool]byte{true: 'a', false: 'b'}[b[end] != 'a']
	// The CRC-32C at byte 17 covers the batch from its attributes, byte 21.
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:size], crc32.MakeTable(crc32.Castagnoli)))
	return os.WriteFile(logs[0], b, 0o644)
}

func TestRunFailsOnWrongData(t *testing.T) {
	cases := map[string]struct {
		phase string
		mount bool
	}{
		"sequential read":       {phase: PhaseRead},
		"cat through the mount": {phase: PhaseCat, mount: true},
		"preads of the mount":   {phase: PhasePread, mount: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := tinyOptions(t, tc.phase)
			if tc.mount {
				fusetest.Require(t)
				o.Exe = logfsBinary(t)
			}
			tamper = corruptFirstValue
			t.Cleanup(func() { tamper = nil })
			rep, err := Run(context.Background(), o, nil)
			require.NoError(t, err, "a wrong answer is reported, not an error of the run")
			var table bytes.Buffer
			require.NoError(t, rep.WriteTable(&table))
			require.Positive(t, rep.Wrong)
			require.ErrorIs(t, rep.Err(), ErrWrongAnswer)
			require.ErrorContains(t, rep.Err(), "wrong answer")
			require.Contains(t, table.String(), "WRONG")
			requireCleanedUp(t, o.Dir)
		})
	}
}

// TestRunReaderPhases runs the reader phases on a tiny data set: every
// case gives its rows, each mount row has its baseline, and every output
// checked is right.
func TestRunReaderPhases(t *testing.T) {
	fusetest.Require(t)
	o := tinyOptions(t, PhaseReaders, PhasePread, PhaseOpen, PhaseConcurrent, PhaseWrite)
	o.Exe, o.Count = logfsBinary(t), 1
	rep, err := Run(context.Background(), o, nil)
	require.NoError(t, err)
	requireCleanedUp(t, o.Dir)
	require.NoError(t, rep.Err())
	cells := map[string]int{}
	for _, r := range rep.Results {
		cells[r.Phase+"/"+r.Subject+"/"+r.Pass]++
		if r.Subject == SubjectMount {
			require.Positive(t, r.VsBase, "%s %s %s has no baseline", r.Phase, r.Case, r.Pass)
		}
	}
	tools, _ := readerTools()
	require.Equal(t, len(tools), cells["readers/mount/first"])
	require.Equal(t, len(tools), cells["readers/mount/second"])
	require.Equal(t, len(tools), cells["readers/plain/"])
	require.Equal(t, len(tools), cells["readers/floor/first"])
	checked := map[string]bool{}
	for _, tool := range tools {
		checked[tool.name] = tool.want != nil
	}
	for _, r := range rep.Results {
		if r.Phase == PhaseReaders && r.Subject == SubjectFloor && checked[r.Case] {
			// The floor serves the plain file's lines, and is checked as it is.
			require.Positive(t, r.Verified, "%s %s", r.Case, r.Pass)
		}
	}
	require.Equal(t, 1, cells["pread/mount/first"])
	require.Equal(t, 1, cells["pread/mount/second"])
	require.Equal(t, 1, cells["open/mount/"])
	require.Equal(t, 2, cells["concurrent/mount/first"], "one reader and four")
	require.Equal(t, 1, cells["concurrent/mount/second"])
	require.Equal(t, 1, cells["write/floor/"])
	require.Equal(t, 1, cells["write/mount/"])
	require.Len(t, rep.MountRSS, 1)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "one-line writes within 2x of the go-fuse floor")
}

func TestRunRejectsInvalidOptions(t *testing.T) {
	cases := map[string]func(o *Options){
		"no sizes":             func(o *Options) { o.Sizes = nil },
		"size below MinSize":   func(o *Options) { o.Sizes = []int{MinSize - 1} },
		"size over a segment":  func(o *Options) { o.Sizes = []int{int(o.SegmentBytes)} },
		"batch over a segment": func(o *Options) { o.Batches = []int{1 << 20} },
		"zero count":           func(o *Options) { o.Count = 0 },
		"unknown phase":        func(o *Options) { o.Phases = []string{"nope"} },
		"mount without Exe":    func(o *Options) { o.Phases = []string{PhaseTail} },
		"few segments":         func(o *Options) { o.Phases, o.Exe, o.Segments = []string{PhaseMemory}, "logfs", 9 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			o := tinyOptions(t, PhaseRead)
			mutate(&o)
			rep, err := Run(context.Background(), o, nil)
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.Nil(t, rep)
			requireCleanedUp(t, o.Dir)
		})
	}
	o := DefaultOptions()
	require.NoError(t, o.Validate(), "the defaults are valid")
}

// TestRunProgress: one progress line per measured cell, and the report's
// rows in report order.
func TestRunProgress(t *testing.T) {
	o := tinyOptions(t, PhaseAppend, PhaseLookup)
	var progress bytes.Buffer
	rep, err := Run(context.Background(), o, &progress)
	require.NoError(t, err)
	requireCleanedUp(t, o.Dir)
	require.NoError(t, rep.Err())
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	require.Len(t, lines, 1+4, "a first line, then append and lookup of raw and logfs")
	require.Contains(t, lines[0], "logfs bench: data in ")
	var order []string
	for _, r := range rep.Results {
		order = append(order, r.Phase+"/"+r.Subject)
	}
	require.Equal(t, []string{"append/logfs", "append/raw", "lookup/logfs", "lookup/raw"}, order)
}
