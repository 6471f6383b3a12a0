package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
)

// TestTopicDeleteKill9 kills `logfs topic delete` with SIGKILL while it
// removes the partitions of a large topic: the topic is gone for every
// reader at once (none sees some of its partitions), and the next
// writable open removes what the kill left. Recreating it works.
func TestTopicDeleteKill9(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	ok(t, dir, "", "topic", "create", "--data", data, "keep")
	ok(t, dir, "", "topic", "create", "--data", data, "--partitions", "300", "-c", "retention.ms=-1", "big")
	partitions := func() (live, doomed int) {
		entries, err := os.ReadDir(data)
		require.NoError(t, err)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "big-") && !strings.HasSuffix(e.Name(), "-delete") {
				live++
			} else if layout.IsDeletedPartitionDir(e.Name()) {
				doomed++
			}
		}
		return live, doomed
	}
	var live, doomed int
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 5, "never caught the delete halfway")
		cmd := exec.Command(logfsBin, "topic", "delete", "--data", data, "big")
		require.NoError(t, cmd.Start())
		// Kill it once its first partition folder has been renamed away.
		for live, _ = partitions(); live == 300; live, _ = partitions() {
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		err := cmd.Wait()
		live, doomed = partitions()
		if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() && live+doomed > 0 {
			break // killed halfway
		}
		if live+doomed == 0 {
			// It finished before the kill: make the topic again.
			ok(t, dir, "", "topic", "create", "--data", data, "--partitions", "300", "big")
		}
	}
	t.Logf("killed with %d partition folders left and %d renamed for deletion", live, doomed)

	// Readers (which change nothing) see no topic big at all.
	require.Equal(t, "keep\n", ok(t, dir, "", "topic", "list", "--data", data))
	fails(t, dir, exitFailure, `no topic "big"`, "topic", "describe", "--data", data, "big")
	// The next writable open removes the rest.
	ok(t, dir, "", "topic", "create", "--data", data, "other")
	live, doomed = partitions()
	require.Zero(t, live+doomed)
	require.NoFileExists(t, filepath.Join(data, "big"+layout.TopicConfigSuffix))
	require.Equal(t, "keep\nother\n", ok(t, dir, "", "topic", "list", "--data", data))
	ok(t, dir, "", "topic", "create", "--data", data, "--partitions", "2", "big")
	require.Contains(t, ok(t, dir, "", "topic", "describe", "--data", data, "big"), "topic big: 2 partitions")
	require.Contains(t, ok(t, dir, "", "check", "--data", data), ": OK")
}

// TestLongTopicNameEndToEnd: a topic name of 249 characters, Kafka's
// longest, works from the command line and through the mount: create,
// produce, read, mkdir of a partition, delete. A name that collides with
// an existing one once '.' and '_' are alike is refused, with the reason.
func TestLongTopicNameEndToEnd(t *testing.T) {
	dir := t.TempDir()
	name := strings.Repeat("L", 247) + "_x"
	ok(t, dir, "", "topic", "create", "--partitions", "2", "-c", "retention.ms=-1", name)
	ok(t, dir, "a\n", "produce", name, "1")
	require.Equal(t, "a\n", ok(t, dir, "", "consume", "--offset", "0", name, "1"))
	fails(t, dir, exitFailure, `collides with the existing topic "`+name+`"`, "topic", "create", strings.Repeat("L", 247)+".x")

	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp)
	appendLine(t, filepath.Join(mp, name, "0", "append"), "b\n")
	b, err := os.ReadFile(filepath.Join(mp, name, "1", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, "a\n", string(b))
	require.NoError(t, os.Mkdir(filepath.Join(mp, name, "2"), 0o755))
	other := strings.Repeat("M", 249)
	require.NoError(t, os.Mkdir(filepath.Join(mp, other), 0o755))
	appendLine(t, filepath.Join(mp, other, "0", "append"), "c\n")
	require.ErrorIs(t, os.Mkdir(filepath.Join(mp, strings.Repeat("M", 248)+"x", "0"), 0o755), syscall.ENOENT)
	require.ErrorIs(t, os.Mkdir(filepath.Join(mp, strings.Repeat("L", 247)+".x"), 0o755), syscall.EEXIST, "collides")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, m.wait(t), m.stderr())

	require.Equal(t, "b\n", ok(t, dir, "", "consume", "--offset", "0", name, "0"))
	require.Contains(t, ok(t, dir, "", "topic", "describe", name), "3 partitions")
	ok(t, dir, "", "topic", "delete", name)
	ok(t, dir, "", "topic", "delete", other)
	require.Equal(t, "", ok(t, dir, "", "topic", "list"))
	entries, err := os.ReadDir(filepath.Join(dir, "logfs-data"))
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), "LLL") || strings.HasPrefix(e.Name(), "MMM"), "left behind: %s", e.Name())
	}
}
