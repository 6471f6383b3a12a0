package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/logfs/logfs/bench"
	"github.com/logfs/logfs/internal/floorfs"
)

// logfs bench is the command line of package bench (the workloads, their
// baselines and the report): flags, their checks in the flags' words, the
// report on stdout. The peers are measured by bench/peers, its own module.

func init() {
	addCommand(newBenchCommand)
	addCommand(newBenchFloorCommand)
}

// runBench is bench.Run; tests replace it.
var runBench = bench.Run

func newBenchCommand() *cobra.Command {
	var (
		o                                           = bench.DefaultOptions()
		sizes, batches, dataBytes, segBytes, phases string
		mount, asJSON, quiet, cluster               bool
	)
	cmd := &cobra.Command{
		Use:   "bench [--size 100,1k,16k] [--batch 1,64] [--records N] [--mount] [--phases LIST] [--count N] [--json]",
		Short: "Measure logfs against raw I/O and plain files on the standard workloads",
		Long: `Run the standard workloads on logfs and, in the same run, on baselines, and
print a table (or JSON with --json): time per operation, MB/s of values,
records/s, latency p50/p99 and each row's speed relative to its baseline
(x base: the baseline's time per record or per operation divided by logfs's;
above 1 logfs is faster). Every value read back is checked against what was
written: a wrong answer is shown as WRONG and fails the command.

Through the storage API, for every record size (values only, no keys):
  append        records in Append calls of --batch records, no fsync
  append+fsync  the same, Sync after every call, for --fsync-time
  lookup        random offsets -> the record at that offset (Reader.Seek + Next)
  lookup-time   random timestamps -> first offset at or after (OffsetForTime)
  read          every record from offset 0
  mixed         one appender, --readers followers waiting in Reader.Wait
The baseline (raw) writes the same values, each behind an 8-byte length,
with one write(2) per batch to one file, reads them back with 1 MiB
read(2)s and looks one up with one pread(2) at a position kept in memory:
the physical floor, not an index. Read phases run warm (page cache).

With --mount, the data set of every size is also mounted (this binary's
'mount' subcommand, in a temporary directory) and measured with real tools,
against the same tool on plain files:
  cat           cat offset/0 (FUSE page cache dropped first) vs cat of the .log files
  tail          tail -n 10 offset/0 vs tail -n 10 of a plain file of the same text
  head          head -n 1 offset/N, random N, vs head -n 1 of that plain file
  cat>>append   cat FILE >> TOPIC/0/append vs cat FILE >> a plain file, and
                >> the go-fuse floor's sink (a server that keeps nothing)
  readers       dd bs=4k/64k/1M, cat, wc -l, mawk, Go bufio.Scanner, Python
                (for line in f, read(1 MiB)), grep -c on offset/0, first
                read (kernel cache dropped) and second, vs a plain file
  pread         4 KiB preads at random positions of offset/0: new ones,
                then the same again, vs the same preads of the plain file
                and of the go-fuse floor's file (its cache dropped first)
  open          open offset/N, read its first line, close, vs a seek in
                the plain file
  concurrent    four dd bs=1M at once, a quarter of the records each, vs
                one alone (first reads) and vs four on the plain file;
                the go-fuse floor's file read the same way alongside
  write         one-line write(2)s to an append file vs a go-fuse server
                that does nothing (the floor) and a plain file
  memory        a mount of --segments segments: peak RSS, memory mappings
                before and after ls -R and a few reads (mount needs root
                or fusermount3, and /dev/fuse)

With --cluster, a fake Kafka cluster (franz-go's kfake) runs in this process
and 'logfs mount --bootstrap-server' mounts it; kcat is the baseline:
  cat, cold     cat offset/0 with nothing copied yet vs kcat -C -e -q of the partition
  cat, again    the same cat once the copy is local vs cat of a local mount of the copy
  tail -f lag   produce acknowledged -> the line out of tail -f offset/latest, and
                -> the record's bytes readable in the file (p50, p99)
  cat>>append   cat FILE >> append vs kcat -P < FILE
kfake keeps everything in memory: 256 MiB of records take about 700 MB.

Everything is written to a fresh directory under --dir (default: the system
temporary directory), unmounted and removed at the end, on error and on
Ctrl-C. Timings depend on what else runs on the machine: the header gives
the load average; compare ratios measured in the same run.`,
		Example: `  logfs bench                                   # storage API, 3 sizes x batch 1 and 64
  logfs bench --mount --count 3                 # everything, each cell 3 times, median shown
  logfs bench --size 1k --batch 64 --phases lookup,read --json
  logfs bench --mount --phases memory --segments 10000`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cluster {
				return benchCluster(cmd, sizes, dataBytes, o, asJSON, quiet)
			}
			var err error
			if o.Sizes, err = parseBenchSizes(sizes); err != nil {
				return usageErrorf("--size: %v", err)
			}
			if o.Batches, err = parseBenchSizes(batches); err != nil {
				return usageErrorf("--batch: %v", err)
			}
			if o.DataBytes, err = parseBenchBytes(dataBytes); err != nil {
				return usageErrorf("--data-bytes: %v", err)
			}
			if o.SegmentBytes, err = parseBenchBytes(segBytes); err != nil {
				return usageErrorf("--segment-bytes: %v", err)
			}
			if o.Phases, err = parseBenchPhases(phases, mount); err != nil {
				return err
			}
			if o.FloorExe, err = os.Executable(); err != nil {
				return err
			}
			if o.Exe == "" {
				o.Exe = o.FloorExe
			}
			if err := o.Validate(); err != nil {
				return usageErrorf("%v", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var progress io.Writer
			if !quiet {
				progress = cmd.ErrOrStderr()
			}
			rep, err := runBench(ctx, o, progress)
			if ctx.Err() != nil {
				// A tool killed by the interrupt fails with its own error.
				if errors.Is(err, context.Canceled) || !errors.Is(err, bench.ErrStillMounted) {
					return errors.New("interrupted; data removed")
				}
				return fmt.Errorf("interrupted: %w", err)
			}
			if rep != nil {
				var werr error
				if asJSON {
					werr = rep.WriteJSON(cmd.OutOrStdout())
				} else {
					werr = rep.WriteTable(cmd.OutOrStdout())
				}
				err = errors.Join(err, werr)
			}
			if err == nil {
				err = rep.Err()
			}
			return err
		},
	}
	// Defaults: bench.DefaultOptions, lists and byte counts spelled as typed.
	f := cmd.Flags()
	f.StringVar(&sizes, "size", "100,1k,16k", "record value sizes, comma-separated (k = KiB; at least 24)")
	f.StringVar(&batches, "batch", "1,64", "records per append call, comma-separated; read phases use the data set of the last")
	f.IntVar(&o.Records, "records", o.Records, "records per data set (0: --data-bytes / size, clamped to [1000, --max-records])")
	f.StringVar(&dataBytes, "data-bytes", "128MiB", "value bytes per data set when --records is 0")
	f.IntVar(&o.MaxRecords, "max-records", o.MaxRecords, "cap on the automatic record count")
	f.StringVar(&segBytes, "segment-bytes", "64MiB", "segment.bytes of the logfs data sets (the peers harness uses the same)")
	f.IntVar(&o.Lookups, "lookups", o.Lookups, "random lookups per lookup phase (at most)")
	f.DurationVar(&o.PhaseTime, "phase-time", o.PhaseTime, "time cap of each lookup phase")
	f.DurationVar(&o.FsyncTime, "fsync-time", o.FsyncTime, "time cap of each append+fsync phase")
	f.IntVar(&o.Readers, "readers", o.Readers, "mixed: followers of the appender")
	f.IntVar(&o.MixedRecords, "mixed-records", o.MixedRecords, "mixed: records appended (at most --records)")
	f.IntVar(&o.Count, "count", o.Count, "runs of every cell; the median run is shown")
	f.IntVar(&o.ToolRuns, "tool-runs", o.ToolRuns, "tail and head: runs per measurement (latency samples)")
	f.IntVar(&o.Segments, "segments", o.Segments, "memory: segments of the mounted data directory")
	f.StringVar(&phases, "phases", "", "comma-separated phases (default: "+strings.Join(bench.APIPhases(), ",")+", and with --mount "+strings.Join(bench.MountPhases(), ",")+")")
	f.BoolVar(&mount, "mount", false, "also measure through a FUSE mount (cat, tail, head, cat >> append, readers, pread, open, concurrent, write, memory)")
	f.BoolVar(&cluster, "cluster", false, "instead, measure a mount of a Kafka cluster (a fake one in this process) against kcat: cold and warm cat, tail -f lag, cat >> append (256 MiB of 1 KiB records unless --data-bytes and --size say otherwise; needs kcat)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of values and random offsets")
	f.StringVar(&o.Dir, "dir", o.Dir, "parent of the run's temporary directory (default: system temp dir)")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of tables")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	f.StringVar(&o.Exe, "logfs-binary", o.Exe, "logfs binary that serves the mount (default: this one)")
	_ = f.MarkHidden("logfs-binary")
	return cmd
}

// newBenchFloorCommand is bench's floor: a go-fuse server that does
// nothing but answer (package floorfs), which the write phase measures
// against; hidden, as only bench runs it.
func newBenchFloorCommand() *cobra.Command {
	var o floorfs.Options
	cmd := &cobra.Command{
		Use:     "bench-floor [--size N | --from FILE] [--direct-io] MOUNTPOINT",
		Short:   "Serve logfs bench's transport floor (internal)",
		Example: "  logfs bench-floor --size 1073741824 /tmp/floor",
		Hidden:  true,
		Args:    args("MOUNTPOINT"),
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv, err := floorfs.Mount(a[0], o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "logfs bench-floor: ready: %s\n", a[0])
			go func() {
				<-ctx.Done()
				_ = srv.Unmount()
			}()
			srv.Wait()
			return nil
		},
	}
	cmd.Flags().Int64Var(&o.Size, "size", 0, "bytes of the data file")
	cmd.Flags().StringVar(&o.From, "from", "", "serve this file's bytes (read into memory) as the data file instead")
	cmd.Flags().BoolVar(&o.DirectIO, "direct-io", false, "serve data with direct I/O instead of through the page cache")
	return cmd
}

func parseBenchSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		if v, ok := strings.CutSuffix(strings.ToLower(f), "k"); ok {
			f, mult = v, 1024
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

func parseBenchBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q (e.g. 64MiB)", s)
	}
	return n * mult, nil
}

func parseBenchPhases(s string, mount bool) ([]string, error) {
	if s == "" {
		if mount {
			return bench.AllPhases(), nil
		}
		return bench.APIPhases(), nil
	}
	all, mountPhases := bench.AllPhases(), bench.MountPhases()
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(all, p) {
			return nil, usageErrorf("--phases: unknown phase %q (have %s)", p, strings.Join(all, ","))
		}
		if slices.Contains(mountPhases, p) && !mount {
			return nil, usageErrorf("--phases: %s needs --mount", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// benchCluster runs logfs bench --cluster.
func benchCluster(cmd *cobra.Command, sizes, dataBytes string, o bench.Options, asJSON, quiet bool) error {
	co := bench.DefaultClusterOptions()
	co.Seed, co.Dir, co.Exe = o.Seed, o.Dir, o.Exe
	if cmd.Flags().Changed("size") {
		s, err := parseBenchSizes(sizes)
		if err != nil || len(s) != 1 {
			return usageErrorf("--size: --cluster takes one record size")
		}
		co.Size = s[0]
	}
	if cmd.Flags().Changed("data-bytes") {
		b, err := parseBenchBytes(dataBytes)
		if err != nil {
			return usageErrorf("--data-bytes: %v", err)
		}
		co.Bytes, co.AppendBytes = b, min(co.AppendBytes, b)
	}
	if co.Exe == "" {
		var err error
		if co.Exe, err = os.Executable(); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if !quiet {
		progress = cmd.ErrOrStderr()
	}
	rows, err := bench.RunCluster(ctx, co, progress)
	if ctx.Err() != nil {
		return errors.New("interrupted; data removed")
	}
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	return bench.WriteClusterTable(cmd.OutOrStdout(), rows)
}
