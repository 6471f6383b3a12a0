package integration

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// These tests attack what the page cache promises of record files: a
// record shows to an open file, a new open and fstat as soon as its append
// returned, sizes are exact, a pread anywhere is what a sequential read
// gives, and nothing but what was appended is ever served, across rolls
// and retention. Every byte is checked against a model of what was
// appended. LOGFS_SEED29 picks the seed; LOGFS_ROUNDS29 scales the sweeps.

// seed29 returns the seed of the sweeps (LOGFS_SEED29, default 1).
func seed29(t *testing.T) int64 {
	s, err := strconv.ParseInt(os.Getenv("LOGFS_SEED29"), 10, 64)
	if err != nil {
		s = 1
	}
	t.Logf("seed %d (LOGFS_SEED29)", s)
	return s
}

// rounds29 scales n by LOGFS_ROUNDS29 (default 1).
func rounds29(n int) int {
	k, err := strconv.Atoi(os.Getenv("LOGFS_ROUNDS29"))
	if err != nil || k < 1 {
		k = 1
	}
	return n * k
}

// line29 is a line (without its newline) of about n bytes whose first
// bytes name it; every line differs from every other.
func line29(i, n int) string {
	s := fmt.Sprintf("L%d/", i)
	if n > len(s) {
		s += strings.Repeat(string(rune('a'+i%26)), n-len(s))
	}
	return s
}

// lineLen29 is a length that puts line ends anywhere, often near page
// boundaries: empty, short, around a page, a few pages.
func lineLen29(rng *rand.Rand) int {
	switch rng.Intn(6) {
	case 0:
		return 0
	case 1, 2:
		return rng.Intn(60)
	case 3:
		return 4096 - 8 + rng.Intn(16)
	case 4:
		return rng.Intn(3000)
	default:
		return 8192 + rng.Intn(5000)
	}
}

// model29 is what the values rendering of a partition's offset/0 must
// show, and where each record starts in it.
type model29 struct {
	mu     sync.Mutex
	values []byte
	starts []int64 // byte position of record k in values
}

func (m *model29) add(lines ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range lines {
		m.starts = append(m.starts, int64(len(m.values)))
		m.values = append(m.values, l...)
		m.values = append(m.values, '\n')
	}
}

// snapshot returns the values so far (never changed, only grown).
func (m *model29) snapshot() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.values[:len(m.values):len(m.values)]
}

// from returns the rendering of offset/k.
func (m *model29) from(k int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k == len(m.starts) {
		return nil
	}
	return m.values[m.starts[k]:len(m.values):len(m.values)]
}

// render29 reads the whole rendering of start on in format f from a view
// of its own: what the mount must show of the JSON Lines rendering, whose
// timestamps are the appends' wall clock.
func render29(t *testing.T, p *storage.Partition, f storage.Format, start record.Offset) []byte {
	t.Helper()
	v, err := p.NewView(f, start)
	require.NoError(t, err)
	defer v.Close()
	var out []byte
	buf := make([]byte, 256<<10)
	for {
		n, err := v.ReadAt(buf, int64(len(out)))
		out = append(out, buf[:n]...)
		if err == io.EOF || (err == nil && n == 0) {
			return out
		}
		require.NoError(t, err)
	}
}

// preadCheck reads size bytes at off from f and checks them against want,
// the whole file as it is now.
func preadCheck(t *testing.T, f *os.File, want []byte, off int64, size int, what string) {
	t.Helper()
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, off)
	if err != nil {
		require.ErrorIs(t, err, io.EOF, "%s: pread %d at %d", what, size, off)
	}
	end := min(off+int64(size), int64(len(want)))
	if off > int64(len(want)) {
		end = off
	}
	exp := want[min(off, int64(len(want))):end]
	if !bytes.Equal(exp, buf[:n]) {
		t.Fatalf("%s: pread %d at %d of a file of %d: %d bytes, want %d, first difference at %d: got %q want %q", what, size, off, len(want),
			n, len(exp), firstDiff(string(buf[:n]), string(exp)), clip29(buf[:n], firstDiff(string(buf[:n]), string(exp))), clip29(exp, firstDiff(string(buf[:n]), string(exp))))
	}
}

// clip29 is a few bytes of b from i on, for a message.
func clip29(b []byte, i int) []byte {
	if i > len(b) {
		return nil
	}
	return b[i:min(len(b), i+40)]
}

// stream29 is the bytes an append file is written: lines generated as
// needed, handed out in chunks of any length; a line is appended once the
// chunk with its newline was written.
type stream29 struct {
	rng   *rand.Rand
	next  int      // number of the next line to generate
	buf   []byte   // generated, not yet written
	lines []string // generated lines whose newline is not yet written
}

// chunk returns the next n bytes to write, and the lines they end.
func (s *stream29) chunk(n int) ([]byte, []string) {
	for len(s.buf) < n {
		l := line29(s.next, lineLen29(s.rng))
		s.next++
		s.buf = append(s.buf, l...)
		s.buf = append(s.buf, '\n')
		s.lines = append(s.lines, l)
	}
	c := s.buf[:n:n]
	s.buf = s.buf[n:]
	k := bytes.Count(c, []byte{'\n'})
	ended := s.lines[:k:k]
	s.lines = s.lines[k:]
	return c, ended
}

