package storage

import (
	"fmt"
	"io"
	"sync"

	"github.com/logfs/logfs/record"
)

// viewChunk is how much a view renders ahead for sequential reads.
const viewChunk = 256 << 10

// View is the rendering of a partition's records from a starting offset on,
// as one growing byte stream: what the mount's offset/N and time/T files
// serve and what consume prints. Its size is exact, it grows as records
// arrive, and ReadAt at any position returns the same bytes a sequential
// read would, without rendering from the start: each segment's view index
// places rendered positions in the log.
//
// Positions are counted in the rendering of whole segments: the view starts
// skip bytes into the rendering of the segment holding its start offset.
// A View is safe for concurrent use; reads on one View are serialised.
type View struct {
	p      *Partition
	format Format

	mu     sync.Mutex
	segs   []*segment // pinned; segs[0] holds start
	totals []int64    // rendered size of each frozen segment, or -1
	skip   int64      // rendered bytes of segs[0] below start
	closed bool

	// chunk caches rendered bytes [chunkAt, chunkAt+len(chunk)) of
	// segs[chunkSeg], which end at log position chunkEnd, a batch boundary.
	chunk    []byte
	chunkSeg int
	chunkAt  int64
	chunkEnd record.Position
	sc       record.Scanner
	scSeg    int
	scEnd    record.Position
	scOK     bool
	scEnded  record.Offset // where the last batch sc read ended (see Reader.ended)
	dec      record.Decoder
}

// NewView opens a view from offset start, which must lie between the log
// start and end offsets (the end gives an empty view that grows).
func (p *Partition) NewView(f Format, start record.Offset) (*View, error) {
	if lo, hi := p.StartOffset(), p.EndOffset(); start < lo || start > hi {
		return nil, fmt.Errorf("%s offset %d (log holds %d to %d): %w", p, start, lo, hi, ErrOffsetOutOfRange)
	}
	for {
		segs := p.segments()
		s := segs[max(floorSegment(segs, start), 0)]
		if !s.acquire() {
			continue
		}
		skip, err := s.views.get(s, f).renderedBefore(s, start)
		if err != nil {
			s.release()
			return nil, err
		}
		return &View{p: p, format: f, segs: []*segment{s}, totals: []int64{-1}, skip: skip, chunkSeg: -1, scSeg: -1}, nil
	}
}

// refresh pins the segments rolled since the view last looked.
func (v *View) refresh() {
	last := v.segs[len(v.segs)-1].base
	for _, s := range v.p.segments() {
		if s.base > last && s.acquire() {
			v.segs = append(v.segs, s)
			v.totals = append(v.totals, -1)
			last = s.base
		}
	}
}

// total returns the rendered size of segs[i] as of now.
func (v *View) total(i int) (int64, error) {
	if t := v.totals[i]; t >= 0 {
		return t, nil
	}
	s := v.segs[i]
	frozen := s.frozen.Load() // read before the size, so a frozen size is final
	vi := s.views.get(s, v.format)
	if err := vi.extend(s, record.Position(s.size.Load())); err != nil {
		return 0, err
	}
	_, t := vi.snapshot()
	if frozen {
		v.totals[i] = t
	}
	return t, nil
}

// Size returns the view's current length in bytes.
func (v *View) Size() (int64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return 0, ErrClosed
	}
	v.refresh()
	n := -v.skip
	for i := range v.segs {
		t, err := v.total(i)
		if err != nil {
			return 0, err
		}
		n += t
	}
	return n, nil
}

