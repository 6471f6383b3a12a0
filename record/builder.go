package record

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"slices"
)

// ErrEmptyBatch is returned by Build when no record was appended.
var ErrEmptyBatch = errors.New("logfs/record: a batch needs at least one record")

// Builder encodes records into one batch. The zero value is ready to use;
// Reset makes it ready for the next batch and keeps its buffer.
type Builder struct {
	buf       []byte // HeaderSize placeholder bytes, then the records
	count     int32
	lastDelta int32
	baseTS    int64
	maxTS     int64
}

// BuildOptions are the header fields a batch gets besides its records.
// The zero value gives what logfs writes: uncompressed, CreateTime, no
// producer, unknown leader epoch.
type BuildOptions struct {
	Compression          Compression
	Attributes           Attributes // bits other than the codec: LogAppendTime, transactional, control
	ProducerID           int64      // 0 is written as -1 (none) unless Transactional is set
	ProducerEpoch        int16
	BaseSequence         int32
	PartitionLeaderEpoch int32
	// LogAppendTime, if set with the LogAppendTime attribute, is the
	// batch's max timestamp, which readers give every record.
	LogAppendTime int64
}

// Reset clears the builder for a new batch.
func (b *Builder) Reset() {
	b.buf = append(b.buf[:0], make([]byte, HeaderSize)...)
	b.count, b.lastDelta = 0, 0
	b.baseTS, b.maxTS = NoTimestamp, NoTimestamp
}

// Grow makes room for n more bytes of records, so that appending them
// does not copy the batch again as it grows.
func (b *Builder) Grow(n int) {
	if len(b.buf) == 0 {
		b.Reset()
	}
	b.buf = slices.Grow(b.buf, n)
}

// Len returns the number of records appended since Reset.
func (b *Builder) Len() int { return int(b.count) }

// Size returns the size the uncompressed batch would have now.
func (b *Builder) Size() int {
	if len(b.buf) == 0 {
		return HeaderSize
	}
	return len(b.buf)
}

// RecordSize is the encoded size of a record with these fields at the given
// deltas, header included. Callers use it to bound a batch before building it.
func RecordSize(tsDelta int64, offsetDelta int32, key, value []byte, headers []Header) int {
	n := bodySize(tsDelta, offsetDelta, key, value, headers)
	return varintLen(int64(n)) + n
}

// Append adds a record at the next offset delta. A nil key or value is
// encoded as null.
func (b *Builder) Append(ts int64, key, value []byte, headers []Header) {
	delta := b.count
	if b.count > 0 {
		delta = b.lastDelta + 1
	}
	b.AppendAt(delta, ts, key, value, headers)
}

// AppendValue adds a record with no key and no headers at the next offset
// delta, as Append(ts, nil, value, nil) does: the records of an append
// file's lines and of logfs produce, ten thousand to a 1 MiB write of
// 100-byte values. It sizes and writes the record's framing in place,
// without Append's general sizing of every field.
func (b *Builder) AppendValue(ts int64, value []byte) {
	if len(b.buf) == 0 {
		b.Reset()
	}
	delta := b.count
	if b.count == 0 {
		b.baseTS = ts
	} else {
		delta = b.lastDelta + 1
	}
	b.maxTS = max(b.maxTS, ts)
	tsDelta := ts - b.baseTS
	vlen := int64(len(value))
	if value == nil {
		vlen = -1
	}
	// attributes, the deltas, a null key, the value, no headers
	n := 1 + varintLen(tsDelta) + varintLen(int64(delta)) + 1 + varintLen(vlen) + len(value) + 1
	buf := slices.Grow(b.buf, binary.MaxVarintLen64+n)
	buf = appendVarint(buf, int64(n))
	buf = append(buf, 0)
	buf = appendVarint(buf, tsDelta)
	buf = appendVarint(buf, int64(delta))
	buf = append(buf, 1) // -1, zigzagged
	buf = appendVarint(buf, vlen)
	buf = append(buf, value...)
	b.buf = append(buf, 0)
	b.count++
	b.lastDelta = delta
}

