// Command peerbench measures logfs and its peers on the same workloads and
// prints a table, or JSON with -json.
//
//	cd bench/peers && go run ./cmd/peerbench                 # everything, defaults
//	go run ./cmd/peerbench -size 1024 -batch 64 -only raw,liftbridge -json
//
// Data sets go to a fresh directory under -dir (default: the system temp
// dir) which is removed at the end, also on error and on SIGINT/SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/logfs/logfs/bench/peers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func run() error {
	d := peers.DefaultOptions()
	var (
		sizes    = flag.String("size", joinInts(d.Sizes), "record value sizes, comma-separated (suffix k = KiB)")
		batches  = flag.String("batch", joinInts(d.Batches), "records per Append call, comma-separated")
		records  = flag.Int("records", 0, "records per data set (0 = -data-bytes / size, clamped to [1000, -max-records])")
		dataB    = flag.String("data-bytes", "128MiB", "value bytes per data set when -records is 0")
		maxRec   = flag.Int("max-records", d.MaxAutoRecords, "cap on the automatic record count")
		segB     = flag.String("segment-bytes", "64MiB", "segment size given to every peer")
		dir      = flag.String("dir", "", "parent of the run's fresh data directory (default: system temp dir); only that directory is removed")
		only     = flag.String("only", "", "comma-separated logs to run (default all: "+strings.Join(peers.Adapters(), ",")+")")
		phases   = flag.String("phases", "", "comma-separated phases (default all: "+strings.Join(peers.Phases, ",")+")")
		lookups  = flag.Int("lookups", d.Lookups, "random lookups per lookup phase (at most)")
		phaseT   = flag.Duration("phase-time", d.PhaseTime, "time cap of each lookup phase")
		fsyncT   = flag.Duration("fsync-time", d.FsyncTime, "time cap of each append+fsync phase")
		readers  = flag.Int("readers", d.Readers, "mixed: readers following the tail")
		mixedN   = flag.Int("mixed-records", d.MixedRecords, "mixed: records appended (at most -records)")
		seed     = flag.Uint64("seed", d.Seed, "seed of values and lookup sequences")
		count    = flag.Int("count", d.Repeat, "runs per cell; the median run is reported")
		asJSON   = flag.Bool("json", false, "print JSON instead of tables")
		quiet    = flag.Bool("q", false, "no progress lines on stderr")
		strict   = flag.Bool("strict", false, "exit with status 2 when any log gave a wrong answer")
		listLogs = flag.Bool("list", false, "list the registered logs and exit")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if *listLogs {
		fmt.Println(strings.Join(peers.Adapters(), "\n"))
		return nil
	}

	o := d
	var err error
	if o.Sizes, err = parseSizes(*sizes); err != nil {
		return fmt.Errorf("-size: %w", err)
	}
	if o.Batches, err = parseSizes(*batches); err != nil {
		return fmt.Errorf("-batch: %w", err)
	}
	db, err := parseSize(*dataB)
	if err != nil {
		return fmt.Errorf("-data-bytes: %w", err)
	}
	sb, err := parseSize(*segB)
	if err != nil {
		return fmt.Errorf("-segment-bytes: %w", err)
	}
	o.Records, o.DataBytes, o.MaxAutoRecords, o.SegmentBytes = *records, int64(db), *maxRec, int64(sb)
	o.Dir, o.Logs, o.Phases = *dir, splitList(*only), splitList(*phases)
	o.Lookups, o.PhaseTime, o.FsyncTime = *lookups, *phaseT, *fsyncT
	o.Readers, o.MixedRecords, o.Seed, o.Repeat = *readers, *mixedN, *seed, *count
	if !*quiet {
		o.Progress = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // a second signal kills at once

	rep, err := peers.Run(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		err = peers.WriteJSON(os.Stdout, rep)
	} else {
		err = peers.WriteTable(os.Stdout, rep)
	}
	if err != nil {
		return err
	}
	if bad := rep.WrongAnswers(); len(bad) > 0 {
		for _, r := range bad {
			fmt.Fprintf(os.Stderr, "peerbench: WRONG ANSWERS: %s %s size=%d batch=%d: %d of %d (%s)\n",
				r.Log, r.Phase, r.Size, r.Batch, r.Wrong, r.Ops, r.WrongExample)
		}
		if *strict {
			os.Exit(2)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := parseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// parseSize reads "100", "16k", "16KiB", "64MiB", "1GiB" (binary units).
func parseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
