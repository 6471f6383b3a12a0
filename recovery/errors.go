package recovery

import (
	"errors"
	"io/fs"
)

var (
	// ErrBadCheckpoint is returned for a checkpoint file that breaks Kafka's
	// format: wrong version, wrong entry count, a malformed line. Callers
	// then treat every partition as having no recovery point, as Kafka does.
	ErrBadCheckpoint = errors.New("logfs/recovery: malformed checkpoint")

	// ErrLegacyFormat is returned when a segment being recovered holds,
	// where its RecordBatch v2 data stops, a well-formed Kafka message of
	// the legacy formats (magic 0 or 1). logfs reads only v2; rather than
	// cut data that Kafka can read, recovery refuses the partition.
	ErrLegacyFormat = errors.New("logfs/recovery: legacy message format (magic 0 or 1) is not supported")
)

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
