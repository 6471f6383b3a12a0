package fs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdv32InfoSizeAfterAppend: the info file's st_size is the length of
// what a read of it gives, right after an append through the mount
// returned, when the kernel got its attributes from the lookup alone
// (doc.go: attributes of info "are cached for AttrTimeout (1 s) and
// invalidated when the partition changes ... an append through the
// mount also does it before its write(2) returns").
func TestAdv32InfoSizeAfterAppend(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	adv32Append(t, p, "a")
	part := filepath.Join(mp, "t", "0")
	info := filepath.Join(part, "info")
	_, err := os.Stat(info) // LOOKUP only: attributes cached for 1 s
	require.NoError(t, err)

	// Grow the end offset's digits, so that the document's length changes.
	f, err := os.OpenFile(filepath.Join(part, "append"), os.O_WRONLY, 0)
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		_, err = f.Write([]byte("x\n"))
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())

	st, err := os.Stat(info)
	require.NoError(t, err)
	b, err := os.ReadFile(info)
	require.NoError(t, err)
	var doc partitionInfo
	require.NoError(t, json.Unmarshal(b, &doc))
	require.EqualValues(t, 21, doc.LogEndOffset)
	require.Equal(t, int64(len(b)), st.Size(), "st_size of info after an append through the mount")
}
