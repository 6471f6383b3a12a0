package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
)

// TestRead29TailPartialLines: tail -f of offset/0 while a writer sends
// lines in pieces through one open append file: a piece without its
// newline shows nothing, the write that ends the line shows it whole
// within tail's poll (about a second), lines that end the page exactly or
// cross it included, and a line finished in the same write as others
// shows with them.
func TestRead29TailPartialLines(t *testing.T) {
	l, _ := newLog(t, nil)
	newPartition(t, l, "tp", nil)
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "tp", 0)
	app, err := os.OpenFile(filepath.Join(dir, "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer app.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := tailLines(t, ctx, "-n", "+1", "-f", filepath.Join(dir, "offset", "0"))
	written := 0 // bytes of the file so far
	for i := range 6 {
		// A line that ends the file's page exactly, then one byte past.
		n := 4096 - written%4096 - 1 + i%2
		if n < 8 {
			n += 4096
		}
		v := line29(i, n)
		cut := len(v) / 3
		_, err := app.Write([]byte(v[:cut]))
		require.NoError(t, err)
		select {
		case got := <-lines:
			t.Fatalf("line %d: tail -f showed %q before its newline", i, got[:min(len(got), 40)])
		case <-time.After(300 * time.Millisecond):
		}
		extra := fmt.Sprintf("extra %d", i)
		_, err = app.Write([]byte(v[cut:] + "\n" + extra + "\n"))
		require.NoError(t, err)
		written += len(v) + 1 + len(extra) + 1
		for _, want := range []string{v, extra} {
			select {
			case got := <-lines:
				require.Equal(t, want, got, "line %d", i)
			case <-time.After(30 * time.Second):
				t.Fatalf("line %d: tail -f did not show %q", i, want[:min(len(want), 40)])
			}
		}
	}
}
