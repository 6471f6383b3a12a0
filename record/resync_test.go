package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
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

// TestResyncMatchesEveryPosition: Resync, which jumps between positions
// whose magic byte fits, finds what a walk of every position finds, on
// logs of batches with damage of every shape, found windows away or not.
func TestResyncMatchesEveryPosition(t *testing.T) {
	// every is the definition: the first position from which a whole batch
	// parses and is accepted.
	every := func(d []byte, from, end Position, accept func(*Batch) bool) (Position, bool) {
		for p := from; end-p >= HeaderSize; p++ {
			h := d[p:end]
			if h[16] != Magic {
				continue
			}
			size := int64(int32(binary.BigEndian.Uint32(h[8:]))) + LogOverhead
			if size < HeaderSize || size > int64(end-p) || size > DefaultMaxBatch {
				continue
			}
			b, err := ParseBatch(h[:size], p)
			if err != nil || accept != nil && !accept(&b) {
				continue
			}
			return p, true
		}
		return 0, false
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var batches [][]byte
	for i := 0; i < 40; i++ {
		var b Builder
		for k := 0; k < 1+rng.IntN(20); k++ {
			b.Append(int64(i), nil, bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, rng.IntN(3000)), nil)
		}
		raw, err := b.Build()
		require.NoError(t, err)
		SetBaseOffset(raw, Offset(1000*i))
		batches = append(batches, raw)
	}
	for round := 0; round < 100; round++ {
		var d []byte
		for _, raw := range batches[:1+rng.IntN(10)] {
			switch rng.IntN(5) {
			case 0: // zeros before it, at times past a window's end
				d = append(d, make([]byte, rng.IntN(resyncWindow/2))...)
			case 1: // bytes that are mostly the magic byte
				for k := rng.IntN(500); k > 0; k-- {
					d = append(d, []byte{Magic, 0, Magic, 0xff}[rng.IntN(4)])
				}
			case 2: // a piece of another batch
				o := batches[rng.IntN(len(batches))]
				d = append(d, o[:rng.IntN(len(o))]...)
			}
			raw = bytes.Clone(raw)
			if rng.IntN(3) == 0 {
				raw[rng.IntN(len(raw))] ^= byte(1 + rng.IntN(255))
			}
			d = append(d, raw...)
		}
		end := Position(len(d))
		from := Position(rng.Int64N(int64(end) + 1))
		var accept func(*Batch) bool
		if rng.IntN(2) == 0 {
			min := Offset(1000 * rng.IntN(len(batches)))
			accept = func(b *Batch) bool { return b.BaseOffset >= min }
		}
		wantPos, wantOK := every(d, from, end, accept)
		got, ok, err := Resync(bytes.NewReader(d), from, end, 0, accept)
		require.NoError(t, err)
		require.Equal(t, wantOK, ok, "round %d: from %d of %d", round, from, end)
		if ok {
			require.Equal(t, wantPos, got.Pos, "round %d: from %d of %d", round, from, end)
		}
	}
}
