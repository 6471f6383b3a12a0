package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"

	"github.com/spf13/cobra"

	"github.com/logfs/logfs/storage"
)

func init() { addCommand(newCheckCommand) }

func newCheckCommand() *cobra.Command {
	var (
		dir    string
		repair bool
		debug  bool
	)
	cmd := &cobra.Command{
		Use:   "check [--repair] [--data DIR]",
		Short: "Verify a data directory offline, and repair it on request",
		Long: `Verify every partition of a data directory: every batch (sizes, CRC-32C,
offsets, records), every offset and time index entry against the log, the view
indexes, and the log start and end offsets. check only reads: it changes
nothing and reports what the next writable open would cut (a torn tail after
a crash is normal: opening the log cuts it).

--repair opens the directory writable and recovers every segment. It never
deletes a batch that passes its checks: each range of bad bytes is copied to
NAME.log.cut-FROM-TO beside its segment and cut out (or off, at the end), the
rest of the segment and every later segment stay; stray, misnamed or
overlapping .log files are renamed NAME.log.stray; every index is rebuilt.
logfs never deletes the .cut-* and .stray files. It says what it did, one line
each, then verifies the result: offsets lost from a directory logfs wrote
(which never compacts) remain a hole that check reports. Run it with no mount
on the directory.

The exit status is 0 when everything checks out (after --repair: when the
repaired directory does), 1 otherwise.`,
		Example: `  logfs check --data /srv/logfs
  logfs check --repair --data /srv/logfs`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// What recovery finds is part of the report: its log goes to
			// stdout with the findings.
			opts := storage.Options{ReadOnly: !repair, ForceRecovery: repair, Logger: newLogger(cmd.OutOrStdout(), slog.LevelWarn, debug, false)}
			l, err := openExistingLog(dir, opts)
			if err != nil {
				return err
			}
			problems, holes := checkLog(cmd.OutOrStdout(), l, repair)
			if err := closeLog(l, nil); err != nil {
				return err
			}
			if problems > 0 {
				hint := "; logfs check --repair cuts bad bytes out, keeping them aside"
				switch {
				case repair:
					hint = ""
				case holes == problems:
					// --repair changes nothing about a hole: do not
					// send the reader round in a circle.
					hint = "; a hole's offsets are lost for good, --repair cannot bring them back"
				}
				return fmt.Errorf("%d problem%s in %s (listed above)%s", problems, plural(problems), dir, hint)
			}
			return nil
		},
	}
	addDataFlag(cmd, &dir)
	addDebugFlag(cmd, &debug)
	cmd.Flags().BoolVar(&repair, "repair", false, "cut bad bytes out (kept aside in .cut files), set stray segments aside, rebuild the indexes")
	return cmd
}

// checkLog reports what opening l found in each partition and what Check
// finds now, and returns the number of problems and how many of them are
// holes (storage.ErrHole: offsets lost from a log that never compacts).
func checkLog(w io.Writer, l *storage.Log, repaired bool) (problems, holes int) {
	partitions := 0
	var bytes int64
	for _, name := range l.Topics() {
		t, err := l.Topic(name)
		if err != nil {
			continue
		}
		for _, p := range t.Partitions() {
			partitions++
			bytes += p.Size()
			r := p.Recovery()
			for _, line := range r.Lines {
				fmt.Fprintln(w, line)
				if !repaired {
					problems++
				}
			}
		}
	}
	m := newMeter(progressOut, "checking", bytes)
	err := l.CheckProgress(m.add)
	m.finish()
	if err != nil {
		for _, e := range unjoin(err) {
			fmt.Fprintf(w, "%s\n", oneLine(e))
			problems++
			if errors.Is(e, storage.ErrHole) {
				holes++
			}
		}
	}
	if problems == 0 {
		fmt.Fprintf(w, "%s: %d topic%s, %d partition%s, %d bytes of log: OK\n", l.Dir(), len(l.Topics()), plural(len(l.Topics())), partitions, plural(partitions), bytes)
	}
	return problems, holes
}

// joinType is the type errors.Join returns.
var joinType = reflect.TypeOf(errors.Join(errors.New("")))

// unjoin splits errors.Join trees into their leaves, and only those: an
// error that wraps several with fmt.Errorf (a check finding wraps
// storage.ErrCheck and what it found) is one leaf.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok && reflect.TypeOf(err) == joinType {
		var out []error
		for _, e := range j.Unwrap() {
			if e != nil {
				out = append(out, unjoin(e)...)
			}
		}
		return out
	}
	return []error{err}
}
