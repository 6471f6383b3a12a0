// Package integration tests the mount for real: it mounts a log with
// package fs on a temporary directory and drives it with the tools people
// use (cat, head, tail, dd, wc, grep, shell redirection), comparing what
// they see with what package storage holds. It has no code outside its
// tests.
//
// The tests need /dev/fuse and root (logfs mounts with mount(2) as root,
// or with fusermount3 otherwise). Without them they skip, unless
// LOGFS_REQUIRE_FUSE=1 is set (CI sets it), when they fail. Benchmarks
// through the mount live here too (go test -bench . ./integration); each
// reports its ratio to the same operation on plain files, measured in the
// same run.
//
// The serving process never maps or executes a file of its own mount
// (go-fuse's "Deadlocks"): tools run as child processes that open the
// mount themselves, with their working directory outside it.
package integration
