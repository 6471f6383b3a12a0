package fs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Buffers come back in the size class they were taken from, of at least
// the size asked, and ones too big for a class are not kept.
func TestReadBufClasses(t *testing.T) {
	for _, n := range []int{1, 4095, 4096, 4097, 12288, 843776, 1 << 20, 1<<20 + 1, 8 << 20} {
		b := getReadBuf(n)
		require.Len(t, b, n)
		c := readBufClass(n)
		require.Equal(t, minReadBuf<<c, cap(b), "size %d", n)
		if c > 0 {
			require.Less(t, minReadBuf<<(c-1), n, "size %d: the least class that holds it", n)
		}
		putReadBuf(b)
	}
	big := getReadBuf(16 << 20)
	require.Len(t, big, 16<<20)
	putReadBuf(big)                // not kept: no class holds it
	putReadBuf(make([]byte, 5000)) // not from getReadBuf: ignored
	require.Equal(t, 4096<<1, cap(getReadBuf(5000)))
}
