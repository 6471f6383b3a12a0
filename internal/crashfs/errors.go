package crashfs

import "errors"

var (
	// ErrInjected is returned, wrapped in an *os.PathError or *os.LinkError,
	// by the mutating operation that FailAfter or ShortWriteAfter chose when
	// no other error was given. That operation did nothing, except a WriteAt
	// chosen by ShortWriteAfter, which wrote the bytes it reports.
	ErrInjected = errors.New("crashfs: injected error")

	// ErrCrashed is returned, wrapped, by the operation CrashAt chose (which
	// did not run), and by every later operation on the FS, its Files and its
	// locks once the FS has crashed, whether by Crash or by CrashAt.
	ErrCrashed = errors.New("crashfs: crashed")
)
