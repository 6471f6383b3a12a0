package storage

import (
	"errors"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// Errors returned by this package. Errors from record (a *record.CorruptError
// wrapping record.ErrCorrupt) and from the file system pass through wrapped.
var (
	// ErrOffsetOutOfRange is returned when a read asks for an offset below
	// the log start offset (deleted by retention) or beyond the log end.
	ErrOffsetOutOfRange = errors.New("logfs/storage: offset out of range")

	// ErrDeleted is returned by a Reader or View that reached records
	// retention deleted before it could read them: it read up to them,
	// and what comes next in the log is not what came next when it
	// started. Kafka's consumer gets OffsetOutOfRange at this point.
	ErrDeleted = errors.New("logfs/storage: records deleted by retention before they were read")

	// ErrHole is returned by a read, and reported by Check, that reaches
	// offsets missing from a gapless partition (a data directory of
	// logfs's own, which never compacts: Options.Gaps): damage cut them
	// out or emptied their segment (see package recovery). Reads from an
	// offset after the hole work.
	ErrHole = errors.New("logfs/storage: offsets missing from a partition that is never compacted")

	// ErrRecordTooLarge is returned by an append holding a record whose
	// single-record batch would exceed the topic's max.message.bytes or
	// segment.bytes. Nothing of the append is written.
	ErrRecordTooLarge = errors.New("logfs/storage: record too large")

	// ErrOffsetsExhausted is returned by an append whose offsets would
	// pass the largest, math.MaxInt64 - 1: a partition whose log end a
	// damaged checkpoint moved there. Nothing of the append is written.
	ErrOffsetsExhausted = errors.New("logfs/storage: the partition's offsets would pass the largest")

	// ErrInvalidTopic is returned for a topic name that breaks Kafka's rules
	// (see layout.ValidateTopic).
	ErrInvalidTopic = layout.ErrInvalidTopic

	// ErrInvalidPartition is returned for a partition number that is
	// negative, not in canonical decimal form, or not the next one when
	// adding a partition.
	ErrInvalidPartition = layout.ErrInvalidPartition

	// ErrTopicExists is returned when creating a topic that exists.
	ErrTopicExists = errors.New("logfs/storage: topic already exists")

	// ErrTopicCollides is returned when creating a topic whose name is
	// an existing one's once '.' and '_' are taken alike (Kafka refuses
	// it: the two would share metric names).
	ErrTopicCollides = errors.New("logfs/storage: topic name collides with an existing one")

	// ErrNoTopic and ErrNoPartition are returned for names that do not exist.
	ErrNoTopic     = errors.New("logfs/storage: no such topic")
	ErrNoPartition = errors.New("logfs/storage: no such partition")

	// ErrInvalidConfig is returned for an unknown topic property or a value
	// out of its range.
	ErrInvalidConfig = errors.New("logfs/storage: invalid config")

	// ErrReadOnly is returned by every mutation of a log opened read-only.
	ErrReadOnly = errors.New("logfs/storage: log is read-only")

	// ErrClosed is returned by operations on a closed log or reader.
	ErrClosed = errors.New("logfs/storage: closed")

	// ErrFailed is returned by appends to a partition whose log could not be
	// restored after a failed write (for example the truncate after a short
	// write failed too). The partition stays readable; reopening the log
	// runs recovery.
	ErrFailed = errors.New("logfs/storage: partition failed; reopen to recover")

	// ErrInvalidRecord is returned for a line of append.jsonl that is not a
	// record object of the documented shape, and for a record that Kafka's
	// format cannot hold (a header without a key).
	ErrInvalidRecord = errors.New("logfs/storage: invalid record")

	// ErrNotDataDir is returned by a writable Open of a directory that
	// holds files but nothing of a data directory (see Open).
	ErrNotDataDir = errors.New("logfs/storage: not a data directory")

	// ErrInvalidTimestamp is returned for a timestamp that cannot be parsed.
	ErrInvalidTimestamp = errors.New("logfs/storage: invalid timestamp")
)

// IsCorruption reports whether err comes from a corrupt log or index file,
// as opposed to a bad request or an I/O failure.
func IsCorruption(err error) bool {
	return errors.Is(err, record.ErrCorrupt) || errors.Is(err, record.ErrTruncated) ||
		errors.Is(err, record.ErrUnsupportedMagic) || errors.Is(err, record.ErrTooLarge) || errors.Is(err, ErrHole)
}
