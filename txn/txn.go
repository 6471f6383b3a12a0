package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/logfs/logfs/record"
)

// Errors of decoding.
var (
	// ErrCorrupt is returned for a .txnindex or .snapshot whose bytes break
	// Kafka's rules: a CRC mismatch, an unknown version, an entry count that
	// does not match the file, an aborted transaction below the segment.
	ErrCorrupt = errors.New("logfs/txn: corrupt file")
)

// IndexEntrySize is the size of one .txnindex entry (AbortedTxn.TOTAL_SIZE).
const IndexEntrySize = 34

// indexVersion is the only entry version Kafka writes
// (AbortedTxn.CURRENT_VERSION); larger ones are refused on read.
const indexVersion = 0

// AbortedTxn is one entry of a .txnindex: a transaction that was aborted.
type AbortedTxn struct {
	Version          int16
	ProducerID       int64
	FirstOffset      record.Offset // the transaction's first offset
	LastOffset       record.Offset // its ABORT marker
	LastStableOffset record.Offset // the partition's LSO when the marker was written
}

func (a AbortedTxn) String() string {
	return fmt.Sprintf("aborted transaction of producer %d, offsets %d to %d", a.ProducerID, a.FirstOffset, a.LastOffset)
}

// ParseIndex decodes the entries of a .txnindex. A tail shorter than an
// entry is ignored, as Kafka's TransactionIndex ignores it; an entry of a
// version Kafka does not know is an error (Kafka throws there too).
func ParseIndex(data []byte) ([]AbortedTxn, error) {
	out := make([]AbortedTxn, 0, len(data)/IndexEntrySize)
	be := binary.BigEndian
	for p := 0; p+IndexEntrySize <= len(data); p += IndexEntrySize {
		e := data[p:]
		a := AbortedTxn{
			Version:          int16(be.Uint16(e)),
			ProducerID:       int64(be.Uint64(e[2:])),
			FirstOffset:      record.Offset(be.Uint64(e[10:])),
			LastOffset:       record.Offset(be.Uint64(e[18:])),
			LastStableOffset: record.Offset(be.Uint64(e[26:])),
		}
		if a.Version > indexVersion {
			return out, fmt.Errorf("%w: transaction index entry %d has version %d, Kafka knows %d", ErrCorrupt, p/IndexEntrySize, a.Version, indexVersion)
		}
		out = append(out, a)
	}
	return out, nil
}

// CheckIndex applies Kafka's sanity check of a segment's .txnindex
// (TransactionIndex.sanityCheck): no entry's last offset lies below the
// segment's base offset. Kafka rebuilds a segment whose index fails it.
func CheckIndex(entries []AbortedTxn, base record.Offset) error {
	for i, a := range entries {
		if a.LastOffset < base {
			return fmt.Errorf("%w: transaction index entry %d (%v) ends below the segment's base offset %d", ErrCorrupt, i, a, base)
		}
	}
	return nil
}

// AppendIndexEntry appends the 34-byte encoding of a to b (a.Version is 0,
// the version Kafka writes, unless set).
func AppendIndexEntry(b []byte, a AbortedTxn) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, uint16(a.Version))
	b = be.AppendUint64(b, uint64(a.ProducerID))
	b = be.AppendUint64(b, uint64(a.FirstOffset))
	b = be.AppendUint64(b, uint64(a.LastOffset))
	return be.AppendUint64(b, uint64(a.LastStableOffset))
}

