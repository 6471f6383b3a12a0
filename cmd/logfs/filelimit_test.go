package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCreateOutOfFiles creates a topic of more partitions than the
// process may hold files for. The error must say that the topic was not
// created and why (the file limit, and what logfs holds files for), not
// only name a file deep inside it, on one line, with no warnings of its
// cleanup before it; and nothing of the topic may be left: a smaller
// create of the same name then works. A partition takes three files, so
// six limits in a row run out at each step of creating one, twice.
func TestCreateOutOfFiles(t *testing.T) {
	dir := t.TempDir()
	for limit := 200; limit < 206; limit++ {
		// sh's ulimit sets the hard limit too, so the runtime cannot raise it.
		cmd := exec.Command("sh", "-c", `ulimit -n "$0" && exec "$@"`, fmt.Sprint(limit), logfsBin,
			"topic", "create", "--partitions", "150", "big")
		cmd.Dir = dir
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		code := exitCode(t, cmd.Run())
		require.Equal(t, exitFailure, code, "limit %d: stderr: %s", limit, errOut.String())
		msg := errOut.String()
		require.Equal(t, 1, strings.Count(msg, "\n"), "limit %d: one line: %q", limit, msg)
		require.Contains(t, msg, `topic "big" not created:`)
		require.Contains(t, msg, "too many open files")
		require.Contains(t, msg, fmt.Sprintf("may have %d files open, `ulimit -n`", limit))

		entries, err := os.ReadDir(filepath.Join(dir, "logfs-data"))
		require.NoError(t, err)
		for _, e := range entries {
			require.False(t, strings.HasPrefix(e.Name(), "big"), "limit %d: left behind: %s", limit, e.Name())
		}
	}
	require.NotContains(t, ok(t, dir, "", "topic", "list"), "big")
	ok(t, dir, "", "topic", "create", "--partitions", "3", "big")
	require.Equal(t, "hi\n", func() string {
		ok(t, dir, "hi\n", "produce", "big", "2")
		return ok(t, dir, "", "consume", "--offset", "0", "big", "2")
	}())
}
