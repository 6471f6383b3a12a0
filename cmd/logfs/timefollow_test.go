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
	f := startFollow(t, dir, "--time", fmt.Sprint(T), "t", "0")
	expect := f.expect
	ok(t, dir, "before\n", "produce", "t")
	ok(t, dir, fmt.Sprintf(`{"timestamp":%d,"value":"early"}`+"\n", T-1), "produce", "--format", "jsonl", "t")
	ok(t, dir, fmt.Sprintf(`{"timestamp":%d,"value":"at-T"}`+"\n"+`{"timestamp":%d,"value":"after-it"}`+"\n", T, T-5), "produce", "--format", "jsonl", "t")
	expect("at-T")
	expect("after-it")
	ok(t, dir, "later\n", "produce", "t")
	expect("later")
}

// follower is a `logfs consume --follow` running in the background.
type follower struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer // read it once cmd has exited
	lines  chan string
	t      *testing.T
}

// startFollow starts `logfs consume --follow ARGS…` in dir, killed when
// the test ends.
func startFollow(t *testing.T, dir string, args ...string) *follower {
	t.Helper()
	f := &follower{cmd: exec.Command(logfsBin, append([]string{"consume", "--follow"}, args...)...),
		stderr: &bytes.Buffer{}, lines: make(chan string, 1000), t: t}
	f.cmd.Dir = dir
	stdout, err := f.cmd.StdoutPipe()
	require.NoError(t, err)
	f.cmd.Stderr = f.stderr
	require.NoError(t, f.cmd.Start())
	t.Cleanup(func() { f.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
	}()
	return f
}

// expect waits for the next line and requires it to be want.
func (f *follower) expect(want string) {
	f.t.Helper()
	select {
	case got := <-f.lines:
		require.Equal(f.t, want, got)
	case <-time.After(20 * time.Second):
		f.t.Fatalf("no line %q from consume --follow", want)
	}
}
