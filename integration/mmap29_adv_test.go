package integration

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// envMmap29 makes the test binary a process of its own that maps a record
// file of the mount (the serving process never maps its own mount's files:
// go-fuse's "Deadlocks") and, for each line of stdin, answers with the
// file's size by fstat and the mapped bytes up to it.
const envMmap29 = "LOGFS_TEST_MMAP29"

// mmapLen29 is the length mapped, more than the tests' files grow to.
const mmapLen29 = 8 << 20

func init() {
	if path := os.Getenv(envMmap29); path != "" {
		os.Exit(mmapReader29(path))
	}
}

// mmapReader29 maps path once and keeps the mapping across the appends:
// a page it faulted in while it was the file's short last page must not
// keep its zeros once the file grew.
func mmapReader29(path string) (code int) {
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintln(os.Stderr, "mmap reader:", r)
			code = 2
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := unix.Mmap(int(f.Fd()), 0, mmapLen29, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		fi, err := f.Stat()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		n := min(fi.Size(), mmapLen29)
		var hdr [8]byte
		binary.LittleEndian.PutUint64(hdr[:], uint64(fi.Size()))
		out.Write(hdr[:])
		out.Write(m[:n])
		if err := out.Flush(); err != nil {
			return 1
		}
	}
	return 0
}

// TestRead29Mmap maps offset/0 and offset/0.jsonl in processes of their
// own, once, and after every write to the append file (pieces of lines,
// several lines, lines ending anywhere in a page) has each say its size
// (fstat) and the mapped bytes up to it: the size is what was appended,
// the bytes are the model's, with no zeros of the page that was the
// file's last, short one when the process faulted it in.
func TestRead29Mmap(t *testing.T) {
	rng := rand.New(rand.NewSource(seed29(t)))
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "mm", storage.Overrides{"segment.bytes": 40 << 10})
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "mm", 0)
	app, err := os.OpenFile(filepath.Join(dir, "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer app.Close()
	vals := startMmap29(t, filepath.Join(dir, "offset", "0"))
	jsonl := startMmap29(t, filepath.Join(dir, "offset", "0.jsonl"))

	var m model29
	st := &stream29{rng: rng}
	for w := range rounds29(150) {
		c, ended := st.chunk(chunkLen29(rng) / 4)
		_, err := app.Write(c)
		require.NoError(t, err, "write %d", w)
		m.add(ended...)
		want := m.snapshot()
		got := vals()
		if string(got) != string(want) {
			i := firstDiff(string(got), string(want))
			t.Fatalf("write %d: the mapped values file: %d bytes, want %d; first difference at %d: got %q want %q", w, len(got), len(want), i, clip29(got, i), clip29(want, i))
		}
		if w%5 == 4 {
			require.Equal(t, string(render29(t, p, storage.JSONL, 0)), string(jsonl()), "write %d: the mapped .jsonl file", w)
		}
	}
}

// startMmap29 starts a process that maps path, and returns a function
// that asks it for what the mapping shows now.
func startMmap29(t *testing.T, path string) func() []byte {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), envMmap29+"="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	r := bufio.NewReader(stdout)
	return func() []byte {
		t.Helper()
		_, err := io.WriteString(stdin, "check\n")
		require.NoError(t, err)
		var hdr [8]byte
		_, err = io.ReadFull(r, hdr[:])
		require.NoError(t, err, "the mmap reader of %s ended", path)
		b := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
		_, err = io.ReadFull(r, b)
		require.NoError(t, err)
		return b
	}
}
