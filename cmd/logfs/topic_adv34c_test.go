package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// topic list is what scripts read (logfs topic list | while read t …):
// when its output cannot be written (a full disk, /dev/full) it fails, as
// topic describe and consume do, instead of exiting 0 having listed
// nothing.
func TestTopicListWriteErrorFailsAdv34c(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "orders")
	cmd := exec.Command(logfsBin, "topic", "list")
	cmd.Dir, cmd.Stdout = dir, full
	var stderr strings.Builder
	cmd.Stderr = &stderr
	r := result{code: exitCode(t, cmd.Run())}
	r.stderr = stderr.String()
	requireOneLineError(t, r, exitFailure, "no space left on device")
}
