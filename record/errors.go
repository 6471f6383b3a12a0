package record

import (
	"errors"
	"fmt"
)

// Errors returned while decoding batches and records. A *CorruptError wraps
// one of them and says where it happened.
var (
	// ErrCorrupt is returned when bytes that are all present break a rule of
	// the format: a batch shorter than its header, a CRC mismatch, a record
	// whose fields overrun the batch.
	ErrCorrupt = errors.New("logfs/record: corrupt batch")

	// ErrTruncated is returned when a batch header says the batch is longer
	// than the data that follows it: the torn tail of an interrupted write,
	// or a file cut short.
	ErrTruncated = errors.New("logfs/record: truncated batch")

	// ErrUnsupportedMagic is returned for a batch whose magic byte is not 2.
	// Kafka's legacy message sets (magic 0 and 1) are not supported.
	ErrUnsupportedMagic = errors.New("logfs/record: unsupported magic")

	// ErrTooLarge is returned when a batch, or a batch's decompressed
	// records, exceed the limit the caller set.
	ErrTooLarge = errors.New("logfs/record: batch too large")
)

// CorruptError locates a decoding error in a log file.
type CorruptError struct {
	File   string   // file name, when known
	Pos    Position // byte position of the batch in the file
	Reason string   // the rule that was broken
	Err    error    // ErrCorrupt, ErrTruncated, ErrUnsupportedMagic or ErrTooLarge
}

func (e *CorruptError) Error() string {
	where := fmt.Sprintf("position %d", e.Pos)
	if e.File != "" {
		where = e.File + " " + where
	}
	return fmt.Sprintf("%v at %s: %s", e.Err, where, e.Reason)
}

func (e *CorruptError) Unwrap() error { return e.Err }

func corruptf(pos Position, format string, args ...any) error {
	return &CorruptError{Pos: pos, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

// WithFile returns err with the file name filled in when err is a
// *CorruptError, and err unchanged otherwise.
func WithFile(err error, file string) error {
	var ce *CorruptError
	if errors.As(err, &ce) && ce.File == "" {
		c := *ce
		c.File = file
		return &c
	}
	return err
}
