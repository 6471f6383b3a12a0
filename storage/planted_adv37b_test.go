package storage

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
)

// TestFileAtPartitionFolderNameIsNamed: a regular file stands where a
// partition's folder belongs ("t-1" made a file). The partition is taken
// for missing, as Kafka does, but not silently: a link or a FIFO there is
// named as left alone, and so is the file, at a writable and a read-only
// open alike, and the file is never removed (adv37).
func TestFileAtPartitionFolderNameIsNamed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	_, err = l.CreateTopic("t", 2, nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())

	part := filepath.Join(dir, layout.PartitionDirName("t", 1))
	require.NoError(t, os.RemoveAll(part))
	require.NoError(t, os.WriteFile(part, []byte("someone's bytes"), 0o600))

	for _, ro := range []bool{false, true} {
		var logs syncBuffer
		l, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), RetentionCheckInterval: -1, ReadOnly: ro})
		require.NoError(t, err, "read-only %v", ro)
		_, err = l.Partition("t", 1)
		require.Error(t, err, "read-only %v: the partition is missing", ro)
		require.NoError(t, l.Close())
		require.Equal(t, 1, strings.Count(logs.String(), "path="+part), "read-only %v: named once: %s", ro, logs.String())
		b, err := os.ReadFile(part)
		require.NoError(t, err)
		require.Equal(t, "someone's bytes", string(b), "read-only %v: the file is left alone", ro)
	}
}

// TestRetentionMeetsPlantedFolders: folders planted, while the log is
// open, at the index and view-index names of segments that retention then
// deletes, one holding someone's file. Retention goes on deleting later
// segments round after round, never fails for them, and what the folder
// holds is never removed (adv37).
func TestRetentionMeetsPlantedFolders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var logs syncBuffer
	l, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	top, err := l.CreateTopic("t", 1, Overrides{"segment.bytes": 200, "retention.bytes": 1, "file.delete.delay.ms": 0})
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 12; i++ {
		_, err := p.Append(values(1, strings.Repeat("v", 100)))
		require.NoError(t, err)
	}
	part := filepath.Join(dir, layout.PartitionDirName("t", 0))
	es, err := os.ReadDir(part)
	require.NoError(t, err)
	var logsBefore []string
	for _, e := range es {
		if strings.HasSuffix(e.Name(), layout.LogSuffix) {
			logsBefore = append(logsBefore, e.Name())
		}
	}
	require.Greater(t, len(logsBefore), 3, "segments rolled")
	// Plant folders at the first two segments' view index and time index.
	var planted []string
	for _, name := range logsBefore[:2] {
		stem := strings.TrimSuffix(name, layout.LogSuffix)
		for _, suffix := range []string{layout.ViewIndexSuffix, layout.TimeIndexSuffix} {
			f := filepath.Join(part, stem+suffix)
			require.NoError(t, os.RemoveAll(f))
			require.NoError(t, os.MkdirAll(f, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(f, "someone's"), []byte("bytes"), 0o600))
			planted = append(planted, f)
		}
	}
	for round := 0; round < 3; round++ {
		_, err := l.EnforceRetention()
		require.NoError(t, err, "round %d", round)
		_, err = p.Append(values(1, strings.Repeat("v", 100)))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	found := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "someone's" {
			found++
		}
		return err
	}))
	require.Equal(t, len(planted), found, "what the planted folders hold is kept:\n%s", logs.String())
	// Renamed *.deleted with their segments, the folders cannot be
	// removed: one warning for each segment, not one each round.
	require.Equal(t, 2, strings.Count(logs.String(), "remove deleted segment"), "%s", logs.String())
}

// TestRollMeetsPlantedFolders: folders stand, while the log is open, at
// the names of the files of the segment the next roll makes. The roll
// moves them aside, keeping what they hold, and appends go on (adv37).
func TestRollMeetsPlantedFolders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var logs syncBuffer
	l, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	top, err := l.CreateTopic("t", 1, Overrides{"segment.bytes": 200})
	require.NoError(t, err)
	p, _ := top.Partition(0)
	_, err = p.Append(values(1, strings.Repeat("v", 100)))
	require.NoError(t, err)
	part := filepath.Join(dir, layout.PartitionDirName("t", 0))
	for _, suffix := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix, layout.ViewIndexSuffix} {
		f := filepath.Join(part, layout.SegmentFileName(1, suffix))
		require.NoError(t, os.MkdirAll(f, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(f, "someone's"), []byte("bytes"), 0o600))
	}
	for i := 0; i < 3; i++ {
		_, err = p.Append(values(1, strings.Repeat("v", 100)))
		require.NoError(t, err, "append %d: %s", i, logs.String())
	}
	require.NoError(t, l.Sync())
	require.NoError(t, l.Close())
	found := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "someone's" {
			found++
		}
		return err
	}))
	require.Equal(t, 4, found, "%s", logs.String())
	l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(4), int64(p.EndOffset()))
}
