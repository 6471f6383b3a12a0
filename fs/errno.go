package fs

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	"github.com/logfs/logfs/storage"
)

// toErrno maps an error from package storage (or the file system under it)
// to the errno a FUSE operation returns, and says how loudly to log it:
// slog.LevelDebug for what a caller asked for wrongly (ENOENT, EINVAL,
// EFBIG, EROFS, EEXIST), higher for failures of the log itself. It is the
// only place that decides an errno for a storage error; see the table in
// doc.go.
func toErrno(err error) (syscall.Errno, slog.Level) {
	var errno syscall.Errno
	switch {
	case err == nil:
		return 0, slog.LevelDebug
	case storage.IsCorruption(err):
		// Before the errno pass-through: a corrupt batch is EIO whatever
		// else it wraps.
		return syscall.EIO, slog.LevelError
	case errors.Is(err, storage.ErrOffsetOutOfRange),
		errors.Is(err, storage.ErrNoTopic),
		errors.Is(err, storage.ErrNoPartition):
		return syscall.ENOENT, slog.LevelDebug
	case errors.Is(err, storage.ErrDeleted):
		// The open file's records were deleted under its reader.
		return syscall.EIO, slog.LevelWarn
	case errors.Is(err, storage.ErrReadOnly):
		return syscall.EROFS, slog.LevelDebug
	case errors.Is(err, storage.ErrRecordTooLarge):
		return syscall.EFBIG, slog.LevelInfo
	case errors.Is(err, storage.ErrOffsetsExhausted):
		return syscall.EFBIG, slog.LevelError
	case errors.Is(err, storage.ErrInvalidTopic),
		errors.Is(err, storage.ErrInvalidPartition),
		errors.Is(err, storage.ErrInvalidRecord),
		errors.Is(err, storage.ErrInvalidTimestamp),
		errors.Is(err, storage.ErrInvalidConfig):
		return syscall.EINVAL, slog.LevelInfo
	case errors.Is(err, storage.ErrTopicExists), errors.Is(err, storage.ErrTopicCollides):
		return syscall.EEXIST, slog.LevelDebug
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR, slog.LevelDebug
	case errors.As(err, &errno):
		// ENOSPC, EDQUOT, EIO … from the data directory pass through.
		return errno, slog.LevelWarn
	}
	// ErrClosed, ErrFailed and anything unexpected.
	return syscall.EIO, slog.LevelError
}

// errno maps err with toErrno and logs the cause once, with the operation
// and the path it concerned.
func (f *logFS) errno(err error, op, path string) syscall.Errno {
	e, level := toErrno(err)
	if e != 0 {
		f.log.Log(context.Background(), level, "logfs: "+op+" failed", "path", path, "errno", e.Error(), "err", err)
	}
	return e
}
