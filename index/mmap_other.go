//go:build !unix

package index

import "errors"

// errNoMmap is what every mapping attempt returns where the package has no
// memory-mapping implementation. logfs is a FUSE file system and runs on
// Unix; this file only keeps the package compiling elsewhere.
var errNoMmap = errors.New("logfs/index: memory-mapped indexes need a Unix system")

func mmapFd(int, string, int) ([]byte, error) { return nil, errNoMmap }
func munmap([]byte) error                     { return errNoMmap }
