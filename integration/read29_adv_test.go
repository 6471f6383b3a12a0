package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// TestRead29ReadersAcrossRetention has readers, each with a file open,
// read while a writer appends through the append file, the log rolls
// every 16 KiB and retention deletes the oldest segments: sequential
// readers with read sizes of 1 byte to 1 MiB, pread readers anywhere
// below the size fstat gives (across the tail page, at the old end), some
// dropping the file's pages first. Every byte any of them gets must be the
// model's at that place; a reader that retention overtook gets EIO (never
// other bytes) and opens offset/earliest again; fstat never reports more
// than was appended. When the writer stops, every reader that was not
// overtaken reads on to exactly the end, and fstat says so.
func TestRead29ReadersAcrossRetention(t *testing.T) {
	seed := seed29(t)
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "ret", storage.Overrides{"segment.bytes": 16 << 10, "retention.bytes": 96 << 10, "file.delete.delay.ms": 0})
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "ret", 0)
	app, err := os.OpenFile(filepath.Join(dir, "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer app.Close()

	var m model29
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const readers = 4
	errs := make([]error, readers)
	reopened := make([]int, readers)
	for r := range readers {
		wg.Go(func() {
			errs[r] = reader29(t, rand.New(rand.NewSource(seed*100+int64(r))), r, dir, p, &m, stop, &reopened[r])
		})
	}
	rng := rand.New(rand.NewSource(seed))
	st := &stream29{rng: rng}
	deadline := time.Now().Add(6 * time.Second)
	for w := 0; w < rounds29(600) && time.Now().Before(deadline); w++ {
		c, ended := st.chunk(1 + rng.Intn(12<<10))
		m.add(ended...) // before: a reader may see them as soon as the write is in
		_, err := app.Write(c)
		require.NoError(t, err, "write %d", w)
		if w%5 == 4 {
			_, err := l.EnforceRetention()
			require.NoError(t, err)
		}
	}
	// End the last line, so that the model is the log.
	c, ended := st.chunk(bytes.IndexByte(st.buf, '\n') + 1)
	m.add(ended...)
	_, err = app.Write(c)
	require.NoError(t, err)
	close(stop)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Positive(t, p.StartOffset(), "retention deleted segments")
	t.Logf("start offset %d of %d; reopens after EIO: %v", p.StartOffset(), p.EndOffset(), reopened)
}

// reader29 is one reader of TestRead29ReadersAcrossRetention: kind r%4
// is 0 sequential small reads, 1 sequential large reads, 2 preads, 3
// preads with the pages dropped first.
func reader29(t *testing.T, rng *rand.Rand, r int, dir string, p *storage.Partition, m *model29, stop <-chan struct{}, reopened *int) error {
	sizes := []int{1, 7, 4095, 4096, 4097, 8191, 65536 + 13, 1 << 20}
	var f *os.File
	var base int64 // where the file's bytes start in the model
	var start int
	open := func() error {
		for {
			start = int(p.StartOffset())
			g, err := os.Open(filepath.Join(dir, "offset", strconv.Itoa(start)))
			if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EIO) && p.StartOffset() > record.Offset(start) {
				continue // retention moved the start meanwhile (EIO: while the open took its size)
			}
			if err != nil {
				return err
			}
			m.mu.Lock()
			if start < len(m.starts) {
				base = m.starts[start]
			} else {
				base = int64(len(m.values))
			}
			m.mu.Unlock()
			f = g
			return nil
		}
	}
	if err := open(); err != nil {
		return err
	}
	defer func() { f.Close() }()
	var pos int64 // sequential position
	buf := make([]byte, 1<<20)
	check := func(off int64, got []byte, what string) error {
		want := m.snapshot()
		at := base + off
		if at+int64(len(got)) > int64(len(want)) {
			return fmt.Errorf("reader %d (offset/%d): %s: %d bytes at %d, past the %d appended", r, start, what, len(got), off, int64(len(want))-base)
		}
		if exp := want[at : at+int64(len(got))]; !bytes.Equal(exp, got) {
			i := firstDiff(string(got), string(exp))
			return fmt.Errorf("reader %d (offset/%d): %s: %d bytes at %d differ at %d: got %q want %q", r, start, what, len(got), off, i, clip29(got, i), clip29(exp, i))
		}
		return nil
	}
	overtaken := func(err error) (bool, error) {
		if !errors.Is(err, syscall.EIO) {
			return false, err
		}
		if p.StartOffset() <= record.Offset(start) {
			return false, fmt.Errorf("reader %d (offset/%d): EIO while the log still starts at %d: %w", r, start, p.StartOffset(), err)
		}
		*reopened++
		f.Close()
		pos = 0
		return true, open()
	}
	for {
		select {
		case <-stop:
			return finish29(r, f, base, start, m, p)
		default:
		}
		switch r % 4 {
		case 0, 1:
			size := sizes[rng.Intn(4)]
			if r%4 == 1 {
				size = sizes[4+rng.Intn(4)]
			}
			n, err := f.Read(buf[:size])
			if n > 0 {
				if err := check(pos, buf[:n], fmt.Sprintf("read %d", size)); err != nil {
					return err
				}
				pos += int64(n)
			}
			if err != nil && err != io.EOF {
				if again, err := overtaken(err); err != nil {
					return err
				} else if again {
					continue
				}
			}
			if n == 0 {
				time.Sleep(time.Millisecond)
			}
		default:
			fi, err := f.Stat()
			if err != nil {
				if again, err := overtaken(err); err != nil {
					return err
				} else if again {
					continue
				}
			}
			size := fi.Size()
			if err := check(0, make([]byte, 0), "stat"); err != nil {
				return err
			}
			if want := int64(len(m.snapshot())) - base; size > want {
				return fmt.Errorf("reader %d (offset/%d): fstat %d, past the %d appended", r, start, size, want)
			}
			if r%4 == 3 && rng.Intn(3) == 0 {
				if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
					return err
				}
			}
			var off int64
			switch rng.Intn(3) {
			case 0:
				off = max(size-1-int64(rng.Intn(3)), 0) // at the end
			case 1:
				off = max(size&^4095-int64(rng.Intn(2)), 0) // the tail page
			default:
				off = rng.Int63n(size + 1)
			}
			n, err := f.ReadAt(buf[:sizes[rng.Intn(len(sizes))]], off)
			if n > 0 {
				if err := check(off, buf[:n], "pread"); err != nil {
					return err
				}
			}
			if err != nil && err != io.EOF {
				if _, err := overtaken(err); err != nil {
					return err
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
}

// finish29 reads f on to its end once the writer has stopped: exactly
// the rest of the model, and fstat the same, unless retention overtook it.
func finish29(r int, f *os.File, base int64, start int, m *model29, p *storage.Partition) error {
	want := m.snapshot()[base:]
	got := make([]byte, len(want)+1)
	n, err := f.ReadAt(got, 0)
	if errors.Is(err, syscall.EIO) && p.StartOffset() > record.Offset(start) {
		return nil
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("reader %d (offset/%d) at the end: %w", r, start, err)
	}
	if !bytes.Equal(want, got[:n]) {
		i := firstDiff(string(got[:n]), string(want))
		return fmt.Errorf("reader %d (offset/%d) at the end: %d bytes, want %d, differ at %d", r, start, n, len(want), i)
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reader %d (offset/%d) at the end: %w", r, start, err)
	}
	if fi.Size() != int64(len(want)) {
		return fmt.Errorf("reader %d (offset/%d) at the end: fstat %d, want %d", r, start, fi.Size(), len(want))
	}
	return nil
}
