package recovery_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// syncBuffer is a bytes.Buffer for a logger used by many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(s.b.Bytes()), []byte("\n")) {
		m := map[string]any{}
		require.NoError(t, json.Unmarshal(line, &m))
		out = append(out, m)
	}
	return out
}

// TestLoadAllProgress: unclean loads of several partitions run on a bounded
// pool and report progress in the log: the partitions and .log bytes to
// scan at the start, what is left while they run, and a summary; the
// report lists every partition.
func TestLoadAllProgress(t *testing.T) {
	root := t.TempDir()
	var parts []recovery.PartitionOptions
	var total int64
	for i := 0; i < 6; i++ {
		dir := filepath.Join(root, "p-"+string(rune('0'+i)))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		files := benchPartition(t, dir, 8<<20, 2<<20, 16<<10)
		for _, f := range files {
			st, err := os.Stat(f)
			require.NoError(t, err)
			total += st.Size()
		}
		parts = append(parts, recovery.PartitionOptions{FS: vfs.Default, Dir: dir, RecoveryPoint: -1, LogStart: -1,
			IndexConfig: recovery.IndexConfig{IndexInterval: 4096}})
	}
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	states, errs, rep := recovery.LoadAll(parts, recovery.LoadOptions{Threads: 2, Logger: logger, ProgressInterval: time.Millisecond})
	for i := range parts {
		require.NoError(t, errs[i])
		require.NotNil(t, states[i])
	}
	require.Len(t, rep.Partitions, 6)
	require.False(t, rep.Clean)
	require.Equal(t, total, rep.ScannedBytes())
	recs := buf.records(t)
	require.Equal(t, "recovering logs", recs[0]["msg"])
	require.EqualValues(t, 6, recs[0]["partitions"])
	require.EqualValues(t, total, recs[0]["bytes"])
	require.EqualValues(t, 2, recs[0]["threads"])
	last := recs[len(recs)-1]
	require.Equal(t, "recovery done", last["msg"])
	require.EqualValues(t, total, last["scanned_bytes"])
	prevBytes, prevParts := float64(total), 6.0
	ticks := 0
	for _, r := range recs[1 : len(recs)-1] {
		if r["msg"] != "recovering logs" {
			continue
		}
		ticks++
		b, p := r["bytes_left"].(float64), r["partitions_left"].(float64)
		require.LessOrEqual(t, b, prevBytes, "bytes left only go down")
		require.LessOrEqual(t, p, prevParts, "partitions left only go down")
		require.GreaterOrEqual(t, b, 0.0)
		prevBytes, prevParts = b, p
	}
	t.Logf("%d progress lines over %d bytes", ticks, total)
}

// TestLoadAllProgressCountsWorkAhead: the start line's bytes are the work
// ahead, the segments from the one holding the recovery point on, not the
// whole partition; progress counts down to zero over exactly those, and
// the trusted segments below the recovery point are not counted.
func TestLoadAllProgressCountsWorkAhead(t *testing.T) {
	dir := t.TempDir()
	files := benchPartition(t, dir, 8<<20, 2<<20, 16<<10) // 4 segments
	require.GreaterOrEqual(t, len(files), 4)
	last := files[len(files)-1]
	st, err := os.Stat(last)
	require.NoError(t, err)
	base, _, ok := layout.ParseSegmentFileName(filepath.Base(last))
	require.True(t, ok)
	p := recovery.PartitionOptions{FS: vfs.Default, Dir: dir, RecoveryPoint: base + 1, LogStart: -1,
		IndexConfig: recovery.IndexConfig{IndexInterval: 4096}}
	require.Equal(t, st.Size(), recovery.ScanBytes(p))
	forced := p
	forced.Force = true
	var all int64
	for _, f := range files {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		all += fi.Size()
	}
	require.Equal(t, all, recovery.ScanBytes(forced))
	clean := p
	clean.Clean = true
	require.Zero(t, recovery.ScanBytes(clean))

	var buf syncBuffer
	var mu sync.Mutex
	var seen []recovery.Progress
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	_, errs, rep := recovery.LoadAll([]recovery.PartitionOptions{p}, recovery.LoadOptions{Threads: 1, Logger: logger, ProgressInterval: time.Millisecond,
		OnProgress: func(pr recovery.Progress) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, pr)
		}})
	require.NoError(t, errs[0])
	require.NotEmpty(t, seen)
	for _, pr := range seen {
		require.Equal(t, st.Size(), pr.Bytes)
		require.GreaterOrEqual(t, pr.BytesLeft, int64(0))
		require.LessOrEqual(t, pr.BytesLeft, pr.Bytes)
	}
	end := seen[len(seen)-1]
	require.True(t, end.Done)
	counted := end.Bytes - end.BytesLeft
	require.Equal(t, st.Size(), rep.ScannedBytes())
	require.Equal(t, st.Size(), counted, "progress reached the whole work ahead")
	recs := buf.records(t)
	require.Equal(t, "recovering logs", recs[0]["msg"])
	require.EqualValues(t, st.Size(), recs[0]["bytes"], "the start line counts the work ahead")
}
