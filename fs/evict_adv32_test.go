package fs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdv32EvictedNamesStayRight: with few record names kept
// (MaxRecordNames), files open while their names are dropped, and names
// looked up again after, read the right bytes with the right sizes.
func TestAdv32EvictedNamesStayRight(t *testing.T) {
	mp, p, _, srv := adv32Mount(t, nil, Options{MaxRecordNames: 8})
	var vs []string
	for i := 0; i < 400; i++ {
		vs = append(vs, fmt.Sprintf("v%03d", i))
	}
	adv32Append(t, p, vs...)
	want := func(from int, jsonl bool) string {
		if jsonl {
			return ""
		}
		return strings.Join(vs[from:], "\n") + "\n"
	}
	dir := filepath.Join(mp, "t", "0", "offset")
	var open []*os.File
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()
	for i := 0; i < 40; i++ {
		f, err := os.Open(filepath.Join(dir, fmt.Sprint(i*5)))
		require.NoError(t, err)
		open = append(open, f)
	}
	for i := 0; i < 400; i++ {
		name := fmt.Sprint(i)
		if i%3 == 0 {
			name += ".jsonl"
		}
		if i%7 == 0 {
			name = fmt.Sprintf("time/%d", 1000+i) // long before every record
			_, err := os.Stat(filepath.Join(mp, "t", "0", name))
			require.NoError(t, err)
			continue
		}
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		if !strings.HasSuffix(name, ".jsonl") {
			require.EqualValues(t, len(want(i, false)), st.Size(), name)
		}
	}
	// The evictor runs on a goroutine of its own, woken by the lookups: on
	// a busy machine it may not have run yet (CI once saw 137 names here).
	eventually32(t, "the evictor to keep at most 8 names", func() bool { return srv.fsys.names.len() <= 8 })
	adv32Append(t, p, "more")
	vs = append(vs, "more")
	for i, f := range open {
		b, err := io.ReadAll(f)
		require.NoError(t, err)
		require.Equal(t, want(i*5, false), string(b), "open offset/%d", i*5)
		st, err := f.Stat()
		require.NoError(t, err)
		require.EqualValues(t, len(b), st.Size())
	}
	for i := 0; i < 400; i += 37 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(i)))
		require.NoError(t, err)
		require.Equal(t, want(i, false), string(b))
	}
}
