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
