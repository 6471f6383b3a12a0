package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/storage"
)

// EnvFUSEDebug, set to 0, keeps go-fuse's request log off under -v.
const EnvFUSEDebug = "LOGFS_FUSE_DEBUG"

// testLog sends a logger's output to t.Log until the test's cleanup
// silences it: the mount's goroutines may log after the test returns.
type testLog struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLog) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// logger returns a logger for t: Info and up, Debug under -v.
func logger(t testing.TB) *slog.Logger {
	w := &testLog{t: t}
	t.Cleanup(w.close)
	level := slog.LevelInfo
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// newLog opens a log in a new temporary data directory, closed (and
// checked) when the test ends, after the mount is gone.
func newLog(t testing.TB, defaults storage.Overrides) (*storage.Log, string) {
	t.Helper()
	dir := t.TempDir()
	return openLog(t, dir, storage.Options{Defaults: defaults}), dir
}

// openLog opens the log in dir, closed (and checked, if writable) when the
// test ends.
func openLog(t testing.TB, dir string, o storage.Options) *storage.Log {
	t.Helper()
	if o.Logger == nil {
		o.Logger = logger(t)
	}
	if o.RetentionCheckInterval == 0 {
		o.RetentionCheckInterval = -1
	}
	l, err := storage.Open(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		if !o.ReadOnly {
			require.NoError(t, l.Check())
		}
		require.NoError(t, l.Close())
	})
	return l
}

// mount is the one way tests mount: l on a new temporary directory,
// request logging only under -v, unmounted when the test ends (before the
// log closes). It returns the mount point.
func mount(t testing.TB, l *storage.Log, o fs.Options) string {
	t.Helper()
	_, mp := mountServer(t, l, o)
	return mp
}

// mountServer is mount, also returning the server.
func mountServer(t testing.TB, l *storage.Log, o fs.Options) (*fs.Server, string) {
	t.Helper()
	fusetest.Require(t)
	mp := t.TempDir()
	if o.Logger == nil {
		o.Logger = logger(t)
	}
	_, isBench := t.(*testing.B)
	o.Debug = o.Debug || testing.Verbose() && !isBench && os.Getenv(EnvFUSEDebug) != "0"
	srv, err := fs.Mount(mp, l, o)
	if errors.Is(err, fs.ErrNoFUSE) {
		fusetest.Unusable(t, err.Error())
	}
	require.NoError(t, err)
	t.Cleanup(func() { unmount(t, srv) })
	return srv, mp
}

// unmount unmounts, retrying while processes still let go of their files,
// and detaches lazily as a last resort so that no test leaves a mount
// behind.
func unmount(t testing.TB, srv *fs.Server) { unmountAt(t, srv, srv.Mountpoint()) }

// unmountAt is unmount for any server mounted at mp (the floor's as well).
func unmountAt(t testing.TB, srv interface{ Unmount() error }, mp string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := srv.Unmount()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("unmount: %v; detaching lazily", err)
			if err := fusetest.Unmount(mp, true); err != nil {
				t.Errorf("lazy unmount: %v", err)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run runs a bash script (outside the mount) and returns its stdout, its
// stderr and its error. The script gets a minute unless ctx is shorter.
func run(ctx context.Context, script string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; "+script)
	cmd.Dir = os.TempDir()
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// sh runs a bash script and returns its stdout; a failure fails the test.
func sh(t testing.TB, format string, args ...any) string {
	t.Helper()
	script := fmt.Sprintf(format, args...)
	out, errOut, err := run(context.Background(), script)
	require.NoError(t, err, "%s\nstderr: %s", script, errOut)
	return out
}

// shFails runs a bash script that must fail and returns its stderr.
func shFails(t testing.TB, format string, args ...any) string {
	t.Helper()
	script := fmt.Sprintf(format, args...)
	_, errOut, err := run(context.Background(), script)
	require.Error(t, err, "%s should fail", script)
	return errOut
}

// q quotes a path for bash.
func q(path string) string { return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'" }

// part returns the path of partition id of topic in the mount.
func part(mnt, topic string, id int) string {
	return filepath.Join(mnt, topic, fmt.Sprint(id))
}

// eventually polls cond until it holds or the (generous) deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
