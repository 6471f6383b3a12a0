//go:build !unix

package index

import (
	"errors"
	"os"
)

// errNoMmap is what every mapping attempt returns where the package has no
// memory-mapping implementation. logfs is a FUSE file system and runs on
// Unix; this file only keeps the package compiling elsewhere.
var errNoMmap = errors.New("logfs/index: memory-mapped indexes need a Unix system")

func mmap(*os.File, int, bool) ([]byte, error)      { return nil, errNoMmap }
func mmapFd(int, string, int, bool) ([]byte, error) { return nil, errNoMmap }
func munmap([]byte) error                           { return errNoMmap }
func msync([]byte) error                            { return errNoMmap }
