package bench

import "errors"

// Errors returned by this package. Errors of logfs, of the file system and
// of the tools run through a mount pass through wrapped.
//
// ErrStillMounted and ErrWrongAnswer carry no package prefix: they end
// sentences that logfs bench prints as they are.
var (
	// ErrInvalidOptions is returned by Run for Options outside the limits
	// documented on their fields; nothing is measured.
	ErrInvalidOptions = errors.New("logfs/bench: invalid options")

	// ErrStillMounted is returned when a data set, or the run's directory,
	// is not removed because a mount is still active under it (a mount that
	// would not stop). The directory is left in place: removing files
	// through a live mount would delete the data it serves.
	ErrStillMounted = errors.New("still mounted")

	// ErrWrongAnswer is returned by Report.Err when a value, offset or
	// tool output read back differed from what was written.
	ErrWrongAnswer = errors.New("logfs returned data other than what was written")
)

// errNoTimeLookup is returned by the lookupTime of a subject that has no
// index by time (raw): the lookup-time phase is skipped for it.
var errNoTimeLookup = errors.New("no time lookup")
