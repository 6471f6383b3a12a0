package integration

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// TestRecordNamesEvicted: past Options.MaxRecordNames the oldest record
// names are dropped from the kernel, and nothing a user holds breaks: an
// open file reads on and sees new records, a dropped name is looked up
// again with its right size, ls still lists.
func TestRecordNamesEvicted(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "e", nil)
	fill(t, p, 2000)
	mnt := mount(t, l, fs.Options{MaxRecordNames: 50})
	dir := filepath.Join(part(mnt, "e", 0), "offset")
	held, err := os.Open(filepath.Join(dir, "5"))
	require.NoError(t, err)
	defer held.Close()
	first := make([]byte, 10)
	_, err = io.ReadFull(held, first)
	require.NoError(t, err)
	for i := 6; i < 2000; i++ {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprint(i)))
		require.NoError(t, err)
	}
	for i := 6; i < 2000; i += 97 { // names dropped long ago resolve again
		st, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%d.jsonl", i)))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	time.Sleep(100 * time.Millisecond) // let the evictor catch up
	_, err = p.Append([]storage.Record{{Value: []byte("new")}})
	require.NoError(t, err)
	rest, err := io.ReadAll(held)
	require.NoError(t, err)
	require.Equal(t, line(5)[10:]+"\n", string(rest[:len(line(5))-9]))
	require.Equal(t, "new\n", string(rest[len(rest)-4:]), "the held file sees a record appended after its name was dropped")
	st, err := os.Stat(filepath.Join(dir, "5"))
	require.NoError(t, err)
	require.Equal(t, int64(len(first)+len(rest)), st.Size())
	require.Contains(t, sh(t, "ls %s", q(dir)), "latest")
}
