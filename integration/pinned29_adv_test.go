package integration

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// TestRead29PinnedAfterRetention: a file open at offset/0 whose reader is
// inside the first segment when retention deletes it keeps that segment
// (README: a reader already inside a segment that retention removes
// finishes it). Reads of it that come to the mount at once (the kernel
// sends concurrent READs for one open file: several threads' preads, its
// read-ahead beside a read) must all be served from what the file holds,
// not fail because another view of offset/0, which no longer exists,
// cannot be opened (which gave ENOENT from read(2)).
func TestRead29PinnedAfterRetention(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "pin", storage.Overrides{"segment.bytes": 64 << 10, "retention.bytes": 64 << 10, "file.delete.delay.ms": 0})
	want := fill(t, p, 3000)
	mnt := mount(t, l, fs.Options{})
	f, err := os.Open(filepath.Join(part(mnt, "pin", 0), "offset", "0"))
	require.NoError(t, err)
	defer f.Close()
	head := make([]byte, 100)
	_, err = io.ReadFull(f, head) // the file's view is now inside segment 0
	require.NoError(t, err)
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	require.Positive(t, p.StartOffset(), "retention deleted offset 0")
	_, err = p.NewView(storage.Values, 0)
	require.ErrorIs(t, err, storage.ErrOffsetOutOfRange, "no new view of offset/0")

	const readers, size = 4, 4096
	for round := range 400 {
		require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
		var wg sync.WaitGroup
		errs := make([]error, readers)
		for r := range readers {
			wg.Go(func() {
				off := int64((round*readers + r) % 8 * size)
				buf := make([]byte, size)
				n, err := f.ReadAt(buf, off)
				if err != nil {
					errs[r] = fmt.Errorf("round %d: pread at %d: %w", round, off, err)
				} else if string(buf[:n]) != want[off:off+size] {
					errs[r] = fmt.Errorf("round %d: pread at %d: other bytes", round, off)
				}
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
	}
}
