package peers

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// MinRecordSize is the smallest record the harness writes: every value
// starts with its own offset (8 bytes) and ends with 8 bytes that depend on it.
const MinRecordSize = 16

// payload generates the value of every offset deterministically, so any
// value read back can be checked without keeping what was written:
//
//	value(off) = [off u64 LE] ++ pool[start(off) : start(off)+size-8]
//
// where pool is a fixed pseudo-random buffer; neighbouring offsets get
// different bytes, so a log returning the wrong record fails the check.
type payload struct {
	size int
	pool []byte
}

const payloadPoolBytes = 1 << 20

func newPayload(size int, seed uint64) *payload {
	if size < MinRecordSize {
		panic(fmt.Sprintf("peers: record size %d < %d", size, MinRecordSize))
	}
	r := rand.New(rand.NewPCG(seed, uint64(size)))
	pool := make([]byte, payloadPoolBytes+size)
	for i := 0; i+8 <= len(pool); i += 8 {
		binary.LittleEndian.PutUint64(pool[i:], r.Uint64())
	}
	return &payload{size: size, pool: pool}
}

func (p *payload) start(off int64) int {
	return int(uint64(off) * 2654435761 % uint64(payloadPoolBytes))
}

// fill writes value(off) into dst, which must have length p.size.
func (p *payload) fill(dst []byte, off int64) {
	binary.LittleEndian.PutUint64(dst, uint64(off))
	s := p.start(off)
	copy(dst[8:], p.pool[s:s+p.size-8])
}

// check compares v with value(off) byte for byte.
func (p *payload) check(v []byte, off int64) error {
	if len(v) != p.size {
		return fmt.Errorf("%w: offset %d: %d bytes, want %d", ErrMismatch, off, len(v), p.size)
	}
	if got := int64(binary.LittleEndian.Uint64(v)); got != off {
		return fmt.Errorf("%w: offset %d: holds the value of offset %d", ErrMismatch, off, got)
	}
	s := p.start(off)
	if !bytes.Equal(v[8:], p.pool[s:s+p.size-8]) {
		return fmt.Errorf("%w: offset %d: value bytes differ", ErrMismatch, off)
	}
	return nil
}

// quick checks length, the leading offset and the last 8 bytes: cheap
// enough to run inside a timed sequential read without dominating it.
func (p *payload) quick(v []byte, off int64) bool {
	if len(v) != p.size || int64(binary.LittleEndian.Uint64(v)) != off {
		return false
	}
	s := p.start(off) + p.size - 16
	return binary.LittleEndian.Uint64(v[p.size-8:]) == binary.LittleEndian.Uint64(p.pool[s:])
}

// batchBuf holds one batch of values and timestamps, reused across batches
// (every adapter copies values before Append returns).
type batchBuf struct {
	vals [][]byte
	ts   []int64
}

func newBatchBuf(size, n int) *batchBuf {
	b := &batchBuf{vals: make([][]byte, n), ts: make([]int64, n)}
	mem := make([]byte, size*n)
	for i := range b.vals {
		b.vals[i] = mem[i*size : (i+1)*size : (i+1)*size]
	}
	return b
}

// TimeBase and TimeStep define the timestamp of every offset, in Unix
// milliseconds (Kafka's CreateTime unit, so logs that store milliseconds can
// take them as they are): ts(off) = TimeBase + off*TimeStep, strictly
// increasing, with room for a target between two records.
const (
	TimeBase = int64(1_700_000_000_000) // 2023-11-14T22:13:20Z
	TimeStep = int64(2)
)

func tsOf(off int64) int64 { return TimeBase + off*TimeStep }

// prepare fills b with the n records starting at offset first.
func (b *batchBuf) prepare(p *payload, first int64, n int) ([][]byte, []int64) {
	for i := 0; i < n; i++ {
		p.fill(b.vals[i], first+int64(i))
		b.ts[i] = tsOf(first + int64(i))
	}
	return b.vals[:n], b.ts[:n]
}
