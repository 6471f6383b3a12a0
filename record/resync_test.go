package record

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResync finds the next valid batch after bad bytes of every kind, and
// none when only bad bytes follow.
func TestResync(t *testing.T) {
	var log []byte
	var pos []Position
	for i := 0; i < 20; i++ {
		var b Builder
		for k := 0; k < 1+i%3; k++ {
			b.Append(int64(1000+i), nil, []byte(fmt.Sprintf("value-%d-%d", i, k)), nil)
		}
		raw, err := b.Build()
		require.NoError(t, err)
		SetBaseOffset(raw, Offset(100*i))
		pos = append(pos, Position(len(log)))
		log = append(log, raw...)
	}
	end := Position(len(log))
	for i := 1; i < len(pos)-1; i++ {
		for _, damage := range []string{"flip", "zeros", "garbage"} {
			d := bytes.Clone(log)
			from, to := pos[i], pos[i+1]
			switch damage {
			case "flip":
				d[from+40] ^= 0x10
			case "zeros":
				clear(d[from:to])
			case "garbage":
				for k := from; k < to; k++ {
					d[k] = byte(k*7 + 3)
				}
			}
			got, ok, err := Resync(bytes.NewReader(d), from+1, end, 0, nil)
			require.NoError(t, err)
			require.True(t, ok, "%s at batch %d", damage, i)
			require.Equal(t, pos[i+1], got.Pos, "%s at batch %d", damage, i)
			require.Equal(t, Offset(100*(i+1)), got.BaseOffset)
		}
	}
	// The caller's rules: a batch whose base is too low is passed over.
	got, ok, err := Resync(bytes.NewReader(log), 1, end, 0, func(b *Batch) bool { return b.BaseOffset >= 500 })
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, pos[5], got.Pos)
	// Only garbage after: nothing.
	tail := bytes.Clone(log[:pos[3]])
	tail = append(tail, bytes.Repeat([]byte("junk!"), 400)...)
	_, ok, err = Resync(bytes.NewReader(tail), pos[3], Position(len(tail)), 0, nil)
	require.NoError(t, err)
	require.False(t, ok)
	// A batch past a window boundary is found too.
	far := append(make([]byte, resyncWindow+123), log[pos[2]:pos[3]]...)
	got, ok, err = Resync(bytes.NewReader(far), 0, Position(len(far)), 0, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, Position(resyncWindow+123), got.Pos)
}
