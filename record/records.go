package record

import (
	"fmt"
)

// Record is one record of a batch. Key, Value and the header slices alias the
// batch or the Decoder's buffer: they are valid until the iterator that
// produced them moves on, and must be copied to be kept.
type Record struct {
	Offset    Offset
	Timestamp int64
	Key       []byte // nil for a null key
	Value     []byte // nil for a null value (a tombstone)
	Headers   []Header
}

// Header is a record header. Its key is never null; its value may be.
type Header struct {
	Key   []byte
	Value []byte // nil for a null value
}

// RecordIter iterates the records of one batch:
//
//	it, err := dec.Records(&batch)
//	for it.Next() {
//		r := it.Record()
//		…
//	}
//	if err := it.Err(); err != nil { … }
type RecordIter struct {
	h       BatchHeader
	pos     Position // batch position, for errors
	data    []byte   // the records, decompressed
	off     int
	read    int32
	rec     Record
	headers *[]Header // the Decoder's, reused from batch to batch
	err     error
	partial bool // data may end before the batch does (RecordsIn)
	cut     bool // Next stopped at a record data does not hold whole
}

// RecordsIn returns an iterator over the records of the uncompressed batch
// h at pos, from its record number index on, in data: the batch's records
// bytes (those after its header) from where that record starts, which may
// end before the batch does. Next then stops, with no error, at the first
// record data does not hold whole, and Cut says so; Off tells where it
// begins, so that the caller can read on from there. The caller must have
// checked the batch (its CRC covers every record); the records are
// decoded as Decoder.Records decodes them.
func RecordsIn(h *BatchHeader, pos Position, data []byte, index int32) RecordIter {
	return RecordIter{h: *h, pos: pos, data: data, read: index, partial: true}
}

// Index returns the number in the batch of the record the next Next
// decodes (the records decoded so far, for an iterator of Decoder.Records).
func (it *RecordIter) Index() int32 { return it.read }

// Off returns where in the iterator's data the record the next Next
// decodes begins.
func (it *RecordIter) Off() int { return it.off }

// Cut reports whether Next stopped at a record that the data of a
// RecordsIn iterator does not hold whole (or at the end of that data
// before the batch's last record).
func (it *RecordIter) Cut() bool { return it.cut }

// Next decodes the next record. It returns false at the end of the batch or
// on an error, which Err then reports.
func (it *RecordIter) Next() bool {
	if it.err != nil {
		return false
	}
	if it.read == it.h.RecordCount {
		if it.off != len(it.data) && !it.partial {
			it.err = corruptf(it.pos, "%d bytes after the last of %d records", len(it.data)-it.off, it.h.RecordCount)
		}
		return false
	}
	if it.partial && !it.whole() {
		it.cut = true
		return false
	}
	if err := it.decode(); err != nil {
		it.err = err
		return false
	}
	it.read++
	return true
}

// AppendValues renders records from the next on into dst[n:], each as its
// value and '\n' (a null value as an empty line), while they fit whole,
// and returns where the rendering ends. It stops, leaving the record to
// Next, at the end of the batch, at a record that does not fit, at one
// that does not have the common shape (see decodeCommon) and, for
// RecordsIn, at one the data does not hold whole: Next then decodes it,
// refuses it or stops, as it would have. Each record it renders is
// decoded and checked as Next would; what Record returns afterwards is
// undefined until the next Next. It saves Next's calls and checks
// between records: a 1 MiB batch of 100-byte values is ten thousand of
// them, and rendering values is most of what a mount does.
func (it *RecordIter) AppendValues(dst []byte, n int) int {
	if it.err != nil {
		return n
	}
	for it.read < it.h.RecordCount {
		off := it.off
		if !it.decodeCommon() {
			break
		}
		v := it.rec.Value
		if len(v) >= len(dst)-n {
			it.off = off // does not fit: Next decodes it again
			break
		}
		n += copy(dst[n:], v)
		dst[n] = '\n'
		n++
		it.read++
	}
	return n
}

// SkipValues passes over the records AppendValues would render into max
// bytes, without rendering them, and returns how many bytes they take:
// what a reader that only counts values' bytes needs. Its loop is
// AppendValues' without the copy: one step shared by both is a call per
// record (over the inlining budget), which cost 5-10 % of a render in
// BenchmarkViewSequential and BenchmarkViewFirstReadBig.
func (it *RecordIter) SkipValues(max int64) int64 {
	if it.err != nil {
		return 0
	}
	var n int64
	for it.read < it.h.RecordCount {
		off := it.off
		if !it.decodeCommon() {
			break
		}
		size := int64(len(it.rec.Value)) + 1
		if size > max-n {
			it.off = off // does not fit: Next decodes it again
			break
		}
		n += size
		it.read++
	}
	return n
}

