package index

import (
	"errors"
	"fmt"
)

// Errors returned by the index types. Appends and lookups wrap them with
// the details (%w), so test them with errors.Is.
var (
	// ErrCorrupt is wrapped by every *CorruptError: the file breaks one of
	// the rules listed under "Validation" in the package documentation.
	// It is found when the file is first mapped (or by Check) and is then
	// returned by every call that reads the index. An index is derived
	// data: the caller rebuilds it from the .log (recovery) or indexes the
	// log in memory.
	ErrCorrupt = errors.New("logfs/index: corrupt index")

	// ErrFull is returned by Append when every slot is used, and by
	// MaybeAppend when only the reserved last slot is left (unless
	// skipFullCheck) or no slot at all is left. Storage checks IsFull and
	// rolls the segment before appending, so it should never see it.
	ErrFull = errors.New("logfs/index: index full")

	// ErrInvalidOffset is returned when an append breaks the order of
	// offsets: Append with an offset that is not strictly greater than the
	// last entry's, MaybeAppend with an offset below the last entry's.
	ErrInvalidOffset = errors.New("logfs/index: offset out of order")

	// ErrInvalidTimestamp is returned by MaybeAppend for a timestamp below
	// the last entry's (Kafka's IllegalStateException). An equal
	// timestamp is not an error: it is skipped.
	ErrInvalidTimestamp = errors.New("logfs/index: timestamp out of order")

	// ErrInvalidPosition is returned by Append for a log position that is
	// not greater than the previous entry's, is 0 (Kafka never indexes the
	// first batch of a segment) or does not fit in the entry's 32 bits.
	ErrInvalidPosition = errors.New("logfs/index: position out of order or range")

	// ErrOffsetOverflow is returned by Append and MaybeAppend for an
	// offset whose distance from the segment's base offset is outside
	// [0, MaxInt32], the range of a relative offset (Kafka's
	// IndexOffsetOverflowException). Storage rolls a new segment first.
	ErrOffsetOverflow = errors.New("logfs/index: offset does not fit in a relative offset")

	// ErrReadOnly is returned by Append, MaybeAppend and Reset on an index
	// that is not writable: opened without Options.Writable, or sealed.
	ErrReadOnly = errors.New("logfs/index: index is read-only")

	// ErrClosed is returned by every method but Close, Rename and Delete
	// after Close or Delete, including Lookups that race with them.
	ErrClosed = errors.New("logfs/index: index closed")

	// ErrOutOfRange is returned by Entry for a slot outside [0, Entries()).
	ErrOutOfRange = errors.New("logfs/index: entry out of range")

	// ErrInvalidArgument is returned by the Create and Open functions for
	// a negative base offset or a negative Options.MaxBytes.
	ErrInvalidArgument = errors.New("logfs/index: invalid argument")
)

// CorruptError says which index file broke which rule. It unwraps to
// ErrCorrupt.
type CorruptError struct {
	File string // path of the index file
	Rule string // the rule that was broken, then the entry and values that broke it
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrCorrupt, e.File, e.Rule)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }
