package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

func init() { addCommand(newConsumeCommand) }

// consumeArgs is what the command line asks consume for.
type consumeArgs struct {
	dir       string
	topic     string
	partition int
	offset    string // N, earliest or latest; "" with --time
	time      string // T; "" with --offset
	follow    bool
	format    storage.Format
	debug     bool
	cluster   clusterArgs // --bootstrap-server: consume from a cluster (cluster.go)
}

func newConsumeCommand() *cobra.Command {
	var (
		c      consumeArgs
		format string
	)
	cmd := &cobra.Command{
		Use:   "consume [--data DIR] (--offset N|earliest|latest | --time T) [--follow] [--format values|jsonl] [--isolation-level L] TOPIC PARTITION",
		Short: "Print records from an offset or a time",
		Long: `Print a partition's records from an offset or from a time on: exactly the
bytes of the mount's offset/N or time/T file (values: each value and '\n';
jsonl: one JSON object a record with offset, timestamp, key, headers and
value).

T is unix seconds (1700000000, up to 11 digits), unix milliseconds
(1700000000000, 12 digits or more), RFC 3339 (2023-11-14T22:13:20Z) or a
date (2023-11-14, midnight UTC). --time starts at the first record whose
timestamp is at or after T, as Kafka's offsetsForTimes.

consume only reads: it works beside a running mount or producer. With
--follow it then waits for new records, woken by the kernel (inotify) when
the partition's files change, and prints them until Ctrl-C or SIGTERM, which
end it with status 0.`,
		Example: `  logfs consume --offset earliest orders 0
  logfs consume --offset 1234 --format jsonl orders 0
  logfs consume --time 2024-10-10T12:00:00Z orders 0
  logfs consume --offset latest --follow orders 0
  logfs consume --bootstrap-server kafka1:9092 --offset earliest orders 0`,
		Args: args("TOPIC", "PARTITION"),
		RunE: func(cmd *cobra.Command, a []string) error {
			c.topic = a[0]
			if err := checkTopic(c.topic); err != nil {
				return err
			}
			var err error
			if c.partition, err = parsePartition(a[1]); err != nil {
				return err
			}
			if c.format, err = storage.ParseFormat(format); err != nil {
				return usageErrorf("--format %q: want values or jsonl", format)
			}
			switch {
			case c.offset == "" && c.time == "":
				return usageErrorf("say where to start: --offset N|earliest|latest or --time T (see %s --help)", cmd.CommandPath())
			case c.offset != "" && c.time != "":
				return usageErrorf("give --offset or --time, not both")
			case c.offset != "" && c.offset != "earliest" && c.offset != "latest":
				if n, err := strconv.ParseInt(c.offset, 10, 64); err != nil || n < 0 {
					return usageErrorf("--offset %q: want a non-negative number, earliest or latest", c.offset)
				}
			case c.time != "":
				if _, err := storage.ParseTimeBound(c.time); err != nil {
					return usageErrorf("--time %q: want unix seconds, unix milliseconds, RFC 3339 (2024-10-10T12:00:00Z) or a date (2024-10-10)", c.time)
				}
			}
			ctx := cmd.Context()
			if c.follow {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			out := bufio.NewWriterSize(cmd.OutOrStdout(), 256<<10)
			if c.cluster.enabled() {
				c.cluster.dataSet = cmd.Flags().Changed("data")
				err = consumeCluster(ctx, cmd, out, c)
			} else {
				err = consume(ctx, out, cmd.ErrOrStderr(), c)
			}
			if ferr := out.Flush(); err == nil && ferr != nil {
				err = fmt.Errorf("write: %w", ferr)
			}
			if c.follow && errors.Is(err, context.Canceled) {
				return nil // Ctrl-C is how --follow ends
			}
			return err
		},
	}
	addDataFlag(cmd, &c.dir)
	addClusterFlags(cmd, &c.cluster, false)
	addDebugFlag(cmd, &c.debug)
	cmd.Flags().StringVar(&c.offset, "offset", "", "first offset: a number, earliest or latest")
	cmd.Flags().StringVar(&c.time, "time", "", "first record at or after `T`: unix seconds, unix ms, RFC 3339 or a date (midnight UTC)")
	cmd.Flags().BoolVarP(&c.follow, "follow", "F", false, "wait for new records and print them until interrupted")
	cmd.Flags().StringVarP(&format, "format", "f", "values", "output format: values or jsonl")
	return cmd
}

// consume prints the records c asks for to out. Each round opens the data
// directory read-only, prints from the next offset to the log end offset
// of that moment and closes it; with c.follow it then sleeps until the
// partition's folder changes and goes round again. A read-only open sees
// what other processes appended up to the moment it opens; a writer in the
// same process is not needed.
func consume(ctx context.Context, out *bufio.Writer, stderr io.Writer, c consumeArgs) error {
	var w *watcher
	if c.follow {
		// Watch before the first open, so that no append can fall between
		// the open and the watch unnoticed.
		var err error
		if w, err = newWatcher(ctx, filepath.Join(c.dir, layout.PartitionDirName(c.topic, c.partition))); err != nil {
			// Most likely the folder is missing: name what is missing.
			if err := checkPartitionExists(stderr, c); err != nil {
				return err
			}
			return fmt.Errorf("watch %s: %w", c.dir, err)
		}
		defer w.close()
	}
	next := record.Offset(-1)
	for {
		var err error
		if next, err = consumeOnce(out, stderr, c, next); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if !c.follow {
			return nil
		}
		if err := w.wait(); err != nil {
			return err
		}
	}
}

// checkPartitionExists says why c names no partition, if it does not.
func checkPartitionExists(stderr io.Writer, c consumeArgs) error {
	l, err := openLog(c.dir, storage.Options{ReadOnly: true, Logger: newLogger(stderr, slog.LevelError, c.debug, false)})
	if err != nil {
		return err
	}
	_, err = findPartition(l, c.topic, c.partition)
	return closeLog(l, err)
}

// consumeOnce opens the log read-only, prints the records from next (or,
// when next is -1, from where c says) to the end, and returns the offset
// after them.
func consumeOnce(out io.Writer, stderr io.Writer, c consumeArgs, next record.Offset) (record.Offset, error) {
	iso, err := c.cluster.localIsolation()
	if err != nil {
		return 0, err
	}
	o := storage.Options{ReadOnly: true, Isolation: iso, Logger: newLogger(stderr, slog.LevelError, c.debug, false)}
	l, err := openLog(c.dir, o)
	for try := 1; err != nil && errors.Is(err, fs.ErrNotExist) && try <= 20; try++ {
		// A writer beside us (a mount's retention, a topic deletion)
		// removed files between the open's listing of a folder and its
		// reading of them: list again. A data directory that is missing
		// is not this (checkDataDirExists).
		time.Sleep(time.Duration(try) * 5 * time.Millisecond)
		l, err = openLog(c.dir, o)
	}
	if err != nil {
		return 0, err
	}
	next, err = printRecords(out, stderr, l, c, next)
	return next, closeLog(l, err)
}

func printRecords(out io.Writer, stderr io.Writer, l *storage.Log, c consumeArgs, next record.Offset) (record.Offset, error) {
	p, err := findPartition(l, c.topic, c.partition)
	if err != nil {
		return 0, err
	}
	// In read_committed the view ends at the last stable offset: the next
	// round goes on from there.
	start, end := p.StartOffset(), p.LatestOffset()
	switch {
	case next < 0:
		if next, err = startOffset(p, c); err != nil {
			return 0, err
		}
		if c.time != "" && next >= end {
			// No record stamped T or later yet: print nothing, and look
			// again next round, as the mount's time/T does.
			return -1, nil
		}
	case next < start:
		fmt.Fprintf(stderr, "logfs consume: offsets %d to %d were deleted by retention before they could be printed; going on from %d\n", next, start-1, start)
		next = start
	case next > end:
		return 0, fmt.Errorf("%s now ends at offset %d, before %d, which was already printed (was the topic deleted and created again?)", p, end, next)
	}
	v, err := p.NewView(c.format, next)
	if err != nil {
		return 0, err
	}
	defer v.Close()
	buf := make([]byte, 256<<10)
	for pos := int64(0); ; {
		n, err := v.ReadAt(buf, pos)
		if _, werr := out.Write(buf[:n]); werr != nil {
			return 0, fmt.Errorf("write: %w", werr)
		}
		pos += int64(n)
		if err == io.EOF {
			break
		} else if err != nil {
			return 0, fmt.Errorf("read %s: %w", p, err)
		}
	}
	// A read-only log does not grow: the view ended at the end offset (or
	// printed nothing, from a next past it).
	return max(end, next), nil
}

// startOffset resolves --offset or --time.
func startOffset(p *storage.Partition, c consumeArgs) (record.Offset, error) {
	start, end := p.StartOffset(), p.LatestOffset()
	switch c.offset {
	case "earliest":
		return start, nil
	case "latest":
		return end, nil
	case "":
		ts, err := storage.ParseTimeBound(c.time)
		if err != nil {
			return 0, err
		}
		return p.OffsetForTime(ts)
	}
	n, err := strconv.ParseInt(c.offset, 10, 64)
	if err != nil {
		return 0, err
	}
	switch off := record.Offset(n); {
	case off < start:
		return 0, fmt.Errorf("offset %d of %s is gone: the log starts at %d (older records were deleted by retention)", off, p, start)
	case off > end:
		return 0, fmt.Errorf("offset %d of %s does not exist yet: the log end offset is %d", off, p, end)
	default:
		return off, nil
	}
}

// watcher wakes consume --follow when a partition's folder changes: a
// segment written or created, or the folder itself removed.
type watcher struct {
	ctx context.Context
	f   *os.File
	buf []byte
}

func newWatcher(ctx context.Context, dir string) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	const mask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
		unix.Close(fd)
		return nil, err
	}
	w := &watcher{ctx: ctx, f: os.NewFile(uintptr(fd), "inotify"), buf: make([]byte, 64<<10)}
	go func() {
		<-ctx.Done()
		w.f.Close() // wakes a wait in progress
	}()
	return w, nil
}

// wait blocks until the folder has changed since the last wait, then reads
// every event that is queued, so that a burst of appends costs one round.
func (w *watcher) wait() error {
	if _, err := w.read(); err != nil {
		return err
	}
	// Drain what else is queued without blocking.
	if err := w.f.SetReadDeadline(time.Now()); err != nil {
		return err
	}
	defer w.f.SetReadDeadline(time.Time{})
	for {
		if _, err := w.read(); errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func (w *watcher) read() (int, error) {
	n, err := w.f.Read(w.buf)
	if err != nil {
		if w.ctx.Err() != nil {
			return 0, w.ctx.Err()
		}
		return 0, err
	}
	for b := w.buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
		mask := binary.NativeEndian.Uint32(b[4:8])
		size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:16]))
		if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 {
			return 0, errors.New("the partition's folder was removed (was the topic deleted?)")
		}
		if size > len(b) {
			break
		}
		b = b[size:]
	}
	return n, nil
}

func (w *watcher) close() { w.f.Close() }
