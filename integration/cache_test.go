package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// Record files go through the kernel's page cache by default. These tests
// attack what that could break: a last page cached short and read as
// zeros once the file grew, sizes the kernel keeps too long, pages of a
// file that retention or a roll changed under a reader.

// randomLine is a record value of a random length, so that the file's
// end falls anywhere in a page; its bytes name its number.
func randomLine(rng *rand.Rand, i int) string {
	return fmt.Sprintf("line %d ", i) + strings.Repeat(string(rune('a'+i%26)), rng.Intn(9000))
}

// TestFreshAfterAppend appends records of random sizes, by the storage
// API and through the append file, and after each append reads the file
// through an open descriptor that was at the old end, through a new open,
// and with a pread of the old last page: each must show the new bytes,
// never the zeros the kernel filled the short last page with.
func TestFreshAfterAppend(t *testing.T) {
	for _, via := range []string{"api", "mount"} {
		t.Run(via, func(t *testing.T) {
			l, _ := newLog(t, nil)
			p := newPartition(t, l, "fresh", storage.Overrides{"segment.bytes": 256 << 10})
			mnt := mount(t, l, fs.Options{})
			dir := part(mnt, "fresh", 0)
			file := filepath.Join(dir, "offset", "0")
			app, err := os.OpenFile(filepath.Join(dir, "append"), os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			defer app.Close()
			follower, err := os.Open(file)
			require.NoError(t, err)
			defer follower.Close()
			rng := rand.New(rand.NewSource(1))
			var want []byte
			page := make([]byte, 8192)
			for i := range 150 {
				v := randomLine(rng, i)
				if via == "api" {
					_, err = p.Append([]storage.Record{{Value: []byte(v)}})
				} else {
					_, err = app.Write([]byte(v + "\n"))
				}
				require.NoError(t, err)
				old := int64(len(want))
				want = append(want, v...)
				want = append(want, '\n')

				got, err := io.ReadAll(follower) // from the old end on
				require.NoError(t, err)
				require.Equal(t, string(want[old:]), string(got), "append %d through the open file", i)

				st, err := os.Stat(file)
				require.NoError(t, err)
				require.Equal(t, int64(len(want)), st.Size(), "append %d: st_size", i)

				at := old &^ 4095 // the page the last read ended in
				n, err := follower.ReadAt(page, at)
				if err != nil {
					require.ErrorIs(t, err, io.EOF)
				}
				require.Equal(t, string(want[at:min(at+int64(len(page)), int64(len(want)))]), string(page[:n]), "append %d: pread of the old last page", i)

				if i%10 == 0 {
					all, err := os.ReadFile(file)
					require.NoError(t, err)
					require.Equal(t, string(want), string(all), "append %d: a new open", i)
				}
			}
		})
	}
}

// TestFreshUnderConcurrentAppends reads a file to its end again and again
// from several goroutines while another appends: every read is a prefix
// of the final contents, ends at a record's end, and the last read after
// the appends stopped sees them all.
func TestFreshUnderConcurrentAppends(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "race", storage.Overrides{"segment.bytes": 128 << 10})
	mnt := mount(t, l, fs.Options{})
	file := filepath.Join(part(mnt, "race", 0), "offset", "0")
	var mu sync.Mutex
	var want []byte
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for r := range errs {
		wg.Go(func() {
			f, err := os.Open(file)
			if err != nil {
				errs[r] = err
				return
			}
			defer f.Close()
			var got []byte
			buf := make([]byte, 1+r*3000)
			for {
				select {
				case <-done:
					rest, err := io.ReadAll(f)
					got = append(got, rest...)
					mu.Lock()
					final := string(want)
					mu.Unlock()
					if err == nil && string(got) != final {
						err = fmt.Errorf("reader %d: %d bytes at the end, want %d (first difference at %d)", r, len(got), len(final), firstDiff(string(got), final))
					}
					errs[r] = err
					return
				default:
				}
				n, err := f.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil && err != io.EOF {
					errs[r] = err
					return
				}
				mu.Lock()
				ok := bytes.HasPrefix(want, got)
				mu.Unlock()
				if !ok {
					errs[r] = fmt.Errorf("reader %d: read something that was not appended, at byte %d: %q", r, len(got)-n, buf[:min(n, 40)])
					return
				}
			}
		})
	}
	rng := rand.New(rand.NewSource(2))
	for i := range 400 {
		v := randomLine(rng, i)
		mu.Lock()
		_, err := p.Append([]storage.Record{{Value: []byte(v)}})
		want = append(want, v+"\n"...)
		mu.Unlock()
		require.NoError(t, err)
	}
	close(done)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// TestTailFollowAPI: tail -f shows, within its poll of a second, records
// appended by the storage API (no append through the mount tells the
// kernel anything).
func TestTailFollowAPI(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "tailapi", nil)
	mnt := mount(t, l, fs.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// From the first line (-n +1), not from the end (-n 0): tail takes the
	// end a moment after it opens the file, and an append in between was
	// skipped as already there (seen under load).
	lines := tailLines(t, ctx, "-n", "+1", "-f", filepath.Join(part(mnt, "tailapi", 0), "offset", "0"))
	rng := rand.New(rand.NewSource(3))
	for i := range 5 {
		v := randomLine(rng, i)
		_, err := p.Append([]storage.Record{{Value: []byte(v)}})
		require.NoError(t, err)
		start := time.Now()
		select {
		case got := <-lines:
			require.Equal(t, v, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("tail -f did not show record %d", i)
		}
		t.Logf("record %d shown after %v", i, time.Since(start))
	}
}

// TestReaderAcrossRollsAndRetention reads a file slowly while appends roll
// segments and retention deletes them: the reader gets exactly the
// records from its start, up to where retention took what it had not
// read yet, and then EIO; a later open of earliest shows what is left.
// Through the page cache the kernel may have read far ahead, which keeps
// those bytes; dropping the file's pages before every read makes each
// read ask the server again, as memory pressure would.
func TestReaderAcrossRollsAndRetention(t *testing.T) {
	for _, directIO := range []bool{false, true} {
		t.Run(fmt.Sprintf("directio=%v", directIO), func(t *testing.T) {
			l := openLog(t, t.TempDir(), storage.Options{})
			p := newPartition(t, l, "ret", storage.Overrides{"segment.bytes": 16 << 10, "retention.bytes": 64 << 10, "file.delete.delay.ms": 0})
			rng := rand.New(rand.NewSource(4))
			var want []byte
			add := func(k int) {
				for range k {
					v := fmt.Sprintf("record at byte %d %s", len(want), strings.Repeat("r", rng.Intn(300)))
					_, err := p.Append([]storage.Record{{Value: []byte(v)}})
					require.NoError(t, err)
					want = append(want, v+"\n"...)
				}
			}
			add(50)
			mnt := mount(t, l, fs.Options{DirectIO: directIO})
			dir := filepath.Join(part(mnt, "ret", 0), "offset")
			f, err := os.Open(filepath.Join(dir, "0"))
			require.NoError(t, err)
			defer f.Close()
			var got []byte
			buf := make([]byte, 1000) // slower than the appends: retention overtakes it
			var readErr error
			for i := 0; i < 400 && readErr == nil; i++ {
				add(10) // rolls
				_, err := l.EnforceRetention()
				require.NoError(t, err)
				require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
				n, err := f.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil && err != io.EOF {
					readErr = err
				}
				require.True(t, bytes.HasPrefix(want, got), "read %d: bytes that were not appended there", i)
			}
			require.ErrorIs(t, readErr, syscall.EIO, "retention overtook the reader: EIO, not a silent jump")
			require.Positive(t, p.StartOffset())
			rest, err := os.ReadFile(filepath.Join(dir, "earliest"))
			require.NoError(t, err)
			require.True(t, bytes.HasSuffix(want, rest), "earliest is the end of what was appended")
			require.NotEmpty(t, rest)
		})
	}
}
