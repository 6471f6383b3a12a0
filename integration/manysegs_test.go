package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// TestStatEveryNameOfManySegments stats every name of offset/ on a
// partition of a hundred-odd segments, as ls -l does, and reads each: the
// size a stat gives (from the partition's cached segment sizes, see
// storage.Partition.ViewSize) is what the file holds, before and after
// the log rolls on, in both formats (JSON Lines for a fifth of the names).
func TestStatEveryNameOfManySegments(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "many", storage.Overrides{"segment.bytes": 300})
	add := func(n int) {
		for i := range n {
			_, err := p.Append([]storage.Record{{Value: fmt.Appendf(nil, "record %d of %d", i, n)}})
			require.NoError(t, err)
		}
	}
	add(300)
	mnt := mount(t, l, fs.Options{})
	dir := filepath.Join(part(mnt, "many", 0), "offset")
	check := func(when string) {
		names, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Greater(t, len(names), 100, when)
		for i, e := range names {
			forms := []string{e.Name()}
			if i%5 == 0 {
				forms = append(forms, e.Name()+".jsonl")
			}
			for _, name := range forms {
				st, err := os.Stat(filepath.Join(dir, name))
				require.NoError(t, err)
				b, err := os.ReadFile(filepath.Join(dir, name))
				require.NoError(t, err)
				require.Equal(t, int64(len(b)), st.Size(), "%s: offset/%s", when, name)
			}
		}
	}
	check("first")
	add(50)
	check("after more segments")
}