// Record returns the current record; see Record for how long it stays valid.
func (it *RecordIter) Record() *Record { return &it.rec }

// Err returns the error that stopped the iteration, if any.
func (it *RecordIter) Err() error { return it.err }

// Header returns the header of the batch being iterated.
func (it *RecordIter) Header() *BatchHeader { return &it.h }

// whole reports whether the data holds the next record whole.
func (it *RecordIter) whole() bool {
	d := it.data[it.off:]
	length, n := varint(d, 5)
	if n <= 0 {
		return len(d) >= 5 // a varint that is bad, not cut: decode says so
	}
	return length < 0 || int64(len(d)-n) >= length
}

func (it *RecordIter) decode() error {
	if it.decodeCommon() {
		return nil
	}
	return it.decodeFields()
}

// decodeFields decodes the next record field by field, each checked.
func (it *RecordIter) decodeFields() error {
	d := it.data[it.off:]
	length, n := varint(d, 5)
	if n <= 0 || length < 0 || int64(len(d)-n) < length {
		return corruptf(it.pos, "record %d: bad length", it.read)
	}
	body := d[n : n+int(length)]
	it.off += n + int(length)

	p := 1 // attributes byte, unused
	if len(body) < 1 {
		return corruptf(it.pos, "record %d: empty", it.read)
	}
	tsDelta, n := varint(body[p:], 10)
	if n <= 0 {
		return corruptf(it.pos, "record %d: bad timestamp delta", it.read)
	}
	p += n
	offDelta, n := varint(body[p:], 5)
	if n <= 0 || offDelta < 0 || offDelta > int64(it.h.LastOffsetDelta) {
		return corruptf(it.pos, "record %d: offset delta out of the batch", it.read)
	}
	p += n
	r := &it.rec
	r.Offset = it.h.BaseOffset + Offset(offDelta)
	if it.h.Attributes.LogAppendTime() {
		r.Timestamp = it.h.MaxTimestamp
	} else {
		r.Timestamp = it.h.BaseTimestamp + tsDelta
	}
	var ok bool
	if r.Key, p, ok = bytesField(body, p); !ok {
		return corruptf(it.pos, "record %d: bad key", it.read)
	}
	if r.Value, p, ok = bytesField(body, p); !ok {
		return corruptf(it.pos, "record %d: bad value", it.read)
	}
	count, n := varint(body[p:], 5)
	// Each header needs at least two bytes, so a count beyond that is a lie
	// to be caught before it sizes anything.
	if n <= 0 || count < 0 || count > int64(len(body)-p-n)/2 {
		return corruptf(it.pos, "record %d: bad header count", it.read)
	}
	p += n
	var none []Header
	hs := &none
	if it.headers != nil {
		hs = it.headers
	}
	*hs = (*hs)[:0]
	for i := int64(0); i < count; i++ {
		var h Header
		if h.Key, p, ok = bytesField(body, p); !ok || h.Key == nil {
			return corruptf(it.pos, "record %d: bad header key", it.read)
		}
		if h.Value, p, ok = bytesField(body, p); !ok {
			return corruptf(it.pos, "record %d: bad header value", it.read)
		}
		*hs = append(*hs, h)
	}
	r.Headers = *hs
	if p != len(body) {
		return corruptf(it.pos, "record %d: %d bytes after its last field", it.read, len(body)-p)
	}
	return nil
}