// AppendAt adds a record at an explicit offset delta, which must be larger
// than the previous one: compacted batches have gaps.
func (b *Builder) AppendAt(offsetDelta int32, ts int64, key, value []byte, headers []Header) {
	if len(b.buf) == 0 {
		b.Reset()
	}
	if b.count == 0 {
		b.baseTS = ts
	}
	b.maxTS = max(b.maxTS, ts)
	tsDelta := ts - b.baseTS
	n := bodySize(tsDelta, offsetDelta, key, value, headers)
	buf := appendVarint(b.buf, int64(n))
	buf = append(buf, 0) // attributes
	buf = appendVarint(buf, tsDelta)
	buf = appendVarint(buf, int64(offsetDelta))
	buf = appendBytes(buf, key)
	buf = appendBytes(buf, value)
	buf = appendVarint(buf, int64(len(headers)))
	for _, h := range headers {
		buf = appendBytes(buf, h.Key)
		buf = appendBytes(buf, h.Value)
	}
	b.buf = buf
	b.count++
	b.lastDelta = offsetDelta
}

// Build finishes the batch with base offset 0 and the default options. The
// result aliases the builder's buffer: it is valid until the next Reset or
// Append. Give it its offsets with SetBaseOffset.
func (b *Builder) Build() ([]byte, error) { return b.BuildWith(BuildOptions{}) }

// BuildWith finishes the batch with the given header fields and codec.
func (b *Builder) BuildWith(o BuildOptions) ([]byte, error) {
	if b.count == 0 {
		return nil, ErrEmptyBatch
	}
	out := b.buf
	if o.Compression != None {
		data, err := compress(o.Compression, b.buf[HeaderSize:])
		if err != nil {
			return nil, err
		}
		out = append(make([]byte, HeaderSize, HeaderSize+len(data)), data...)
	}
	if len(out)-LogOverhead > math.MaxInt32 {
		return nil, ErrTooLarge
	}
	producerID, epoch, seq := int64(-1), int16(-1), int32(-1)
	if o.ProducerID != 0 || o.Attributes.Transactional() {
		producerID, epoch, seq = o.ProducerID, o.ProducerEpoch, o.BaseSequence
	}
	maxTS := b.maxTS
	attrs := o.Attributes&^compressionMask | Attributes(o.Compression)
	if attrs.LogAppendTime() {
		maxTS = o.LogAppendTime
	}
	be := binary.BigEndian
	be.PutUint64(out[0:], 0)
	be.PutUint32(out[8:], uint32(len(out)-LogOverhead))
	be.PutUint32(out[12:], uint32(o.PartitionLeaderEpoch))
	out[16] = Magic
	be.PutUint16(out[21:], uint16(attrs))
	be.PutUint32(out[23:], uint32(b.lastDelta))
	be.PutUint64(out[27:], uint64(b.baseTS))
	be.PutUint64(out[35:], uint64(maxTS))
	be.PutUint64(out[43:], uint64(producerID))
	be.PutUint16(out[51:], uint16(epoch))
	be.PutUint32(out[53:], uint32(seq))
	be.PutUint32(out[57:], uint32(b.count))
	be.PutUint32(out[17:], crc32.Checksum(out[crcStart:], castagnoli))
	return out, nil
}

func bodySize(tsDelta int64, offsetDelta int32, key, value []byte, headers []Header) int {
	n := 1 + varintLen(tsDelta) + varintLen(int64(offsetDelta)) + bytesSize(key) + bytesSize(value) + varintLen(int64(len(headers)))
	for _, h := range headers {
		n += bytesSize(h.Key) + bytesSize(h.Value)
	}
	return n
}

func bytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytes(buf, b []byte) []byte {
	if b == nil {
		return appendVarint(buf, -1)
	}
	buf = appendVarint(buf, int64(len(b)))
	return append(buf, b...)
}
