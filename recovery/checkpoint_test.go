package recovery

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, layout.RecoveryPointFile)
	m := map[TopicPartition]record.Offset{{"orders", 1}: 99, {"orders", 0}: 1234, {"a.b_c-d", 7}: 0}
	require.NoError(t, WriteCheckpoint(vfs.Default, p, m))
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "0\n3\na.b_c-d 7 0\norders 0 1234\norders 1 99\n", string(data), "Kafka's format, sorted")
	require.NoFileExists(t, p+".tmp")
	got, err := ReadCheckpoint(vfs.Default, p)
	require.NoError(t, err)
	require.Equal(t, m, got)

	got, err = ReadCheckpoint(vfs.Default, filepath.Join(dir, "missing"))
	require.NoError(t, err, "a missing checkpoint is empty")
	require.Empty(t, got)
}

// TestCheckpointMalformed: every way a checkpoint can break Kafka's format
// is ErrBadCheckpoint, as Kafka's IOException; the callers then recover
// every partition from its first segment.
func TestCheckpointMalformed(t *testing.T) {
	for name, body := range map[string]string{
		"empty":              "",
		"wrong version":      "1\n0\n",
		"no count":           "0\n",
		"bad count":          "0\nx\n",
		"negative count":     "0\n-1\n",
		"fewer entries":      "0\n2\nt 0 5\n",
		"more entries":       "0\n1\nt 0 5\nt 1 6\n",
		"two fields":         "0\n1\nt 5\n",
		"four fields":        "0\n1\nt 0 5 6\n",
		"bad partition":      "0\n1\nt x 5\n",
		"negative partition": "0\n1\nt -1 5\n",
		"bad offset":         "0\n1\nt 0 five\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "ckpt")
			require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
			_, err := ReadCheckpoint(vfs.Default, p)
			require.ErrorIs(t, err, ErrBadCheckpoint)
		})
	}
	// Whitespace as Kafka's reader splits it.
	p := filepath.Join(t.TempDir(), "ckpt")
	require.NoError(t, os.WriteFile(p, []byte("0\n1\nt  0\t5\n\n"), 0o644))
	got, err := ReadCheckpoint(vfs.Default, p)
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]record.Offset{{"t", 0}: 5}, got)
}

// TestCleanShutdownMarker: the marker is taken (deleted) when read by a
// writable open, so a crash while loading cannot leave it behind
// (KAFKA-10471); a read-only look leaves it.
func TestCleanShutdownMarker(t *testing.T) {
	dir := t.TempDir()
	clean, err := TakeCleanShutdownMarker(vfs.Default, dir)
	require.NoError(t, err)
	require.False(t, clean)
	require.NoError(t, WriteCleanShutdownMarker(vfs.Default, dir))
	require.True(t, HasCleanShutdownMarker(vfs.Default, dir))
	require.True(t, HasCleanShutdownMarker(vfs.Default, dir), "looking does not take it")
	clean, err = TakeCleanShutdownMarker(vfs.Default, dir)
	require.NoError(t, err)
	require.True(t, clean)
	require.False(t, HasCleanShutdownMarker(vfs.Default, dir), "taken")
	clean, err = TakeCleanShutdownMarker(vfs.Default, dir)
	require.NoError(t, err)
	require.False(t, clean)
}
