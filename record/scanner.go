package record

import (
	"errors"
	"fmt"
	"io"
)

// Scanner defaults.
const (
	// DefaultReadAhead is how much of the file a Scanner reads at a time.
	DefaultReadAhead = 256 << 10
	// DefaultMaxBatch bounds the size of one batch a Scanner accepts.
	DefaultMaxBatch = 64 << 20
)

// ScanOptions tune a Scanner; the zero value gives the defaults.
type ScanOptions struct {
	ReadAhead int // bytes read by the first ReadAt; 0 means DefaultReadAhead
	// MaxReadAhead, when larger than ReadAhead, lets each further ReadAt
	// read twice as much as the one before, up to this: a scan that starts
	// with a lookup reads little, one that keeps going reads in big chunks.
	MaxReadAhead int
	MaxBatch     int  // largest batch accepted; 0 means DefaultMaxBatch
	HeadersOnly  bool // read and check headers only: Batch().Bytes is nil, no CRC check
	SkipCRC      bool // do not verify CRCs (the caller will, or trusts the data)
}

// Scanner reads the batches of a .log file in order, between two positions:
//
//	s := record.NewScanner(f, 0, size, record.ScanOptions{})
//	for s.Next() {
//		b := s.Batch()
//		…
//	}
//	if err := s.Err(); err != nil { … }   // *CorruptError
//	valid := s.Pos()                       // end of the last good batch
//
// A batch that runs past the end position ends the scan with ErrTruncated
// (a torn tail); a batch that breaks a rule ends it with ErrCorrupt or
// ErrUnsupportedMagic. Either way Pos is where the bad bytes begin, which is
// where recovery cuts the file.
type Scanner struct {
	r      io.ReaderAt
	opts   ScanOptions
	pos    Position // start of the next batch
	end    Position
	buf    []byte   // bytes of the file from bufPos on
	bufPos Position //
	ahead  int      // size of the next ReadAt
	batch  Batch
	err    error
}

// NewScanner returns a scanner over r from start to end.
func NewScanner(r io.ReaderAt, start, end Position, opts ScanOptions) *Scanner {
	s := &Scanner{}
	s.Reset(r, start, end, opts)
	return s
}

// Reset points the scanner at a new range, keeping its buffer.
func (s *Scanner) Reset(r io.ReaderAt, start, end Position, opts ScanOptions) {
	*s = Scanner{r: r, pos: start, end: end, buf: s.buf[:0], bufPos: start}
	s.setOptions(opts)
}

func (s *Scanner) setOptions(opts ScanOptions) {
	if opts.ReadAhead <= 0 {
		opts.ReadAhead = DefaultReadAhead
	}
	if opts.MaxReadAhead < opts.ReadAhead {
		opts.MaxReadAhead = opts.ReadAhead
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	s.opts, s.ahead = opts, opts.ReadAhead
}

// Seek moves the scanner to pos, inside the range it was reset to, with new
// options. Bytes already read that cover pos are used again: a lookup that
// walked headers to a batch goes on to read it without reading it twice.
func (s *Scanner) Seek(pos Position, opts ScanOptions) {
	s.pos, s.err = pos, nil
	s.setOptions(opts)
}

// Extend moves the end of the range to end, for a file that grew; what was
// read stays valid, as bytes are only ever appended to a log.
func (s *Scanner) Extend(end Position) {
	if end > s.end {
		s.end = end
	}
}

// Next advances to the next batch. It returns false at the end of the range
// or at the first invalid batch.
func (s *Scanner) Next() bool {
	if s.err != nil || s.pos >= s.end {
		return false
	}
	if s.end-s.pos < headerSizeUpToMagic {
		s.fail(&CorruptError{Pos: s.pos, Reason: fmt.Sprintf("%d bytes left, too few for a batch", s.end-s.pos), Err: ErrTruncated})
		return false
	}
	head, err := s.window(headerSizeUpToMagic)
	if err != nil {
		s.fail(err)
		return false
	}
	size, err := peekSize(head, s.pos)
	if err != nil {
		s.fail(err)
		return false
	}
	if size > int64(s.end-s.pos) {
		s.fail(&CorruptError{Pos: s.pos, Reason: fmt.Sprintf("batch of %d bytes, %d left", size, s.end-s.pos), Err: ErrTruncated})
		return false
	}
	if size > int64(s.opts.MaxBatch) {
		s.fail(&CorruptError{Pos: s.pos, Reason: fmt.Sprintf("batch of %d bytes, limit %d", size, s.opts.MaxBatch), Err: ErrTooLarge})
		return false
	}
	need := int(size)
	if s.opts.HeadersOnly {
		need = HeaderSize
	}
	b, err := s.window(need)
	if err != nil {
		s.fail(err)
		return false
	}
	h, err := ParseHeader(b, s.pos)
	if err != nil {
		s.fail(err)
		return false
	}
	s.batch = Batch{BatchHeader: h, Pos: s.pos}
	if !s.opts.HeadersOnly {
		s.batch.Bytes = b[:size:size]
		if !s.opts.SkipCRC {
			if err := s.batch.Verify(); err != nil {
				s.fail(err)
				return false
			}
		}
	}
	s.pos += Position(size)
	return true
}

// Batch returns the current batch. Its Bytes alias the scanner's buffer and
// are valid until the next call to Next.
func (s *Scanner) Batch() *Batch { return &s.batch }

// Err returns the error that stopped the scan, or nil at a clean end.
func (s *Scanner) Err() error { return s.err }

// Pos returns the position after the last batch returned: after a failed
// scan, the first byte that is not part of a valid batch.
func (s *Scanner) Pos() Position { return s.pos }

func (s *Scanner) fail(err error) { s.err = err }

// window returns n bytes of the file starting at s.pos, reading ahead.
// Bytes at s.pos that an earlier read already brought in (the start of a
// batch that ran past the end of the window) are kept, not read again: a
// batch as large as the read-ahead would otherwise be read twice.
func (s *Scanner) window(n int) ([]byte, error) {
	off := int(s.pos - s.bufPos)
	if s.pos >= s.bufPos && off+n <= len(s.buf) {
		return s.buf[off : off+n], nil
	}
	want := max(n, s.ahead)
	s.ahead = min(2*s.ahead, s.opts.MaxReadAhead)
	want = int(min(int64(want), int64(s.end-s.pos)))
	if want < n {
		return nil, &CorruptError{Pos: s.pos, Reason: "range ends inside a batch", Err: ErrTruncated}
	}
	var kept []byte
	if s.pos >= s.bufPos && off < len(s.buf) {
		kept = s.buf[off:]
	}
	buf := s.buf
	if cap(buf) < want {
		buf = make([]byte, want)
	}
	buf = buf[:want]
	if off > 0 || cap(s.buf) < want {
		copy(buf, kept) // a memmove of what is already there beats a pread of it
	}
	s.buf, s.bufPos = buf, s.pos
	got, err := s.r.ReadAt(s.buf[len(kept):], int64(s.pos)+int64(len(kept)))
	got += len(kept)
	if got < n {
		s.buf = s.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			return nil, &CorruptError{Pos: s.pos, Reason: "file ends inside a batch", Err: ErrTruncated}
		}
		return nil, err
	}
	s.buf = s.buf[:got]
	return s.buf[:n], nil
}
