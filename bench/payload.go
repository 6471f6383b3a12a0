package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"

	"github.com/logfs/logfs/storage"
)

// payload generates the value of every offset, so that anything read back
// is checked without keeping what was written:
//
//	value(off) = hex16(off) ++ pool[start(off) : start(off)+size-16]
//
// The pool holds letters and digits only: values are text lines without
// '\n', so the mount's rendering (value, '\n') is one line per record and
// line tools (tail, head, the append file) see records. A payload is
// read-only once made: any number of goroutines may check values with it.
type payload struct {
	size int
	pool []byte
}

const poolBytes = 1 << 20

func newPayload(size int, seed uint64) *payload {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	r := rand.New(rand.NewPCG(seed, uint64(size)))
	pool := make([]byte, poolBytes+size)
	for i := range pool {
		pool[i] = alphabet[r.IntN(len(alphabet))]
	}
	return &payload{size: size, pool: pool}
}

func (p *payload) start(off int64) int {
	return int(uint64(off) * 2654435761 % poolBytes)
}

func putHex16(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		dst[i] = digits[v&15]
		v >>= 4
	}
}

func (p *payload) fill(dst []byte, off int64) {
	putHex16(dst, uint64(off))
	s := p.start(off)
	copy(dst[16:p.size], p.pool[s:s+p.size-16])
}

// appendLine appends the Values rendering (storage.Values) of offset off:
// value and '\n'. It is written out here, not taken from storage: the
// checks compare logfs's rendering with an independent one.
func (p *payload) appendLine(dst []byte, off int64) []byte {
	n := len(dst)
	dst = slices.Grow(dst, p.size+1)[:n+p.size+1]
	p.fill(dst[n:], off)
	dst[n+p.size] = '\n'
	return dst
}

func (p *payload) check(v []byte, off int64) error {
	if len(v) != p.size {
		return fmt.Errorf("offset %d: %d bytes, want %d", off, len(v), p.size)
	}
	if got, err := strconv.ParseUint(string(v[:16]), 16, 64); err != nil || int64(got) != off {
		return fmt.Errorf("offset %d: holds the value of offset %q", off, v[:16])
	}
	if s := p.start(off); !bytes.Equal(v[16:], p.pool[s:s+p.size-16]) {
		return fmt.Errorf("offset %d: value bytes differ", off)
	}
	return nil
}

// quick checks length, leading offset and the last 8 bytes: cheap enough
// to run inside a timed sequential read.
func (p *payload) quick(v []byte, off int64) bool {
	if len(v) != p.size {
		return false
	}
	var h [16]byte
	putHex16(h[:], uint64(off))
	s := p.start(off) + p.size - 24
	return string(v[:16]) == string(h[:]) && string(v[p.size-8:]) == string(p.pool[s:s+8])
}

// timestampOf is the timestamp of the record at off: 2 ms apart, so that a
// time between two records has an answer too.
func timestampOf(off int64) int64 { return 1_700_000_000_000 + 2*off }

// batchValues holds one batch of values, reused across batches.
type batchValues struct {
	vals [][]byte
	recs []storage.Record
}

func newBatchValues(size, n int) *batchValues {
	b := &batchValues{vals: make([][]byte, n), recs: make([]storage.Record, n)}
	mem := make([]byte, size*n)
	for i := range b.vals {
		b.vals[i] = mem[i*size : (i+1)*size : (i+1)*size]
	}
	return b
}

func (b *batchValues) prepare(p *payload, first int64, n int) ([][]byte, []storage.Record) {
	for i := 0; i < n; i++ {
		p.fill(b.vals[i], first+int64(i))
		b.recs[i] = storage.Record{Timestamp: timestampOf(first + int64(i)), Value: b.vals[i]}
	}
	return b.vals[:n], b.recs[:n]
}

// expectWriter checks a byte stream against the Values rendering of the
// records [next, end) of a payload, as it arrives (a tool's output). It
// never fails a write: done reports the first difference.
type expectWriter struct {
	p         *payload
	next, end int64
	pending   []byte
	buf       []byte
	n         int64
	err       error
}

func newExpectWriter(p *payload, from, to int64) *expectWriter {
	return &expectWriter{p: p, next: from, end: to}
}

func (w *expectWriter) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 && w.err == nil {
		if len(w.pending) == 0 {
			if w.next >= w.end {
				w.err = fmt.Errorf("%d bytes more than the %d expected", len(b), w.n)
				break
			}
			w.buf = w.buf[:0]
			for w.next < w.end && len(w.buf) < 64<<10 {
				w.buf = w.p.appendLine(w.buf, w.next)
				w.next++
			}
			w.pending = w.buf
		}
		k := min(len(b), len(w.pending))
		if !bytes.Equal(b[:k], w.pending[:k]) {
			i := 0
			for b[i] == w.pending[i] {
				i++
			}
			w.err = fmt.Errorf("byte %d differs from the rendering of what was written", w.n+int64(i))
		}
		b, w.pending, w.n = b[k:], w.pending[k:], w.n+int64(k)
	}
	return total, nil
}

// done returns the first difference, or a missing end.
func (w *expectWriter) done() error {
	if w.err == nil && (len(w.pending) > 0 || w.next < w.end) {
		w.err = fmt.Errorf("output ends after %d bytes, before the last record", w.n)
	}
	return w.err
}

// repeatWriter checks `copies` repetitions of the rendering of [0, n).
type repeatWriter struct {
	p      *payload
	n      int64
	left   int
	cur    *expectWriter
	copies int
}

func newRepeatWriter(p *payload, n int64, copies int) *repeatWriter {
	return &repeatWriter{p: p, n: n, left: copies - 1, cur: newExpectWriter(p, 0, n), copies: copies}
}

func (w *repeatWriter) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 && w.cur.err == nil {
		k := len(b)
		if rest := (w.cur.end-w.cur.next)*int64(w.p.size+1) + int64(len(w.cur.pending)); int64(k) > rest {
			k = int(rest)
		}
		if k == 0 {
			if w.left == 0 {
				_, _ = w.cur.Write(b) // reports the excess
				break
			}
			w.left--
			w.cur = newExpectWriter(w.p, 0, w.n)
			continue
		}
		_, _ = w.cur.Write(b[:k])
		b = b[k:]
	}
	return total, nil
}

func (w *repeatWriter) done() error {
	if err := w.cur.done(); err != nil {
		return err
	}
	if w.left > 0 {
		return fmt.Errorf("%d of %d copies missing", w.left, w.copies)
	}
	return nil
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(b []byte) (int, error) { *c += countWriter(len(b)); return len(b), nil }

// writeRendering writes the Values rendering of [from, to) to a new file.
func writeRendering(path string, p *payload, from, to int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var line []byte
	for off := from; off < to; off++ {
		line = p.appendLine(line[:0], off)
		if _, err := w.Write(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
