package storage

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/logfs/logfs/vfs"
)

// Who may read a data directory is decided by the directory itself:
//
//   - A data directory that Open creates is made 0700, as are the missing
//     folders above it: the log is private unless asked otherwise.
//   - An existing data directory keeps its mode; Open never changes it.
//   - Every folder and file created inside takes the permission bits of the
//     folder it is created in, files without the x bits: in a 0700
//     directory files are 0600, in a 0750 one 0640, in a Kafka broker's
//     0755 one 0644. So sharing a data directory with a group is
//     `chgrp -R G DATA; chmod -R g+rX DATA` once, and new files follow.
//
// The process's umask still applies on top, as for any file it creates.
const newDataDirPerm os.FileMode = 0o700

// modesFS is the file system a Log works through: it gives every file and
// folder created through it the permission bits of its folder (see
// above), whatever mode the caller asked for. Index files, which package
// index creates itself, follow the same rule there.
type modesFS struct{ vfs.FS }

// OpenFile creates a file with its folder's permission bits minus x.
func (m modesFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&os.O_CREATE != 0 {
		p, err := m.perm(filepath.Dir(name))
		if err != nil {
			return nil, err
		}
		perm = p &^ 0o111
	}
	return m.FS.OpenFile(name, flag, perm)
}

// MkdirAll creates dir and its missing parents with the permission bits
// of the nearest folder above them that exists.
func (m modesFS) MkdirAll(dir string, perm os.FileMode) error {
	parent := filepath.Dir(filepath.Clean(dir))
	for {
		p, err := m.perm(parent)
		if err == nil {
			return m.FS.MkdirAll(dir, p)
		}
		if !errors.Is(err, os.ErrNotExist) || filepath.Dir(parent) == parent {
			return err
		}
		parent = filepath.Dir(parent)
	}
}

// Lock creates a lock file it is to lock with its folder's bits minus x.
func (m modesFS) Lock(name string) (io.Closer, error) {
	if _, err := m.FS.Stat(name); errors.Is(err, os.ErrNotExist) {
		f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0)
		if err != nil {
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	return m.FS.Lock(name)
}

func (m modesFS) perm(dir string) (os.FileMode, error) {
	st, err := m.FS.Stat(dir)
	if err != nil {
		return 0, err
	}
	return st.Mode().Perm(), nil
}
