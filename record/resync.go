package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// resyncWindow is how much of a file Resync reads at a time.
const resyncWindow = 1 << 20

// Resync finds where valid batches start again after bad bytes: the first
// position in [from, end) at which a whole batch lies that parses, passes
// its CRC-32C and that accept (when not nil) takes, as the caller's offset
// rules. It reads the file a window at a time and steps from one position
// whose magic byte fits to the next (a range of zeros costs a read and a
// scan for that byte); the CRC makes a false find about as likely as 2^-32
// per position whose magic byte and length fit. The batch returned aliases
// a buffer of Resync's and is valid until the caller reads on. ok is false
// when no batch starts in the range; only an I/O error is an error.
func Resync(r io.ReaderAt, from, end Position, maxBatch int, accept func(*Batch) bool) (_ Batch, ok bool, _ error) {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	var win []byte
	var winAt Position
	var big []byte
	read := func(buf []byte, at Position) ([]byte, error) {
		n, err := r.ReadAt(buf, int64(at))
		if n < len(buf) && err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return buf[:n], nil
	}
	for p := from; end-p >= HeaderSize; p++ {
		if p < winAt || p+headerSizeUpToMagic > winAt+Position(len(win)) {
			if cap(win) == 0 {
				win = make([]byte, resyncWindow)
			}
			var err error
			if win, err = read(win[:min(int64(resyncWindow), int64(end-p))], p); err != nil {
				return Batch{}, false, err
			}
			winAt = p
			if len(win) < headerSizeUpToMagic {
				return Batch{}, false, nil
			}
		}
		h := win[p-winAt:]
		if h[16] != Magic {
			// On to the next position whose magic byte fits, in one
			// IndexByte over the window rather than a step per byte: a
			// zeroed or sparse tail of gigabytes is passed at memory
			// speed. Past the window's last candidate, the next window.
			i := bytes.IndexByte(h[17:], Magic)
			if i < 0 {
				i = len(h) - 17
			}
			p += Position(i) // and the loop's p++
			continue
		}
		size := int64(int32(binary.BigEndian.Uint32(h[8:]))) + LogOverhead
		if size < HeaderSize || size > int64(end-p) || size > int64(maxBatch) {
			continue
		}
		var b []byte
		if int64(len(h)) >= size {
			b = h[:size]
		} else {
			if int64(cap(big)) < size {
				big = make([]byte, size)
			}
			var err error
			if b, err = read(big[:size], p); err != nil {
				return Batch{}, false, err
			}
			if int64(len(b)) < size {
				continue
			}
		}
		batch, err := ParseBatch(b, p)
		if err != nil || accept != nil && !accept(&batch) {
			continue
		}
		return batch, true, nil
	}
	return Batch{}, false, nil
}
