package integration

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// TestRead29GrowsAfterStartDeleted: a file open at offset/0 that was read
// to its end keeps growing after retention deleted offset 0 (its views
// pinned the segments it had reached). A record appended by the storage
// API (as the cluster copy appends) shows to it as soon as the append
// returned, like to any open file: a read past the old end returns it,
// never an end of file first. (The kernel throws away the size of a
// GETATTR that a drop of the file's short last page overtook; the drop
// stores the rest of that page to move the size on, and could not render
// it from a new view of offset/0, which retention deleted: the read that
// asked saw the old end, the next one the record.)
func TestRead29GrowsAfterStartDeleted(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "gs", storage.Overrides{"segment.bytes": 16 << 10, "retention.bytes": 32 << 10, "file.delete.delay.ms": 0})
	want := fill(t, p, 2000)
	mnt := mount(t, l, fs.Options{})
	f, err := os.Open(filepath.Join(part(mnt, "gs", 0), "offset", "0"))
	require.NoError(t, err)
	defer f.Close()
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, want, string(got))
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	require.Positive(t, p.StartOffset(), "retention deleted offset 0")
	buf := make([]byte, 64<<10)
	for i := range 200 {
		v := fmt.Sprintf("after the deletion %d %s", i, line(i))
		_, err := p.Append([]storage.Record{{Value: []byte(v)}})
		require.NoError(t, err)
		// Read on until the end of file (a read may stop short of it: at
		// the end of the page the drop stored).
		var got []byte
		for len(got) <= len(v) {
			n, err := f.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF || n == 0 {
				break
			}
			require.NoError(t, err, "append %d", i)
		}
		require.Equal(t, v+"\n", string(got), "append %d: read on past the old end", i)
	}
}