// decodeCommon decodes the next record, as decodeFields does, when it has
// the shape nearly every record has: a length, timestamp delta, key and
// value length of at most two varint bytes, an offset delta of at most
// three, and no headers. It reports false, having changed nothing, for
// any other record, good or bad, which decodeFields then decodes or
// refuses. Its varints are decoded in line: a 1 MiB batch of 100-byte
// records is ten thousand records of six varints each, and the calls to
// varint were a fifth of rendering it.
func (it *RecordIter) decodeCommon() bool {
	d := it.data[it.off:]
	length, n := uvarint2(d, 0)
	if n == 0 || length&1 != 0 || uint64(len(d)-n) < length>>1 {
		return false
	}
	body := d[n : n+int(length>>1)]
	// attributes (any), then the timestamp delta
	tsZ, p := uvarint2(body, 1)
	if p == 1 {
		return false
	}
	offZ, q := uvarint2(body, p)
	if q == p {
		if q+2 >= len(body) || body[q] < 0x80 || body[q+1] < 0x80 || body[q+2] >= 0x80 {
			return false
		}
		offZ, q = uint64(body[q]&0x7f)|uint64(body[q+1]&0x7f)<<7|uint64(body[q+2])<<14, q+3
	}
	p = q
	if offZ&1 != 0 || int64(offZ>>1) > int64(it.h.LastOffsetDelta) {
		return false
	}
	// The key's block and the value's are the same on purpose: as a
	// function they would be a call each, which is what this one saves
	// (its cost is over the compiler's inlining budget).
	var key []byte
	if p < len(body) && body[p] == 1 {
		p++ // null
	} else {
		keyZ, q := uvarint2(body, p)
		if q == p || keyZ&1 != 0 || uint64(len(body)-q) < keyZ>>1 {
			return false
		}
		p = q + int(keyZ>>1)
		key = body[q:p:p]
	}
	var value []byte
	if p < len(body) && body[p] == 1 {
		p++ // null
	} else {
		valZ, q := uvarint2(body, p)
		if q == p || valZ&1 != 0 || uint64(len(body)-q) < valZ>>1 {
			return false
		}
		p = q + int(valZ>>1)
		value = body[q:p:p]
	}
	if p != len(body)-1 || body[p] != 0 {
		return false // headers, or bytes after them: decodeFields says which
	}
	r := &it.rec
	r.Offset = it.h.BaseOffset + Offset(offZ>>1)
	if it.h.Attributes.LogAppendTime() {
		r.Timestamp = it.h.MaxTimestamp
	} else {
		r.Timestamp = it.h.BaseTimestamp + (int64(tsZ>>1) ^ -int64(tsZ&1))
	}
	r.Key, r.Value, r.Headers = key, value, nil
	if it.headers != nil {
		r.Headers = (*it.headers)[:0]
	}
	it.off += n + len(body)
	return true
}

// uvarint2 decodes the unsigned varint of one or two bytes at b[p:] and
// returns the index after it, or p when it is longer or b ends first.
func uvarint2(b []byte, p int) (uint64, int) {
	if p < len(b) && b[p] < 0x80 {
		return uint64(b[p]), p + 1
	}
	if p+1 < len(b) && b[p+1] < 0x80 {
		return uint64(b[p]&0x7f) | uint64(b[p+1])<<7, p + 2
	}
	return 0, p
}

// bytesField decodes a length-prefixed byte string at b[p:]; length -1 is nil.
func bytesField(b []byte, p int) ([]byte, int, bool) {
	l, n := varint(b[p:], 5)
	if n <= 0 || l < -1 {
		return nil, p, false
	}
	p += n
	if l == -1 {
		return nil, p, true
	}
	if int64(len(b)-p) < l {
		return nil, p, false
	}
	return b[p : p+int(l) : p+int(l)], p + int(l), true
}

// varint decodes a zig-zag varint of at most max bytes. n is the number of
// bytes read, or 0 when b ends first or the varint is longer than max.
func varint(b []byte, max int) (v int64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		// One byte: every delta and most lengths in a batch.
		return int64(b[0]>>1) ^ -int64(b[0]&1), 1
	}
	var ux uint64
	var s uint
	for i, c := range b {
		if i == max {
			return 0, 0
		}
		if c < 0x80 {
			ux |= uint64(c) << s
			v = int64(ux >> 1)
			if ux&1 != 0 {
				v = ^v
			}
			return v, i + 1
		}
		ux |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

// appendVarint appends the zig-zag encoding of v.
func appendVarint(b []byte, v int64) []byte {
	ux := uint64(v) << 1
	if v < 0 {
		ux = ^ux
	}
	for ux >= 0x80 {
		b = append(b, byte(ux)|0x80)
		ux >>= 7
	}
	return append(b, byte(ux))
}

// varintLen is the encoded size of v.
func varintLen(v int64) int {
	ux := uint64(v) << 1
	if v < 0 {
		ux = ^ux
	}
	n := 1
	for ux >= 0x80 {
		ux >>= 7
		n++
	}
	return n
}

// String formats a record for debugging.
func (r *Record) String() string {
	return fmt.Sprintf("offset=%d timestamp=%d key=%q value=%q headers=%d", r.Offset, r.Timestamp, r.Key, r.Value, len(r.Headers))
}
