package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// checkFilesExist fails, naming the first, when a file named on the
// command line is missing, unreadable or a directory: a command that reads
// several then fails before it prints anything about the others. A named
// pipe or a socket is refused too: opening one would wait for a writer.
func checkFilesExist(files []string) error {
	for _, f := range files {
		st, err := os.Stat(f)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s: no such file or directory", f)
		case err != nil:
			return err
		case st.IsDir():
			return fmt.Errorf("%s is a directory: name its segment files (%s/*.log, *.index, *.timeindex)", f, f)
		case st.Mode()&fs.ModeNamedPipe != 0:
			// open(2) of a pipe waits for a writer, maybe forever.
			return fmt.Errorf("%s is not a regular file but a named pipe", f)
		case st.Mode()&fs.ModeSocket != 0:
			return fmt.Errorf("%s is not a regular file but a socket", f)
		}
		r, err := os.Open(f)
		if err != nil {
			return err
		}
		r.Close()
	}
	return nil
}
