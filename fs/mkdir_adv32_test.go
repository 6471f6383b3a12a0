package fs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdv32Mkdir: mkdir makes topics (Kafka's name rules, EINVAL for a bad
// name, EEXIST for one taken or colliding) and the next partition of a
// topic (EINVAL for any other name).
func TestAdv32Mkdir(t *testing.T) {
	mp, _, l, _ := adv32Mount(t, nil, Options{})
	mkdir := func(path string) syscall.Errno { return adv32Errno(os.Mkdir(filepath.Join(mp, path), 0o755)) }

	long := strings.Repeat("x", 249)
	require.Zero(t, mkdir(long), "a topic name of 249 characters")
	require.Zero(t, mkdir(long+"/1"))
	require.Zero(t, mkdir(long+"/2"))
	require.NoError(t, os.WriteFile(filepath.Join(mp, long, "2", "append"), []byte("v\n"), 0))
	b, err := os.ReadFile(filepath.Join(mp, long, "2", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, "v\n", string(b))

	for _, name := range []string{strings.Repeat("y", 250), "a b", "a:b", "ä", "\xff", "a\tb", "a\\b"} {
		require.Equal(t, syscall.EINVAL, mkdir(name), "topic %q", name)
		_, err := os.Stat(filepath.Join(mp, name))
		require.Equal(t, syscall.ENOENT, adv32Errno(err), "%q left behind", name)
	}
	require.Zero(t, mkdir("a.b"))
	require.Equal(t, syscall.EEXIST, mkdir("a_b"), "collides with a.b")
	require.Equal(t, syscall.EEXIST, mkdir("a.b"))
	require.Equal(t, syscall.EEXIST, mkdir("t"))
	require.Zero(t, mkdir("..."), "three dots is a valid Kafka topic name")

	for _, name := range []string{"5", "01", "-1", "+1", "1.0", "x", "99999999999999999999"} {
		require.Equal(t, syscall.EINVAL, mkdir("t/"+name), "partition %q", name)
	}
	require.Zero(t, mkdir("t/1"))
	require.Equal(t, syscall.EEXIST, mkdir("t/1"))
	require.Equal(t, syscall.EEXIST, mkdir("t/0"))
	ids, err := l.Topic("t")
	require.NoError(t, err)
	require.Len(t, ids.Partitions(), 2)
	ents, err := os.ReadDir(filepath.Join(mp, "t"))
	require.NoError(t, err)
	require.Len(t, ents, 2)
	// Nowhere else.
	for _, path := range []string{"t/0/x", "t/0/offset/5", "t/0/time/x"} {
		require.NotZero(t, mkdir(path), path)
	}
}
