package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
)

// TestLastLineSurvivesTheUnmount: a last line written without its newline
// is appended when its file is released (README, SPEC: "appended when the
// file is released"). The kernel sends that RELEASE after close(2) has
// returned, and an unmount that comes right then (umount after the close,
// or the close that ends a mount detached by umount -l) drops it unread,
// with the mount: the line, whose write(2) and close(2) had returned, was
// lost. Ten rounds of each, as the kernel's timing decides.
func TestLastLineSurvivesTheUnmount(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprintf("lazy=%v", lazy), func(t *testing.T) {
			dir := t.TempDir()
			mp := filepath.Join(dir, "mnt")
			var want strings.Builder
			for round := 0; round < 10; round++ {
				m := startMount(t, dir, mp, "--data", "data")
				require.NoError(t, os.MkdirAll(filepath.Join(mp, "t"), 0o755))
				f, err := os.OpenFile(filepath.Join(mp, "t", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
				require.NoError(t, err)
				line := fmt.Sprintf("round %d\nlast of round %d", round, round)
				_, err = f.WriteString(line)
				require.NoError(t, err)
				want.WriteString(line + "\n")
				if lazy {
					require.NoError(t, fusetest.Unmount(mp, true))
					require.NoError(t, f.Close())
				} else {
					require.NoError(t, f.Close())
					require.NoError(t, fusetest.Unmount(mp, false))
				}
				require.Equal(t, 0, m.wait(t), m.stderr())
			}
			require.Equal(t, want.String(), ok(t, dir, "", "consume", "--data", "data", "--offset", "0", "t", "0"))
		})
	}
}
