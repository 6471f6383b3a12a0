package fs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/storage"
)

// TestAdv32CopyRecordFileToAppend: `cat offset/0 >> OTHER/append` within
// the mount (copy_file_range or splice between two files of one FUSE
// mount) appends each line once.
func TestAdv32CopyRecordFileToAppend(t *testing.T) {
	mp, p, l, _ := adv32Mount(t, nil, Options{})
	var want bytes.Buffer
	var vs []string
	for i := 0; i < 20000; i++ {
		v := fmt.Sprintf("line %05d %s", i, strings.Repeat("q", i%61))
		vs = append(vs, v)
		want.WriteString(v + "\n")
	}
	adv32Append(t, p, vs...)
	require.NoError(t, os.Mkdir(filepath.Join(mp, "u"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(mp, "w"), 0o755))
	src := filepath.Join(mp, "t", "0", "offset", "0")

	out, err := exec.Command("bash", "-c", fmt.Sprintf("cat '%s' >> '%s'", src, filepath.Join(mp, "u", "0", "append"))).CombinedOutput()
	require.NoError(t, err, string(out))
	b, err := os.ReadFile(filepath.Join(mp, "u", "0", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, want.String(), string(b), "cat >> append")

	// copy_file_range straight between the two files.
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	dst, err := os.OpenFile(filepath.Join(mp, "w", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	total := 0
	for total < want.Len() {
		n, err := unix.CopyFileRange(int(in.Fd()), nil, int(dst.Fd()), nil, want.Len()-total, 0)
		if err != nil {
			// Not supported between these files: the caller falls back
			// to read and write (as cat does); nothing may be appended.
			require.Zero(t, total, "copy_file_range failed after copying: %v", err)
			_, err = io.Copy(struct{ io.Writer }{dst}, in)
			require.NoError(t, err)
			break
		}
		require.NotZero(t, n)
		total += n
	}
	require.NoError(t, dst.Close())
	w, err := l.Partition("w", 0)
	require.NoError(t, err)
	require.Equal(t, vs, values(t, w), "copy_file_range")
}

// TestAdv32ReadOnlyRefusals: on a read-only mount every change is EROFS.
func TestAdv32ReadOnlyRefusals(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{ReadOnly: true})
	_ = p
	part := filepath.Join(mp, "t", "0")
	erofs := func(what string, err error) {
		t.Helper()
		require.Equal(t, syscall.EROFS, adv32Errno(err), "%s: %v", what, err)
	}
	_, err := os.OpenFile(filepath.Join(part, "append"), os.O_WRONLY, 0)
	erofs("open append", err)
	_, err = os.OpenFile(filepath.Join(part, "append.jsonl"), os.O_WRONLY|os.O_TRUNC, 0)
	erofs("open append.jsonl O_TRUNC", err)
	erofs("mkdir topic", os.Mkdir(filepath.Join(mp, "x"), 0o755))
	erofs("mkdir partition", os.Mkdir(filepath.Join(mp, "t", "1"), 0o755))
	erofs("unlink", os.Remove(filepath.Join(part, "info")))
	erofs("rename", os.Rename(filepath.Join(part, "info"), filepath.Join(part, "x")))
	erofs("chmod", os.Chmod(filepath.Join(part, "append"), 0o777))
	erofs("truncate append", os.Truncate(filepath.Join(part, "append"), 0))
	erofs("symlink", os.Symlink("x", filepath.Join(part, "s")))
	erofs("utimes", os.Chtimes(filepath.Join(part, "offset", "0"), time.Unix(1, 0), time.Unix(1, 0)))
	// Reading works.
	b, err := os.ReadFile(filepath.Join(part, "offset", "0"))
	require.NoError(t, err)
	require.Empty(t, b)
	b, err = os.ReadFile(filepath.Join(part, "append"))
	if err == nil {
		require.Empty(t, b)
	}
}

// TestAdv32PreadEverywhere: with and without direct I/O, a pread at any
// position and of any length returns the bytes a sequential read gives,
// in both renderings.
func TestAdv32PreadEverywhere(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprint("direct=", direct), func(t *testing.T) {
			mp, p, _, _ := adv32Mount(t, storage.Overrides{"segment.bytes": 20000}, Options{DirectIO: direct})
			for b := 0; b < 40; b++ {
				var vs []string
				for i := 0; i < 1+b%9; i++ {
					vs = append(vs, fmt.Sprintf("%d/%d:%s\xff", b, i, strings.Repeat("é", (b*i)%300)))
				}
				adv32Append(t, p, vs...)
			}
			for _, name := range []string{"0", "0.jsonl", "17", "17.jsonl"} {
				path := filepath.Join(mp, "t", "0", "offset", name)
				all, err := os.ReadFile(path)
				require.NoError(t, err)
				st, err := os.Stat(path)
				require.NoError(t, err)
				require.Equal(t, int64(len(all)), st.Size(), name)
				f, err := os.Open(path)
				require.NoError(t, err)
				for k := 0; k < 200; k++ {
					off := (k * 7919) % (len(all) + 10)
					n := 1 + (k*104729)%9000
					buf := make([]byte, n)
					got, err := f.ReadAt(buf, int64(off))
					if err != nil {
						require.ErrorIs(t, err, io.EOF)
					}
					wantEnd := min(off+n, len(all))
					if off >= len(all) {
						require.Zero(t, got, "%s at %d", name, off)
						continue
					}
					require.Equal(t, all[off:wantEnd], buf[:got], "%s: %d bytes at %d", name, n, off)
				}
				require.NoError(t, f.Close())
			}
		})
	}
}
