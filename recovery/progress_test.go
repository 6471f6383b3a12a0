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
