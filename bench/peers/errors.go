package peers

import "errors"

var (
	// ErrUnsupported is returned by Log.LookupTime when the peer has no
	// lookup by time; the harness reports the phase as n/a.
	ErrUnsupported = errors.New("peers: operation not supported by this log")

	// ErrUnknownAdapter is returned by Open and Run for a name that no
	// adapter registered.
	ErrUnknownAdapter = errors.New("peers: unknown adapter")

	// ErrMismatch is returned when a log hands back a value, offset or
	// record count other than what was written: the benchmark stops rather
	// than time broken code.
	ErrMismatch = errors.New("peers: log returned wrong data")

	// ErrCorrupt is returned by the raw baseline when its file does not
	// parse (a length prefix running past the end of the file).
	ErrCorrupt = errors.New("peers: raw file corrupt")
)
