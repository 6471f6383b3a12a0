package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// logfsBin is the command under test, built once by TestMain.
var logfsBin string

func TestMain(m *testing.M) {
	// Off a terminal, long work (a produce, a check, a recovery) logs a
	// progress line every LOGFS_PROGRESS_INTERVAL, 5 s by default: how
	// many lines a command under test prints would depend on the
	// machine's speed (a loaded one took 12 s for a produce whose one
	// error line a test counts). None show unless a test asks for them,
	// setting the variable itself (t.Setenv, or in the command's Env).
	os.Setenv("LOGFS_PROGRESS_INTERVAL", "1h")
	dir, err := os.MkdirTemp("", "logfs-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logfsBin = filepath.Join(dir, "logfs")
	build := exec.Command(goTool(), "build", "-o", logfsBin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goTool finds the go command that runs the tests.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// result is what a run of the command gave.
type result struct {
	stdout, stderr string
	code           int
}

// logfs runs the command in dir with stdin and returns its output and exit
// status.
func logfs(t testing.TB, dir, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(logfsBin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := exitCode(t, cmd.Run())
	return result{out.String(), errOut.String(), code}
}

// exitCode is the exit status of a command that ran, failing t if it did
// not run at all.
func exitCode(t testing.TB, err error) int {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// sharedBin copies the command under test into a new temporary folder that
// every user may enter, for tests that run it as another user. It returns
// the folder (removed when the test ends) and the binary.
func sharedBin(t *testing.T, prefix string) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin = filepath.Join(dir, "logfs")
	copyFile(t, logfsBin, bin, 0o755)
	require.NoError(t, os.Chmod(bin, 0o755)) // whatever the umask took away
	return dir, bin
}

// ok runs the command and requires it to succeed.
func ok(t testing.TB, dir, stdin string, args ...string) string {
	t.Helper()
	r := logfs(t, dir, stdin, args...)
	require.Equal(t, 0, r.code, "logfs %s: stderr: %s", strings.Join(args, " "), r.stderr)
	return r.stdout
}

// fails runs the command, requires the exit status code and a one-line
// error on stderr naming the command and containing want.
func fails(t testing.TB, dir string, code int, want string, args ...string) result {
	t.Helper()
	r := logfs(t, dir, "", args...)
	requireOneLineError(t, r, code, want, args...)
	return r
}

func requireOneLineError(t testing.TB, r result, code int, want string, args ...string) {
	t.Helper()
	require.Equal(t, code, r.code, "logfs %s: exit status; stderr: %s", strings.Join(args, " "), r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	require.Len(t, lines, 1, "logfs %s: want one line on stderr, got %q", strings.Join(args, " "), r.stderr)
	require.True(t, strings.HasPrefix(lines[0], "logfs"), "error line %q should name the command", lines[0])
	require.Contains(t, lines[0], want, "logfs %s", strings.Join(args, " "))
	require.NotContains(t, lines[0], "goroutine", "no stack traces")
}

func TestNoArguments(t *testing.T) {
	r := logfs(t, t.TempDir(), "")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "Usage:")
	require.Empty(t, r.stdout)
}

func TestBadCommandLine(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown command": {[]string{"frobnicate"}, `unknown command "frobnicate"`},
		"unknown flag":    {[]string{"--frobnicate"}, "unknown flag: --frobnicate"},
	} {
		t.Run(name, func(t *testing.T) {
			fails(t, dir, exitUsage, tc.want, tc.args...)
		})
	}
}

// TestHelp checks that every subcommand documents itself with an example.
func TestHelp(t *testing.T) {
	dir := t.TempDir()
	root := newRootCommand()
	paths := [][]string{{}}
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			continue
		}
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	require.GreaterOrEqual(t, len(paths), 9, "root, topic and its 4 actions, produce, consume, dump, check")
	for _, p := range paths {
		t.Run(strings.Join(append([]string{"logfs"}, p...), " "), func(t *testing.T) {
			out := ok(t, dir, "", append(p, "--help")...)
			require.Contains(t, out, "Usage:")
			require.Contains(t, out, "Examples:")
		})
	}
}

func TestOneLine(t *testing.T) {
	err := fmt.Errorf("open x: %w", fmt.Errorf("logfs/storage: no such topic\nlogfs/record: corrupt batch"))
	require.Equal(t, "open x: no such topic; corrupt batch", oneLine(err))
}

// TestFlagValueErrorsInWords: a number flag given something else says what
// it wants, not strconv's "strconv.ParseInt: parsing "abc": invalid syntax".
func TestFlagValueErrorsInWords(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "create", "--partitions", "abc", "t"}, `invalid argument "abc" for "-p, --partitions" flag: want a whole number (see logfs topic create --help)`},
		{[]string{"dump", "--max-bytes", "1x", "a.log"}, `invalid argument "1x" for "--max-bytes" flag: want a whole number`},
		{[]string{"dump", "--max-bytes", "99999999999999999999", "a.log"}, `for "--max-bytes" flag: out of range`},
		{[]string{"mount", "--read-only=maybe", "mnt"}, `invalid argument "maybe" for "--read-only" flag: want true or false`},
	} {
		r := fails(t, dir, exitUsage, tc.want, tc.args...)
		require.NotContains(t, r.stderr, "strconv")
	}
}
