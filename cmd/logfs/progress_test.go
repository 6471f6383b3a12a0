package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
)

// runOnTerminal runs the command in dir with stderr on a pseudo-terminal
// and stdin from the file in (or empty), and returns stdout, what the
// terminal showed, and the exit status.
func runOnTerminal(t *testing.T, dir, in string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	cmd := exec.Command(logfsBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if in != "" {
		f, err := os.Open(in)
		require.NoError(t, err)
		defer f.Close()
		cmd.Stdin = f
	}
	require.NoError(t, cmd.Start())
	tty.Close()
	var shown bytes.Buffer
	copied := make(chan struct{})
	go func() {
		io.Copy(&shown, ptmx) // ends with EIO once the command is gone
		close(copied)
	}()
	err = cmd.Wait()
	<-copied
	return stdout.String(), shown.String(), exitCode(t, err)
}

// dirtyDataDir makes a data directory of one topic with a few MiB of
// records and takes away its clean-shutdown marker, so that the next open
// recovers it. It returns the size of the log.
func dirtyDataDir(t *testing.T, dir string) int64 {
	t.Helper()
	ok(t, dir, "", "topic", "create", "--partitions", "2", "t")
	in := filepath.Join(dir, "input")
	line := strings.Repeat("x", 99) + "\n"
	require.NoError(t, os.WriteFile(in, []byte(strings.Repeat(line, 40000)), 0o644)) // 4 MB
	f, err := os.Open(in)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command(logfsBin, "produce", "t", "1")
	cmd.Dir, cmd.Stdin = dir, f
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.Remove(filepath.Join(dir, "logfs-data", ".kafka_cleanshutdown")))
	st, err := os.Stat(filepath.Join(dir, "logfs-data", "t-1", "00000000000000000000.log"))
	require.NoError(t, err)
	return st.Size()
}

var noDelay = []string{"LOGFS_PROGRESS_DELAY=0"}

// TestProgressRecoveryOnTerminal: recovery after a crash shows a bar on a
// terminal with what is left, and clears it before the command's own line.
func TestProgressRecoveryOnTerminal(t *testing.T) {
	dir := t.TempDir()
	dirtyDataDir(t, dir)
	stdout, shown, code := runOnTerminal(t, dir, "", noDelay, "check", "--repair")
	require.Equal(t, 0, code, "stdout: %s; terminal: %q", stdout, shown)
	require.Contains(t, shown, "recovering: 2 of 2 partitions left")
	require.Regexp(t, `\( *0 B/4\.\d MiB\)`, shown, "bytes done of the total: the one dirty log")
	require.Contains(t, shown, "checking")
	require.Regexp(t, `\r +\r$`, shown, "the bar is cleared at the end")
	require.Contains(t, stdout, ": OK")
}

// TestProgressRecoveryInLog: off a terminal, recovery's progress goes to
// the log as lines, the first of which counts the work ahead.
func TestProgressRecoveryInLog(t *testing.T) {
	dir := t.TempDir()
	size := dirtyDataDir(t, dir)
	cmd := exec.Command(logfsBin, "consume", "--offset", "39999", "t", "1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LOGFS_PROGRESS_INTERVAL=1ms")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	require.Equal(t, strings.Repeat("x", 99)+"\n", stdout.String())
	lines := regexp.MustCompile(`msg="recovering: [^"]* of ([0-9.]+ [KM]iB|[0-9]+ B) \((\d+)%\)[^"]*partitions left`).FindAllStringSubmatch(stderr.String(), -1)
	require.NotEmpty(t, lines, "progress lines in the log: %s", stderr.String())
	require.Equal(t, sizeString(size), lines[0][1], "the total is the work ahead: the one dirty log")
}

// TestProgressProduceOnTerminal: produce of a large file shows its
// progress against the file's size, and ends with a one-line summary.
func TestProgressProduceOnTerminal(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "t")
	in := filepath.Join(dir, "input")
	require.NoError(t, os.WriteFile(in, []byte(strings.Repeat("0123456789\n", 300000)), 0o644)) // 3.1 MiB
	_, shown, code := runOnTerminal(t, dir, in, noDelay, "produce", "t")
	require.Equal(t, 0, code, shown)
	require.Contains(t, shown, "producing")
	require.Contains(t, shown, "3.1 MiB", "the input's size is the total")
	require.Contains(t, shown, "records")
	require.Contains(t, shown, "logfs produce: appended 300000 records (3.1 MiB of input) to t-0 at offsets 0 to 299999")
}

// TestProduceSummary: off a terminal produce shows no bar, only its
// summary line on stderr.
func TestProduceSummary(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "t")
	r := logfs(t, dir, "a\nb\nc", "produce", "t")
	require.Equal(t, 0, r.code)
	require.Equal(t, "logfs produce: appended 3 records (6 B of input) to t-0 at offsets 0 to 2\n", r.stderr)
	r = logfs(t, dir, "d\n", "produce", "t")
	require.Equal(t, "logfs produce: appended 1 record (2 B of input) to t-0 at offset 3\n", r.stderr)
	r = logfs(t, dir, "", "produce", "t")
	require.Equal(t, "logfs produce: appended no records to t-0 (no input); its log ends at offset 4\n", r.stderr)
}

// TestProgressQuickWorkShowsNothing: with the usual delay, quick work on a
// terminal draws no bar.
func TestProgressQuickWorkShowsNothing(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "t")
	_, shown, code := runOnTerminal(t, dir, "", nil, "check")
	require.Equal(t, 0, code)
	require.Empty(t, shown)
}

func TestSizeString(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 3 << 30: "3.0 GiB"} {
		require.Equal(t, want, sizeString(n))
	}
}