// Snapshot sizes (ProducerStateManager's schema, version 1).
const (
	snapshotVersion    = 1
	snapshotHeaderSize = 2 + 4 + 4 // version, crc, entry count
	snapshotCRCStart   = 6
	// SnapshotEntrySize is the size of one producer's entry.
	SnapshotEntrySize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ProducerEntry is one producer's state in a .snapshot.
type ProducerEntry struct {
	ProducerID       int64
	ProducerEpoch    int16
	LastSequence     int32
	LastOffset       record.Offset // the last offset it wrote, -1 for none
	OffsetDelta      int32
	Timestamp        int64
	CoordinatorEpoch int32
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction, or -1 when it has none.
	CurrentTxnFirstOffset record.Offset
}

// FirstSequence is the first sequence of the producer's last batch, as
// Kafka's BatchMetadata.firstSeq: the last sequence less the offset delta,
// wrapping below 0 to the top of int32.
func (e ProducerEntry) FirstSequence() int32 {
	if e.LastSequence < e.OffsetDelta {
		return int32(math.MaxInt32 - (int64(e.OffsetDelta) - int64(e.LastSequence)) + 1)
	}
	return e.LastSequence - e.OffsetDelta
}

// ParseSnapshot decodes a producer snapshot, checking it as Kafka's
// readSnapshot does: version 1, the CRC, and the entry count against the
// bytes (Kafka's schema read fails on a short or long array).
func ParseSnapshot(data []byte) ([]ProducerEntry, error) {
	// The messages are Kafka's CorruptSnapshotException's.
	if len(data) < snapshotHeaderSize {
		return nil, &SnapshotError{fmt.Sprintf("Snapshot failed schema validation: %d bytes, the header alone is %d", len(data), snapshotHeaderSize)}
	}
	be := binary.BigEndian
	if v := int16(be.Uint16(data)); v != snapshotVersion {
		return nil, &SnapshotError{fmt.Sprintf("Snapshot contained an unknown file version %d", v)}
	}
	if want, got := be.Uint32(data[2:]), crc32.Checksum(data[snapshotCRCStart:], castagnoli); want != got {
		return nil, &SnapshotError{fmt.Sprintf("Snapshot is corrupt (CRC is no longer valid). Stored crc: %d. Computed crc: %d", want, got)}
	}
	n := int32(be.Uint32(data[6:]))
	if n < 0 || int64(len(data)-snapshotHeaderSize) != int64(n)*SnapshotEntrySize {
		return nil, &SnapshotError{fmt.Sprintf("Snapshot failed schema validation: %d entries in %d bytes", n, len(data)-snapshotHeaderSize)}
	}
	out := make([]ProducerEntry, n)
	for i := range out {
		e := data[snapshotHeaderSize+i*SnapshotEntrySize:]
		out[i] = ProducerEntry{
			ProducerID:            int64(be.Uint64(e)),
			ProducerEpoch:         int16(be.Uint16(e[8:])),
			LastSequence:          int32(be.Uint32(e[10:])),
			LastOffset:            record.Offset(be.Uint64(e[14:])),
			OffsetDelta:           int32(be.Uint32(e[22:])),
			Timestamp:             int64(be.Uint64(e[26:])),
			CoordinatorEpoch:      int32(be.Uint32(e[34:])),
			CurrentTxnFirstOffset: record.Offset(be.Uint64(e[38:])),
		}
	}
	return out, nil
}

// SnapshotError is a producer snapshot that breaks Kafka's rules; its
// message is Kafka's (CorruptSnapshotException). It wraps ErrCorrupt.
type SnapshotError struct{ Message string }

func (e *SnapshotError) Error() string { return e.Message }
func (e *SnapshotError) Unwrap() error { return ErrCorrupt }

// EncodeSnapshot encodes entries as a version 1 producer snapshot.
func EncodeSnapshot(entries []ProducerEntry) []byte {
	be := binary.BigEndian
	b := make([]byte, snapshotHeaderSize, snapshotHeaderSize+len(entries)*SnapshotEntrySize)
	be.PutUint16(b, snapshotVersion)
	be.PutUint32(b[6:], uint32(len(entries)))
	for _, e := range entries {
		b = be.AppendUint64(b, uint64(e.ProducerID))
		b = be.AppendUint16(b, uint16(e.ProducerEpoch))
		b = be.AppendUint32(b, uint32(e.LastSequence))
		b = be.AppendUint64(b, uint64(e.LastOffset))
		b = be.AppendUint32(b, uint32(e.OffsetDelta))
		b = be.AppendUint64(b, uint64(e.Timestamp))
		b = be.AppendUint32(b, uint32(e.CoordinatorEpoch))
		b = be.AppendUint64(b, uint64(e.CurrentTxnFirstOffset))
	}
	be.PutUint32(b[2:], crc32.Checksum(b[snapshotCRCStart:], castagnoli))
	return b
}
