package integration

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// sample29 is what one read returned: the bytes at pos of a file.
type sample29 struct {
	pos  int64
	data []byte
}

// TestRead29WritersAndReaders: two writers append through append files of
// their own, in pieces of lines and runs of lines, while readers of
// offset/0 and offset/0.jsonl read sequentially with sizes from 1 byte to
// 1 MiB, pread anywhere (at the size fstat gives, across the tail page),
// drop the file's pages, and stat. The order the writers' lines land in
// is the server's, so each read is kept and checked once the writers are
// done, against the file as a view renders it then (a file only grows:
// every byte ever served must be the final one at its place), and every
// size observed must end a record (no reader sees part of a batch).
func TestRead29WritersAndReaders(t *testing.T) {
	seed := seed29(t)
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "wr", storage.Overrides{"segment.bytes": 64 << 10})
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "wr", 0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	names := []string{"0", "0.jsonl", "0", "0.jsonl"}
	samples := make([][]sample29, len(names))
	sizes := make([][]int64, len(names))
	errs := make([]error, len(names)+2)
	for r, name := range names {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(seed*10 + int64(r)))
			f, err := os.Open(filepath.Join(dir, "offset", name))
			if err != nil {
				errs[r] = err
				return
			}
			defer f.Close()
			reads := []int{1, 100, 4095, 4096, 4097, 9000, 65536, 1 << 20}
			var pos int64
			budget := 24 << 20 // bytes of samples kept
			for budget > 0 {
				select {
				case <-stop:
					return
				default:
				}
				buf := make([]byte, reads[rng.Intn(len(reads))])
				var n int
				var at int64
				if r < 2 {
					at = pos
					n, err = f.Read(buf)
					pos += int64(n)
				} else {
					fi, err := f.Stat()
					if err != nil {
						errs[r] = err
						return
					}
					sizes[r] = append(sizes[r], fi.Size())
					if rng.Intn(4) == 0 {
						if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
							errs[r] = err
							return
						}
					}
					switch rng.Intn(3) {
					case 0:
						at = max(fi.Size()-int64(rng.Intn(3)), 0)
					case 1:
						at = max(fi.Size()&^4095-int64(rng.Intn(2)), 0)
					default:
						at = rng.Int63n(fi.Size() + 1)
					}
					n, err = f.ReadAt(buf, at)
				}
				if err != nil && err != io.EOF {
					errs[r] = fmt.Errorf("reader %d (%s): %w", r, name, err)
					return
				}
				if n > 0 {
					samples[r] = append(samples[r], sample29{at, buf[:n]})
					budget -= n
				}
				time.Sleep(300 * time.Microsecond) // spread over the writes
			}
		})
	}
	var ww sync.WaitGroup
	for w := range 2 {
		ww.Go(func() {
			rng := rand.New(rand.NewSource(seed*10 + 7 + int64(w)))
			app, err := os.OpenFile(filepath.Join(dir, "append"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				errs[len(names)+w] = err
				return
			}
			defer app.Close()
			st := &stream29{rng: rng, next: w * 1_000_000}
			deadline := time.Now().Add(4 * time.Second)
			for i := 0; i < rounds29(300) && time.Now().Before(deadline); i++ {
				c, _ := st.chunk(chunkLen29(rng) / 2)
				if _, err := app.Write(c); err != nil {
					errs[len(names)+w] = err
					return
				}
			}
			// End the last line.
			if k := len(st.lines); k > 0 {
				c, _ := st.chunk(len(st.buf))
				if _, err := app.Write(c); err != nil {
					errs[len(names)+w] = err
				}
			}
		})
	}
	ww.Wait()
	close(stop)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	final := map[string][]byte{"0": render29(t, p, storage.Values, 0), "0.jsonl": render29(t, p, storage.JSONL, 0)}
	checked := 0
	for r, name := range names {
		want := final[name]
		for _, s := range samples[r] {
			end := s.pos + int64(len(s.data))
			require.LessOrEqual(t, end, int64(len(want)), "reader %d (%s): %d bytes at %d, past the end", r, name, len(s.data), s.pos)
			if exp := want[s.pos:end]; string(exp) != string(s.data) {
				i := firstDiff(string(s.data), string(exp))
				t.Fatalf("reader %d (%s): %d bytes at %d differ at %d: got %q want %q", r, name, len(s.data), s.pos, i, clip29(s.data, i), clip29(exp, i))
			}
			checked += len(s.data)
		}
		for _, size := range sizes[r] {
			require.LessOrEqual(t, size, int64(len(want)))
			if size > 0 {
				require.Equal(t, byte('\n'), want[size-1], "reader %d (%s): fstat %d is inside a record", r, name, size)
			}
		}
	}
	t.Logf("%d bytes read and checked; the file is %d bytes", checked, len(final["0"]))
}
