package vfs

import (
	"errors"
	"io"

	"golang.org/x/sys/unix"
)

// NextData returns where f's first byte of data at or after off is, or
// size past everything when only a hole follows (SEEK_DATA): the bytes
// before it read as zeros. ok is false when the file system cannot say (f
// has no Seek, or the seek fails for another reason).
func NextData(f File, off int64) (next int64, ok bool) {
	s, isSeeker := f.(io.Seeker)
	if !isSeeker {
		return 0, false
	}
	d, err := s.Seek(off, unix.SEEK_DATA)
	switch {
	case err == nil:
		return d, true
	case errors.Is(err, unix.ENXIO): // nothing but a hole from off on
		return 1<<63 - 1, true
	}
	return 0, false
}

// DataEnd returns where the last of f's data before size ends: every byte
// from there to size is in a hole and reads as zero. ok is false when the
// file system cannot say.
func DataEnd(f File, size int64) (end int64, ok bool) {
	s, isSeeker := f.(io.Seeker)
	if !isSeeker {
		return 0, false
	}
	for off := int64(0); off < size; {
		d, ok := NextData(f, off)
		if !ok {
			return 0, false
		}
		if d >= size {
			break
		}
		h, err := s.Seek(d, unix.SEEK_HOLE)
		if err != nil {
			return 0, false
		}
		end, off = h, h
	}
	return min(end, size), true
}
