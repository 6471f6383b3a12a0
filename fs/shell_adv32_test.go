package fs

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestAdv32ShellRedirections: `echo x > append` (O_TRUNC) and `>>` append
// to both append files; a partial line shared by dup'ed descriptors is
// one record, appended at the last close; write offsets are ignored.
func TestAdv32ShellRedirections(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	part := filepath.Join(mp, "t", "0")
	sh := func(s string) {
		t.Helper()
		out, err := exec.Command("bash", "-c", s).CombinedOutput()
		require.NoError(t, err, "%s: %s", s, out)
	}
	sh(fmt.Sprintf("cd '%s' && echo one > append && echo two >> append && printf 'thr' >> append && echo '{\"value\":\"four\"}' > append.jsonl", part))
	f, err := os.OpenFile(filepath.Join(part, "append"), os.O_WRONLY, 0)
	require.NoError(t, err)
	fd2, err := unix.Dup(int(f.Fd()))
	require.NoError(t, err)
	_, err = unix.Pwrite(fd2, []byte("fi"), 1<<40)
	require.NoError(t, err)
	require.NoError(t, unix.Close(fd2)) // FLUSH: nothing appended yet
	_, err = f.WriteAt([]byte("ve"), 12345)
	require.NoError(t, err)
	require.NoError(t, f.Close()) // RELEASE: "five"
	eventually32(t, "the last line", func() bool { return p.EndOffset() == 5 })
	require.Equal(t, []string{"one", "two", "thr", "four", "five"}, values(t, p))
}

// TestAdv32XattrFallocate: extended attributes and fallocate change
// nothing and fail (the mount has no xattrs), and the bytes stay.
func TestAdv32XattrFallocate(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	adv32Append(t, p, "a")
	part := filepath.Join(mp, "t", "0")
	for _, name := range []string{"offset/0", "info", "append", "offset", "."} {
		err := unix.Setxattr(filepath.Join(part, name), "user.x", []byte("1"), 0)
		require.Error(t, err, name)
		_, err = unix.Getxattr(filepath.Join(part, name), "user.x", make([]byte, 10))
		require.Error(t, err, name)
	}
	f, err := os.OpenFile(filepath.Join(part, "append"), os.O_WRONLY, 0)
	require.NoError(t, err)
	err = unix.Fallocate(int(f.Fd()), 0, 0, 4096)
	require.Error(t, err)
	require.NotEqual(t, syscall.Errno(0), adv32Errno(err))
	require.NoError(t, f.Close())
	r, err := os.Open(filepath.Join(part, "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, syscall.EBADF, adv32Errno(unix.Fallocate(int(r.Fd()), 0, 0, 4096)))
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, "a\n", string(b))
	require.Equal(t, []string{"a"}, values(t, p))
}

// TestAdv32PendingTimeJSONL: a pending time/T.jsonl stays empty while
// records stamped before T arrive and then renders from the first one
// stamped T or later, with its offset.
func TestAdv32PendingTimeJSONL(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	adv32Append(t, p, "now")
	part := filepath.Join(mp, "t", "0")
	f, err := os.Open(filepath.Join(part, "time", "2100-01-01T00:00:00Z.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, os.WriteFile(filepath.Join(part, "append"), []byte("still before\n"), 0))
	st, err := f.Stat()
	require.NoError(t, err)
	require.Zero(t, st.Size())
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Empty(t, b)
	require.NoError(t, os.WriteFile(filepath.Join(part, "append.jsonl"),
		[]byte(`{"value":"late","timestamp":"2100-01-01"}`+"\n"+`{"value":"early","timestamp":1000}`+"\n"), 0))
	b, err = io.ReadAll(f)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 2, string(b))
	require.True(t, strings.HasPrefix(lines[0], `{"offset":2,"timestamp":4102444800000,`), lines[0])
	require.True(t, strings.HasPrefix(lines[1], `{"offset":3,"timestamp":1000,`), lines[1])
	st, err = f.Stat()
	require.NoError(t, err)
	require.EqualValues(t, len(b), st.Size())
}
