package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLostLastLogHandsNoOffsetOut: the last segment's .log of a cleanly
// closed data directory is deleted. Its offsets were durable and may have
// been read: check says so and fails, and changes nothing; the next append
// gets the offset after the last one ever handed out, never one of the
// lost ones, and check then names the hole.
func TestLostLastLogHandsNoOffsetOut(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "unclean"}[unclean], func(t *testing.T) {
			dir := setupConsume(t) // orders-0: offsets 0 to 199 in several segments
			part := filepath.Join(dir, "logfs-data", "orders-0")
			logs, err := filepath.Glob(filepath.Join(part, "*.log"))
			require.NoError(t, err)
			require.Greater(t, len(logs), 1)
			require.NoError(t, os.Remove(logs[len(logs)-1]))
			if unclean {
				require.NoError(t, os.Remove(filepath.Join(dir, "logfs-data", ".kafka_cleanshutdown")))
			}

			before, err := os.ReadDir(part)
			require.NoError(t, err)
			r := logfs(t, dir, "", "check")
			require.Equal(t, 1, r.code, "check fails: %s%s", r.stdout, r.stderr)
			require.Contains(t, r.stdout+r.stderr, "hole")
			require.Contains(t, r.stdout+r.stderr, "a writable open goes on at 200")
			after, err := os.ReadDir(part)
			require.NoError(t, err)
			require.Equal(t, len(before), len(after), "check changes nothing")

			r = logfs(t, dir, "again\n", "produce", "orders")
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stderr, "at offset 200")
			got := ok(t, dir, "", "consume", "--offset", "200", "orders", "0")
			require.Equal(t, "again\n", got)
			r = logfs(t, dir, "", "check")
			require.Equal(t, 1, r.code)
			require.True(t, strings.Contains(r.stdout+r.stderr, "missing"), "check names the hole: %s%s", r.stdout, r.stderr)
		})
	}
}