// ReadAt reads rendered bytes at off. It returns io.EOF when off is at or
// beyond the current end; a short read means the end was reached.
func (v *View) ReadAt(b []byte, off int64) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	at := off + v.skip // in the rendering of segs[0], segs[1], … from segs[0]'s start
	i, segStart := 0, int64(0)
	for {
		t, err := v.total(i)
		if err != nil {
			return 0, err
		}
		if at < segStart+t {
			break
		}
		if i == len(v.segs)-1 {
			v.refresh()
			if i == len(v.segs)-1 {
				return 0, io.EOF
			}
		}
		segStart += t
		i++
	}
	n := 0
	local := at - segStart
	for n < len(b) {
		if v.format == Values && v.chunkSeg == i && local == v.chunkAt+int64(len(v.chunk)) {
			// Reading on from where the last read stopped: render straight
			// into b, one copy fewer than going through the chunk.
			k, err := v.renderInto(i, local, b[n:])
			if err != nil {
				return n, err
			}
			n += k
			local += int64(k)
			if k > 0 || len(v.chunk) > 0 {
				continue
			}
		}
		chunk, err := v.renderAt(i, local, len(b)-n)
		if err != nil {
			return n, err
		}
		if len(chunk) == 0 {
			if i == len(v.segs)-1 {
				v.refresh()
				if i == len(v.segs)-1 {
					break
				}
			}
			i, local = i+1, 0
			continue
		}
		c := copy(b[n:], chunk)
		n += c
		local += int64(c)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// renderAt returns rendered bytes of segs[i] from local on (at least want of
// them when the segment has them), or none at the segment's current end.
func (v *View) renderAt(i int, local int64, want int) ([]byte, error) {
	if v.chunkSeg == i && local >= v.chunkAt && local < v.chunkAt+int64(len(v.chunk)) {
		return v.chunk[local-v.chunkAt:], nil
	}
	s := v.segs[i]
	sequential := v.chunkSeg == i && local == v.chunkAt+int64(len(v.chunk))
	var from record.Position
	var at int64
	ended := s.base // a lower bound for the base offset of the batch at from
	if sequential {
		from, at = v.chunkEnd, local // carry on after the chunk
		if v.scSeg == i && v.sc.Pos() == from {
			ended = v.scEnded
		}
	} else {
		e := s.views.get(s, v.format).locate(local)
		from, at, ended = e.pos, e.rendered, e.base
	}
	v.chunk, v.chunkSeg = v.chunk[:0], i
	size := record.Position(s.size.Load())
	if v.scSeg != i || !v.scOK || v.sc.Pos() != from || v.scEnd != size {
		// Small first reads, growing as the scan goes on: a read in the
		// middle of a segment (head, tail, a pread) touches little.
		v.sc.Reset(s.log, from, size, readerScan) // pread: see mappedReadMax
		v.scSeg, v.scEnd, v.scOK, v.scEnded = i, size, true, ended
	}
	// Render ahead only for a reader that reads on: a random read renders
	// what it asked for, and a Values one only up to the batch that holds
	// its first byte, as ReadAt renders the rest straight into its buffer
	// (renderInto) instead of through the chunk.
	limit := want
	switch {
	case sequential:
		limit = max(want, viewChunk)
	case v.format == Values:
		limit = 1
	}
	for {
		if !v.sc.Next() {
			v.scOK = false
			if err := v.sc.Err(); err != nil {
				return nil, record.WithFile(err, s.logPath())
			}
			break
		}
		b, err := v.scanned(s)
		if err != nil {
			return nil, err
		}
		if !b.Attributes.Control() {
			it, err := v.dec.Records(b)
			if err != nil {
				return nil, record.WithFile(err, s.logPath())
			}
			for it.Next() {
				r := it.Record()
				if len(v.chunk) == 0 && v.format == Values && at+int64(len(r.Value))+1 <= local {
					// Wholly before the wanted byte, and its size is
					// known without rendering it: skip it.
					at += int64(len(r.Value)) + 1
					continue
				}
				v.chunk = v.format.Append(v.chunk, r)
			}
			if err := it.Err(); err != nil {
				return nil, record.WithFile(err, s.logPath())
			}
		}
		if at+int64(len(v.chunk)) <= local {
			// Still before the wanted byte: drop this batch's rendering.
			at += int64(len(v.chunk))
			v.chunk = v.chunk[:0]
			continue
		}
		if at+int64(len(v.chunk))-local >= int64(limit) {
			break
		}
	}
	v.chunkAt, v.chunkEnd = at, v.sc.Pos()
	if local < v.chunkAt || local >= v.chunkAt+int64(len(v.chunk)) {
		return nil, nil
	}
	return v.chunk[local-v.chunkAt:], nil
}

// renderInto renders the values of segs[i] from local on, which is where
// the chunk ends, straight into dst, while whole records fit; the record
// that does not and the rest of its batch go to the chunk for the next
// read. It returns how many bytes it rendered into dst; 0 with an empty
// chunk means the segment's end.
func (v *View) renderInto(i int, local int64, dst []byte) (int, error) {
	s := v.segs[i]
	size := record.Position(s.size.Load())
	if v.scSeg != i || !v.scOK || v.sc.Pos() != v.chunkEnd {
		ended := s.base
		if v.scSeg == i && v.sc.Pos() == v.chunkEnd {
			ended = v.scEnded // where the batch before chunkEnd ended
		}
		v.sc.Reset(s.log, v.chunkEnd, size, readerScan)
		v.scSeg, v.scOK, v.scEnded = i, true, ended
	}
	v.sc.Extend(size)
	v.scEnd = size
	v.chunk = v.chunk[:0]
	n, spilled := 0, false
	for !spilled && n < len(dst) {
		if !v.sc.Next() {
			v.scOK = false
			if err := v.sc.Err(); err != nil {
				return n, record.WithFile(err, s.logPath())
			}
			break
		}
		b, err := v.scanned(s)
		if err != nil {
			return n, err
		}
		if b.Attributes.Control() {
			continue
		}
		it, err := v.dec.Records(b)
		if err != nil {
			return n, record.WithFile(err, s.logPath())
		}
		for it.Next() {
			r := it.Record()
			if spilled || n+len(r.Value)+1 > len(dst) {
				spilled = true
				v.chunk = Values.Append(v.chunk, r)
				continue
			}
			n += copy(dst[n:], r.Value)
			dst[n] = '\n'
			n++
		}
		if err := it.Err(); err != nil {
			return n, record.WithFile(err, s.logPath())
		}
	}
	v.chunkAt, v.chunkEnd = local+int64(n), v.sc.Pos()
	return n, nil
}

// scanned returns the batch v.sc just read from s, checked to follow the
// one before it (record.Batch.CheckFollows); a batch that does not ends
// the scan.
func (v *View) scanned(s *segment) (*record.Batch, error) {
	b := v.sc.Batch()
	if err := b.CheckFollows(s.base, v.scEnded); err != nil {
		v.scOK = false
		return nil, record.WithFile(err, s.logPath())
	}
	v.scEnded = b.NextOffset()
	return b, nil
}

// Close releases the view's segments.
func (v *View) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	for _, s := range v.segs {
		s.release()
	}
	v.segs = nil
	return nil
}
