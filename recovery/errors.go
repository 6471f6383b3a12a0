package recovery

import (
	"errors"
	"io/fs"
)

var (
	// ErrBadCheckpoint is returned for a checkpoint file that breaks Kafka's
	// format: wrong version, wrong entry count, a malformed line.
	ErrBadCheckpoint = errors.New("logfs/recovery: malformed checkpoint")

	// ErrCorruptSegment is returned when a segment below the recovery point
	// (trusted, not scanned at open) turns out to hold an invalid batch.
	// The error names the file, the position and the rule; `logfs check
	// --repair` cuts the log there on request.
	ErrCorruptSegment = errors.New("logfs/recovery: corrupt segment")
)

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
