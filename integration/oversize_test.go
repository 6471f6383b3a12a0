package integration

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// oversized is a line over the default max.message.bytes (1048588) that a
// page-aligned write(2) after a 500,001-byte line splits over two FUSE
// requests: the first holds its start, short enough to wait as a partial
// line, the second its end.
var oversized = strings.Repeat("y", 1_048_600)

// partitionValues returns every value of p, in order. A read error fails
// the test, and so does a null value: a line is an empty value, never a
// null one.
func partitionValues(t *testing.T, p *storage.Partition) []string {
	t.Helper()
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	defer r.Close()
	out := []string{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		require.NotNil(t, rec.Value, "offset %d: a line is never a null value", rec.Offset)
		out = append(out, string(rec.Value))
	}
}

// requireNoFragment requires that no value of p holds a byte of the
// oversized line.
func requireNoFragment(t *testing.T, vals []string, what string) {
	t.Helper()
	for i, v := range vals {
		require.False(t, strings.Contains(v, "y"), "%s: record %d (%d bytes) is a fragment of the oversized line", what, i, len(v))
	}
}

// TestOversizedLineGoWriter: a Go writer (os.File.Write, which writes the
// rest again after a short count) sees EFBIG and no byte of the line is
// appended, whether the kernel splits the line over requests or not; the
// lines the writer sends next are appended or refused with an error,
// never dropped in silence.
func TestOversizedLineGoWriter(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "o", nil)
	mnt := mount(t, l, fs.Options{})
	app := filepath.Join(part(mnt, "o", 0), "append")
	buf := make([]byte, 0, 4<<20) // page-aligned: a large Go allocation is

	f, err := os.OpenFile(app, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	data := append(buf, strings.Repeat("x", 500_000)+"\n"+oversized+"\nz\n"...)
	n, err := f.Write(data)
	require.ErrorIs(t, err, syscall.EFBIG, "the writer is told (wrote %d)", n)
	_, err = f.Write([]byte("next\n"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	vals := partitionValues(t, p)
	requireNoFragment(t, vals, "split line")
	require.Equal(t, []string{strings.Repeat("x", 500_000), "next"}, vals)

	// A line over max.message.bytes from the start of a write, then the
	// next line in a write of its own: told, never dropped in silence.
	f, err = os.OpenFile(app, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(append(buf[:0], oversized+oversized+"\n"...))
	require.ErrorIs(t, err, syscall.EFBIG)
	_, err = f.Write([]byte("after\n"))
	if err == nil {
		defer func() { require.Contains(t, partitionValues(t, p), "after") }()
	} else {
		require.ErrorIs(t, err, syscall.EFBIG)
	}
	_, err = f.Write([]byte("last\n"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	vals = partitionValues(t, p)
	requireNoFragment(t, vals, "long line")
	require.Equal(t, "last", vals[len(vals)-1])
}

// TestOversizedLinePythonWriter: Python's file.write, which writes again
// what a short count left, and again on close what an error left, sees
// EFBIG and appends no byte of the line.
func TestOversizedLinePythonWriter(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "o", nil)
	mnt := mount(t, l, fs.Options{})
	app := filepath.Join(part(mnt, "o", 0), "append")
	script := `
import sys
f = open(sys.argv[1], "a")
try:
    f.write("x" * 500000 + "\n" + "y" * 1048600 + "\nz\n")
    f.flush()
    print("no error")
except OSError as e:
    print("error", e.errno)
try:
    f.close()
except OSError as e:
    print("close error", e.errno)
g = open(sys.argv[1], "a")
g.write("next\n")
g.close()
`
	out, err := exec.Command(py, "-c", script, app).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "error 27", "EFBIG reaches the writer")
	vals := partitionValues(t, p)
	requireNoFragment(t, vals, "python")
	require.Equal(t, "next", vals[len(vals)-1])
	t.Logf("python: %q, values %d", out, len(vals))
}

// TestOversizedLineShell: shell redirection of a line over
// max.message.bytes fails with "File too large" and appends nothing of it.
func TestOversizedLineShell(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "o", nil)
	mnt := mount(t, l, fs.Options{})
	app := q(filepath.Join(part(mnt, "o", 0), "append"))
	errOut := shFails(t, "{ head -c 500000 /dev/zero | tr '\\0' x; echo; head -c 1048600 /dev/zero | tr '\\0' y; printf '\\nz\\n'; } >> %s", app)
	require.Contains(t, errOut, "File too large")
	sh(t, "echo next >> %s", app)
	vals := partitionValues(t, p)
	requireNoFragment(t, vals, "shell")
	require.Equal(t, "next", vals[len(vals)-1])
}
