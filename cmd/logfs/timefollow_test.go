package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConsumeFollowFutureTime: consume --follow --time T, started before
// any record is stamped T or later, prints what the mount's time/T shows:
// nothing of what comes before the first record stamped T or later, and
// everything from it on.
func TestConsumeFollowFutureTime(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "t")
	ok(t, dir, "old\n", "produce", "t")
	const T = 2_000_000_000_000
	cmd := exec.Command(logfsBin, "consume", "--follow", "--time", fmt.Sprint(T), "t", "0")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	ok(t, dir, "before\n", "produce", "t")
	ok(t, dir, fmt.Sprintf(`{"timestamp":%d,"value":"early"}`+"\n", T-1), "produce", "--format", "jsonl", "t")
	ok(t, dir, fmt.Sprintf(`{"timestamp":%d,"value":"at-T"}`+"\n"+`{"timestamp":%d,"value":"after-it"}`+"\n", T, T-5), "produce", "--format", "jsonl", "t")
	for _, want := range []string{"at-T", "after-it"} {
		select {
		case got := <-lines:
			require.Equal(t, want, got, "stderr: %s", stderr.String())
		case <-time.After(20 * time.Second):
			t.Fatalf("no line %q; stderr: %s", want, stderr.String())
		}
	}
	ok(t, dir, "later\n", "produce", "t")
	select {
	case got := <-lines:
		require.Equal(t, "later", got)
	case <-time.After(20 * time.Second):
		t.Fatalf("no line later; stderr: %s", stderr.String())
	}
}
