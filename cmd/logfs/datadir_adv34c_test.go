package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A command that writes but needs something already there (produce needs
// a topic, topic delete a topic, check --repair a data directory) fails on
// a --data that does not exist (a typo) without creating it: a failed
// command leaves no stray data directory behind.
func TestWritersNeedingADataDirCreateNoneAdv34c(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range [][]string{
		{"produce", "--data", "typo1", "orders"},
		{"topic", "delete", "--data", "typo2", "orders"},
		{"check", "--repair", "--data", "typo3"},
	} {
		r := fails(t, dir, exitFailure, "does not exist", tc...)
		require.Empty(t, r.stdout, "%v", tc)
		_, err := os.Stat(filepath.Join(dir, tc[len(tc)-2]))
		if tc[0] == "check" {
			_, err = os.Stat(filepath.Join(dir, tc[len(tc)-1]))
		}
		require.ErrorIs(t, err, os.ErrNotExist, "%v created its --data", tc)
	}
}

// The commands that only read refuse a --data that holds something but
// nothing of a data directory (another program's folder, /etc), as the
// writers do, in one line: before, topic list listed nothing with status
// 0, after a warning for each symbolic link there ("remove it if it is not
// yours"), and consume said only that there was no such topic.
func TestReadersRefuseAnotherProgramsDirectoryAdv34c(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	require.NoError(t, os.MkdirAll(filepath.Join(other, "backup-2024"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine\n"), 0o644))
	require.NoError(t, os.Symlink("/etc", filepath.Join(other, "etc")))
	for _, tc := range [][]string{
		{"topic", "list", "--data", "other"},
		{"topic", "describe", "--data", "other", "backup"},
		{"consume", "--data", "other", "--offset", "earliest", "backup", "2024"},
		{"check", "--data", "other"},
	} {
		r := fails(t, dir, exitFailure, "not a data directory", tc...)
		require.Empty(t, r.stdout, "%v", tc)
	}
	// An empty folder is still an empty data directory to a reader.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	require.Empty(t, ok(t, dir, "", "topic", "list", "--data", "empty"))
}
