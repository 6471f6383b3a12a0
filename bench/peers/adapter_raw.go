package peers

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The raw baseline is the PHYSICAL FLOOR, not an indexed log: the same value
// bytes, each behind an 8-byte little-endian length, written with one
// write(2) per batch to a single file (no segments), read back with large
// sequential pread(2)s, and "looked up" with one pread(2) at a position the
// process keeps in memory. Every other log is reported as a multiple of it.
//
//	raw.log: [len u64 LE][value] [len u64 LE][value] ...
//
// Opening an existing file rebuilds the in-memory positions with one
// sequential scan (there is nothing else to open from), so its reopen figure
// is the cost of having no index at all.

func init() { Register(RawName, openRaw) }

const (
	rawFileName  = "raw.log"
	rawPrefix    = 8
	rawChunkSize = 1 << 20 // bytes per sequential read
)

type rawLog struct {
	f    *os.File
	pos  []int64 // offset -> file position of its length prefix
	end  int64   // file size = position of the next record
	wbuf []byte  // one batch, framed
	rbuf []byte  // lookup buffer
	cbuf []byte  // sequential read buffer
}

func openRaw(dir string, _ Config) (Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, rawFileName), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l := &rawLog{f: f, cbuf: make([]byte, rawChunkSize)}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	l.end = st.Size()
	if _, err := l.scan(func(pos int64, _ []byte) { l.pos = append(l.pos, pos) }); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

func (l *rawLog) Name() string { return RawName }

func (l *rawLog) Append(batch [][]byte, _ []int64) error {
	b := l.wbuf[:0]
	pos := l.end
	for _, v := range batch {
		l.pos = append(l.pos, pos)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(v)))
		b = append(b, v...)
		pos += int64(rawPrefix + len(v))
	}
	l.wbuf = b
	if _, err := l.f.Write(b); err != nil { // one write(2)
		return err
	}
	l.end = pos
	return nil
}

func (l *rawLog) Sync() error { return l.f.Sync() }

func (l *rawLog) LookupFirst(off int64) ([]byte, error) {
	if off < 0 || off >= int64(len(l.pos)) {
		return nil, fmt.Errorf("raw: offset %d out of range [0,%d)", off, len(l.pos))
	}
	start, end := l.pos[off], l.end
	if off+1 < int64(len(l.pos)) {
		end = l.pos[off+1]
	}
	n := int(end - start)
	if cap(l.rbuf) < n {
		l.rbuf = make([]byte, n)
	}
	b := l.rbuf[:n]
	if _, err := l.f.ReadAt(b, start); err != nil { // one pread(2)
		return nil, err
	}
	if got := binary.LittleEndian.Uint64(b); got != uint64(n-rawPrefix) {
		return nil, fmt.Errorf("%w: offset %d: length %d, want %d", ErrCorrupt, off, got, n-rawPrefix)
	}
	return b[rawPrefix:], nil
}

func (l *rawLog) LookupTime(int64) (int64, error) { return 0, ErrUnsupported }

func (l *rawLog) ReadAll(fn func(v []byte)) (int, error) {
	return l.scan(func(_ int64, v []byte) { fn(v) })
}

// scan reads [0, l.end) in rawChunkSize preads and calls fn for every record
// with its position and value.
func (l *rawLog) scan(fn func(pos int64, v []byte)) (int, error) {
	buf := l.cbuf
	var (
		base  int64 // file position of buf[0]
		have  int   // valid bytes in buf
		count int
	)
	for base+int64(have) < l.end {
		want := len(buf) - have
		if rest := l.end - base - int64(have); rest < int64(want) {
			want = int(rest)
		}
		n, err := l.f.ReadAt(buf[have:have+want], base+int64(have))
		have += n
		if err != nil && err != io.EOF {
			return count, err
		}
		if n == 0 {
			return count, fmt.Errorf("%w: short read at %d", ErrCorrupt, base+int64(have))
		}
		p := 0
		for have-p >= rawPrefix {
			sz := int(binary.LittleEndian.Uint64(buf[p:]))
			if sz < 0 || int64(sz) > l.end {
				return count, fmt.Errorf("%w: length %d at %d", ErrCorrupt, sz, base+int64(p))
			}
			if have-p-rawPrefix < sz {
				if rawPrefix+sz > len(buf) { // record larger than the buffer
					nb := make([]byte, rawPrefix+sz)
					copy(nb, buf[p:have])
					buf, l.cbuf = nb, nb
					base += int64(p)
					have -= p
					p = 0
				}
				break
			}
			fn(base+int64(p), buf[p+rawPrefix:p+rawPrefix+sz])
			count++
			p += rawPrefix + sz
		}
		copy(buf, buf[p:have])
		base += int64(p)
		have -= p
	}
	if have != 0 {
		return count, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, have)
	}
	return count, nil
}

func (l *rawLog) Close() error { return l.f.Close() }
