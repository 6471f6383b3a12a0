package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Offset is the logical position of a record in a partition: 0, 1, 2, …
type Offset int64

// Position is a byte position inside one segment's .log file. It is a
// different thing from an Offset, and the types keep them apart.
type Position int64

// Sizes and values that are part of the on-disk format; do not change.
const (
	// HeaderSize is the size of a batch header, RECORD_BATCH_OVERHEAD in Kafka.
	HeaderSize = 61
	// LogOverhead is the base offset and batch length that precede the part
	// of a batch its length field counts.
	LogOverhead = 12
	// headerSizeUpToMagic is what a reader needs to see before it can tell a
	// batch's size and format.
	headerSizeUpToMagic = 17
	// Magic is the only batch format this package reads and writes.
	Magic = 2
	// crcStart is where the CRC-covered part of a batch begins (attributes).
	crcStart = 21
	// NoTimestamp marks a batch or record without a timestamp.
	NoTimestamp int64 = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Compression is the codec of a batch's records, bits 0-2 of its attributes.
type Compression uint8

// The codecs Kafka uses.
const (
	None   Compression = 0
	Gzip   Compression = 1
	Snappy Compression = 2
	LZ4    Compression = 3
	Zstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// Attributes is a batch's attribute field.
type Attributes int16

// Attribute bits.
const (
	compressionMask  Attributes = 0x07
	logAppendTimeBit Attributes = 0x08
	transactionalBit Attributes = 0x10
	controlBit       Attributes = 0x20
	deleteHorizonBit Attributes = 0x40
)

// Compression returns the batch's codec.
func (a Attributes) Compression() Compression { return Compression(a & compressionMask) }

// LogAppendTime reports whether timestamps were set by the broker on append;
// every record then carries the batch's MaxTimestamp.
func (a Attributes) LogAppendTime() bool { return a&logAppendTimeBit != 0 }

// Transactional reports whether the batch belongs to a transaction.
func (a Attributes) Transactional() bool { return a&transactionalBit != 0 }

// Control reports whether the batch holds a control record (a transaction
// marker or a KRaft record) rather than user data.
func (a Attributes) Control() bool { return a&controlBit != 0 }

// DeleteHorizon reports whether BaseTimestamp holds a compaction delete
// horizon instead of the first record's timestamp.
func (a Attributes) DeleteHorizon() bool { return a&deleteHorizonBit != 0 }

// BatchHeader is the decoded 61-byte header of a batch.
type BatchHeader struct {
	BaseOffset           Offset
	Length               int32 // bytes after the length field: Size() - 12
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           Attributes
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the number of bytes the batch occupies in the log.
func (h *BatchHeader) Size() int64 { return int64(h.Length) + LogOverhead }

// LastOffset is the offset of the batch's last record, which after
// compaction may be larger than the offset of any record still in it.
func (h *BatchHeader) LastOffset() Offset { return h.BaseOffset + Offset(h.LastOffsetDelta) }

// NextOffset is the offset that follows the batch.
func (h *BatchHeader) NextOffset() Offset { return h.LastOffset() + 1 }

// OffsetsFit reports whether a batch of lastOffsetDelta+1 offsets can
// start at base: the offset after its last, the next batch's base, must
// still be an int64 (math.MaxInt64 at most).
func OffsetsFit(base Offset, lastOffsetDelta int32) bool {
	return base >= 0 && lastOffsetDelta >= 0 && base <= math.MaxInt64-1-Offset(lastOffsetDelta)
}

// peekSize reads the size of the batch starting at b (at least 17 bytes)
// and checks the magic byte. It is what a scanner needs to find the next batch.
func peekSize(b []byte, pos Position) (int64, error) {
	length := int32(binary.BigEndian.Uint32(b[8:12]))
	if magic := int8(b[16]); magic != Magic {
		return 0, &CorruptError{Pos: pos, Reason: fmt.Sprintf("magic %d", magic), Err: ErrUnsupportedMagic}
	}
	if length < HeaderSize-LogOverhead {
		return 0, corruptf(pos, "batch length %d is below the %d-byte minimum", length, HeaderSize-LogOverhead)
	}
	return int64(length) + LogOverhead, nil
}

// ParseHeader decodes the header at the start of b, which must hold at least
// HeaderSize bytes. It checks the magic byte, the length and the offset
// delta, but not the CRC: see Batch.Verify.
func ParseHeader(b []byte, pos Position) (BatchHeader, error) {
	if len(b) < HeaderSize {
		return BatchHeader{}, &CorruptError{Pos: pos, Reason: fmt.Sprintf("%d bytes left, header needs %d", len(b), HeaderSize), Err: ErrTruncated}
	}
	if _, err := peekSize(b, pos); err != nil {
		return BatchHeader{}, err
	}
	h := HeaderFields(b)
	switch {
	case h.BaseOffset < 0:
		return h, corruptf(pos, "negative base offset %d", h.BaseOffset)
	case h.LastOffsetDelta < 0:
		return h, corruptf(pos, "negative last offset delta %d", h.LastOffsetDelta)
	case h.RecordCount < 0:
		return h, corruptf(pos, "negative record count %d", h.RecordCount)
	case !OffsetsFit(h.BaseOffset, h.LastOffsetDelta):
		return h, corruptf(pos, "base offset %d and last offset delta %d pass the largest offset", h.BaseOffset, h.LastOffsetDelta)
	case h.Attributes.Compression() > Zstd:
		return h, corruptf(pos, "unknown compression %d", h.Attributes.Compression())
	}
	return h, nil
}

// HeaderFields decodes the header at the start of b, which must hold at
// least HeaderSize bytes, as it is: no field is checked (ParseHeader
// checks them). It is what a dump of damaged data prints.
func HeaderFields(b []byte) BatchHeader {
	be := binary.BigEndian
	return BatchHeader{
		BaseOffset:           Offset(be.Uint64(b[0:])),
		Length:               int32(be.Uint32(b[8:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[12:])),
		Magic:                int8(b[16]),
		CRC:                  be.Uint32(b[17:]),
		Attributes:           Attributes(be.Uint16(b[21:])),
		LastOffsetDelta:      int32(be.Uint32(b[23:])),
		BaseTimestamp:        int64(be.Uint64(b[27:])),
		MaxTimestamp:         int64(be.Uint64(b[35:])),
		ProducerID:           int64(be.Uint64(b[43:])),
		ProducerEpoch:        int16(be.Uint16(b[51:])),
		BaseSequence:         int32(be.Uint32(b[53:])),
		RecordCount:          int32(be.Uint32(b[57:])),
	}
}

// Batch is one whole batch: its decoded header and its bytes.
type Batch struct {
	BatchHeader
	Pos   Position // where the batch starts in its file
	Bytes []byte   // the whole batch, header included; owned by whoever produced it
}

// Verify checks the batch's CRC-32C.
func (b *Batch) Verify() error {
	if got := crc32.Checksum(b.Bytes[crcStart:], castagnoli); got != b.CRC {
		return corruptf(b.Pos, "crc is %08x, header says %08x", got, b.CRC)
	}
	return nil
}

// CheckFollows checks the batch's offsets against its place in a segment
// whose base offset is base: its base offset must be at or above next,
// where the batch before it ended (base itself for the first batch read),
// its last offset within a relative offset (int32) of base, as Kafka's
// indexes store them, and below limit, the base offset of the segment
// after (math.MaxInt64 when there is none or it is not known). The CRC
// does not cover the base offset, so this is what catches a corrupt one.
func (b *Batch) CheckFollows(base, next, limit Offset) error {
	switch {
	case b.BaseOffset < next && next == base:
		return corruptf(b.Pos, "base offset %d is below the segment's base offset %d", b.BaseOffset, base)
	case b.BaseOffset < next:
		return corruptf(b.Pos, "base offset %d is below %d, where the previous batch ended", b.BaseOffset, next)
	case b.LastOffset()-base > math.MaxInt32:
		return corruptf(b.Pos, "last offset %d overflows a relative offset from base %d", b.LastOffset(), base)
	case b.LastOffset() >= limit:
		return BeyondSegment(b.Pos, b.LastOffset(), limit)
	}
	return nil
}

// BeyondSegment is the error for a batch at pos whose last offset is at or
// above next, the base offset of the segment after its own.
func BeyondSegment(pos Position, last, next Offset) error {
	return corruptf(pos, "last offset %d is at or above the next segment's base offset %d", last, next)
}

// ParseBatch decodes and verifies the batch at the start of b, which must
// hold the whole batch. It returns the batch and its size.
func ParseBatch(b []byte, pos Position) (Batch, error) {
	h, err := ParseHeader(b, pos)
	if err != nil {
		return Batch{}, err
	}
	if h.Size() > int64(len(b)) {
		return Batch{}, &CorruptError{Pos: pos, Reason: fmt.Sprintf("batch of %d bytes, %d left", h.Size(), len(b)), Err: ErrTruncated}
	}
	batch := Batch{BatchHeader: h, Pos: pos, Bytes: b[:h.Size()]}
	return batch, batch.Verify()
}

// SetBaseOffset rewrites the base offset of the encoded batch b. The CRC does
// not cover it, so the batch stays valid.
func SetBaseOffset(b []byte, base Offset) {
	binary.BigEndian.PutUint64(b[0:], uint64(base))
}
