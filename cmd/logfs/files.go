package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// checkFilesExist fails, naming the first, when a file named on the
// command line is missing, unreadable or a directory: a command that reads
// several then fails before it prints anything about the others.
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
		}
		r, err := os.Open(f)
		if err != nil {
			return err
		}
		r.Close()
	}
	return nil
}
