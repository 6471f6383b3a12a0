package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// foldFusermountStderr runs mount, which may start fusermount3, so that
// what fusermount3 prints becomes part of the command's one error line
// instead of a line of its own above it. go-fuse starts fusermount3 with
// whatever os.Stderr is at that moment, so for the call os.Stderr is a
// pipe; logfs's own logger keeps the real stderr (it was given it as a
// value). On success anything fusermount3 printed is passed on to stderr.
func foldFusermountStderr(stderr io.Writer, mount func() error) error {
	r, w, err := os.Pipe()
	if err != nil {
		return mount()
	}
	saved := os.Stderr
	os.Stderr = w
	var said bytes.Buffer
	copied := make(chan struct{})
	go func() {
		io.Copy(&said, r)
		r.Close()
		close(copied)
	}()
	err = mount()
	os.Stderr = saved
	w.Close()
	<-copied
	msg := strings.Join(strings.Fields(strings.ReplaceAll(said.String(), "\n", "; ")), " ")
	msg = strings.TrimSuffix(msg, ";")
	if err != nil && msg != "" {
		return fmt.Errorf("%w (fusermount3 said: %s)", err, msg)
	}
	if msg != "" {
		fmt.Fprint(stderr, said.String())
	}
	return err
}
