package main

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A named pipe among dump's files (logfs dump * in a folder that holds
// one) would block dump forever in open(2), waiting for a writer that never
// comes: it is refused, in one line, before anything is printed.
func TestDumpRefusesNamedPipeAdv34c(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"00000000000000000000.log", "pipe"} {
		require.NoError(t, syscall.Mkfifo(filepath.Join(dir, name), 0o600))
		r := fails(t, dir, exitFailure, "not a regular file", "dump", name)
		require.Empty(t, r.stdout)
	}
}