// chunkLen29 is the length of one write: a piece of a line, about a line,
// or many lines.
func chunkLen29(rng *rand.Rand) int {
	switch rng.Intn(4) {
	case 0:
		return 1 + rng.Intn(50)
	case 1:
		return 1 + rng.Intn(5000)
	default:
		return 1 + rng.Intn(48<<10)
	}
}

// TestRead29AppendInterleave writes, through the append file, lines of
// lengths that end anywhere in a page (often just around page ends), in
// writes of any length: pieces of lines finished by a later write, several
// lines, a line and the start of the next; on a topic with small segments
// so that the log rolls. After every write(2) it checks, against the
// model: an open values file and an open .jsonl file read on from where
// they were; fstat and stat sizes; preads at the old end, one byte before
// it, the page it was in, and anywhere, of sizes 1, 4095, 4096, 4097,
// unaligned and 1 MiB; now and then with the file's pages dropped first
// (fadvise), and a new open of offset/N for a random N.
func TestRead29AppendInterleave(t *testing.T) {
	rng := rand.New(rand.NewSource(seed29(t)))
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "il", storage.Overrides{"segment.bytes": 40 << 10})
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "il", 0)
	app, err := os.OpenFile(filepath.Join(dir, "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer app.Close()
	vals, err := os.Open(filepath.Join(dir, "offset", "0"))
	require.NoError(t, err)
	defer vals.Close()
	jsonl, err := os.Open(filepath.Join(dir, "offset", "0.jsonl"))
	require.NoError(t, err)
	defer jsonl.Close()

	var m model29
	st := &stream29{rng: rng}
	var gotVals, gotJSON []byte
	sizes := []int{1, 4095, 4096, 4097, 5000, 12289, 1 << 20}
	for w := range rounds29(150) {
		old := int64(len(m.snapshot()))
		c, ended := st.chunk(chunkLen29(rng))
		n, err := app.Write(c)
		require.NoError(t, err, "write %d", w)
		require.Equal(t, len(c), n)
		m.add(ended...)
		want := m.snapshot()
		what := fmt.Sprintf("write %d (%d bytes, %d lines ended, file %d -> %d)", w, len(c), len(ended), old, len(want))

		// The held files, read on from where they were.
		rest, err := io.ReadAll(vals)
		require.NoError(t, err, what)
		gotVals = append(gotVals, rest...)
		if !bytes.Equal(want, gotVals) {
			i := firstDiff(string(gotVals), string(want))
			t.Fatalf("%s: the open values file read on to %d bytes, want %d; first difference at %d: got %q want %q", what, len(gotVals), len(want), i, clip29(gotVals, i), clip29(want, i))
		}
		fi, err := vals.Stat()
		require.NoError(t, err)
		require.Equal(t, int64(len(want)), fi.Size(), "%s: fstat", what)
		fi, err = os.Stat(filepath.Join(dir, "offset", "0"))
		require.NoError(t, err)
		require.Equal(t, int64(len(want)), fi.Size(), "%s: stat", what)

		// Preads at the places a stale page would show.
		at := []int64{old, old - 1, old &^ 4095, (old &^ 4095) - 1, int64(rng.Intn(len(want) + 1))}
		if w%7 == 0 {
			require.NoError(t, unix.Fadvise(int(vals.Fd()), 0, 0, unix.FADV_DONTNEED))
		}
		for _, off := range at {
			if off < 0 {
				continue
			}
			preadCheck(t, vals, want, off, sizes[rng.Intn(len(sizes))], what)
		}

		rest, err = io.ReadAll(jsonl)
		require.NoError(t, err, what)
		gotJSON = append(gotJSON, rest...)
		if w%10 == 9 || w == 0 {
			wantJSON := render29(t, p, storage.JSONL, 0)
			require.Equal(t, string(wantJSON), string(gotJSON), "%s: the open .jsonl file", what)
			fi, err := jsonl.Stat()
			require.NoError(t, err)
			require.Equal(t, int64(len(wantJSON)), fi.Size(), "%s: fstat .jsonl", what)
			preadCheck(t, jsonl, wantJSON, int64(rng.Intn(len(wantJSON)+1)), sizes[rng.Intn(len(sizes))], what+" .jsonl")
		}

		// A new open of offset/N.
		if k := len(m.starts); w%5 == 0 && k > 0 {
			off := rng.Intn(k + 1)
			got, err := os.ReadFile(filepath.Join(dir, "offset", strconv.Itoa(off)))
			require.NoError(t, err, "%s: offset/%d", what, off)
			require.Equal(t, string(m.from(off)), string(got), "%s: a new open of offset/%d", what, off)
		}
	}
	require.NoError(t, app.Close())
	// The release appends the piece of the last line written.
	if len(st.lines) > 0 {
		if k := len(st.lines[0]) - bytes.IndexByte(st.buf, '\n'); k > 0 {
			m.add(st.lines[0][:k])
		}
	}
	// RELEASE is not waited for by close(2) (append.go): wait for it.
	eventually(t, "the last partial line", func() bool { return int(p.EndOffset()) == len(m.starts) })
	want := m.snapshot()
	rest, err := io.ReadAll(vals)
	require.NoError(t, err)
	require.Equal(t, string(want), string(append(gotVals, rest...)), "after the close")
	all, err := os.ReadFile(filepath.Join(dir, "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, string(want), string(all), "a new open after the close")
}
