// Command logfs mounts a Kafka-style commit log as a filesystem and works on
// its data directory offline.
//
//	logfs mount [--data DIR] [--read-only] [--allow-other] [--debug] [-o key=value …] MOUNTPOINT
//	logfs topic create|list|describe|delete [--data DIR] [--partitions N] [--config k=v …] NAME
//	logfs produce [--data DIR] [--format values|jsonl] TOPIC [PARTITION]
//	logfs consume [--data DIR] (--offset N|earliest|latest | --time T) [--follow] [--format values|jsonl] TOPIC PARTITION
//	logfs dump [--verify] [--print-data] FILE…
//	logfs check [--repair] [--data DIR]
//
// Each subcommand lives in its own file and registers itself with
// addCommand from an init function, so a new one is one new file.
//
// Flags may come before or after the positional arguments. Errors are one
// line on stderr; the exit status is 0 on success, 1 on failure and 2 for a
// command line that does not parse.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// commands builds the subcommands. Each subcommand's file adds its
// constructor from an init function (see addCommand).
var commands []func() *cobra.Command

// addCommand registers a subcommand constructor.
func addCommand(newCmd func() *cobra.Command) { commands = append(commands, newCmd) }

func main() {
	if isMountHelper(os.Args[0]) {
		os.Exit(runMountHelper(os.Args[0], os.Args[1:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	progressOut = stderr
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var silent silentError
	if errors.As(err, &silent) {
		return silent.code
	}
	name := "logfs"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	fmt.Fprintf(stderr, "%s: %s%s\n", name, oneLine(err), fileLimitHint(err))
	if isUsage(err) {
		return exitUsage
	}
	return exitFailure
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "logfs",
		Short: "A Kafka-style commit log you mount as a filesystem",
		Long: `logfs keeps topics of partitioned, append-only logs in a data directory laid
out exactly as Apache Kafka lays it out, and mounts them as a filesystem:
append with echo, read with cat, follow with tail -f.

The data directory is ./logfs-data unless --data says otherwise; it is
created on first use.`,
		Example: `  logfs mount ./mnt
  logfs topic create --partitions 3 orders
  echo hello | logfs produce orders
  logfs consume --offset earliest orders 0`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// No "completion" command: it would be the only one not documented.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErrorf("%s (see %s --help)", flagErrorText(err), cmd.CommandPath())
	})
	cs := make([]*cobra.Command, 0, len(commands))
	for _, newCmd := range commands {
		cs = append(cs, newCmd())
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name() < cs[j].Name() })
	for _, c := range cs {
		root.AddCommand(c)
	}
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unknown command %q (see logfs --help)", args[0])
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, args []string) error {
		// logfs with no arguments: print the help, as most tools do, but
		// fail, since nothing was done.
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Help()
		return silentError{exitUsage}
	}
	return root
}

// usageError is a command line that does not parse: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// flagErrorText is a flag's parse error in words: pflag says which flag
// and value, then adds strconv's own text (strconv.ParseInt: parsing
// "abc": invalid syntax), which says it again in Go's terms; that part
// becomes what the flag wants.
func flagErrorText(err error) string {
	msg := err.Error()
	var ne *strconv.NumError
	if !errors.As(err, &ne) {
		return msg
	}
	want := "want a whole number"
	switch {
	case ne.Func == "ParseBool":
		want = "want true or false"
	case errors.Is(ne.Err, strconv.ErrRange):
		want = "out of range"
	case strings.HasPrefix(ne.Func, "ParseFloat"):
		want = "want a number"
	}
	return strings.Replace(msg, ne.Error(), want, 1)
}

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func isUsage(err error) bool {
	var u usageError
	if errors.As(err, &u) {
		return true
	}
	// Cobra's own argument errors ("unknown command", "accepts 1 arg(s)")
	// do not go through the flag error function.
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag")
}

// silentError ends a command with a status after it has said everything
// itself (check and dump print their findings, then fail).
type silentError struct{ code int }

func (e silentError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// fileLimitHint says, for an error of a process out of file descriptors,
// what logfs holds them for and how to allow more: a data directory with
// thousands of partitions meets the limit before anything else.
func fileLimitHint(err error) string {
	if !errors.Is(err, unix.EMFILE) {
		return ""
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return ""
	}
	return fmt.Sprintf(" (this process may have %d files open, `ulimit -n`: logfs holds one for each partition, "+
		"and three for each it creates or appends to)", lim.Cur)
}

// oneLine folds an error into a single line: errors.Join separates with
// newlines, and the package prefixes of sentinel errors mean nothing to a
// user of the command.
func oneLine(err error) string {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	for _, pkg := range []string{"storage", "record", "index", "recovery", "vfs", "fs"} {
		msg = dropPrefix(msg, "logfs/"+pkg+": ")
	}
	return dropPrefix(msg, "logfs: ")
}

// dropPrefix removes p where it begins msg or a part of it (after ": ",
// "; " or "("), as a wrapped sentinel error does, and keeps it anywhere else: a
// path or value that ends in "logfs" (/var/lib/logfs: …, -o gid=logfs: …)
// is named whole.
func dropPrefix(msg, p string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, p)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:i])
		if done := b.String(); done != "" && !strings.HasSuffix(done, ": ") && !strings.HasSuffix(done, "; ") && !strings.HasSuffix(done, "(") {
			b.WriteString(p)
		}
		msg = msg[i+len(p):]
	}
}

// args checks the number of positional arguments and names the missing
// one, which cobra's own validators do not.
func args(names ...string) cobra.PositionalArgs {
	var required int
	for _, n := range names {
		if !strings.HasPrefix(n, "[") {
			required++
		}
	}
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < required:
			return usageErrorf("missing %s (see %s --help)", names[len(args)], cmd.CommandPath())
		case len(args) > len(names):
			return usageErrorf("unexpected argument %q (see %s --help)", args[len(names)], cmd.CommandPath())
		}
		return nil
	}
}
