package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

func init() { addCommand(newProduceCommand) }

// produceChunk is how much of stdin is read at a time: the lines of one read
// land in one batch, as the lines of one write(2) to the mount's append file
// do (up to 1 MiB).
const produceChunk = 1 << 20

func newProduceCommand() *cobra.Command {
	var (
		dir    string
		format string
	)
	cmd := &cobra.Command{
		Use:   "produce [--data DIR] [--format values|jsonl] TOPIC [PARTITION]",
		Short: "Append the lines of stdin as records (offline)",
		Long: `Append each line of stdin to a partition (0 by default) as one record, as
writing to the mount's append file does: the complete lines of each read of
up to 1 MiB go into one batch, atomically; a last line without '\n' is
appended at the end of input, or on Ctrl-C. The line's bytes, without the
'\n', are the record's value; the timestamp is the wall clock.

With --format jsonl each line is a JSON object as append.jsonl takes it:
{"key":…, "value":…, "headers":…, "timestamp":…}.

The topic must exist. A line too big for the topic's max.message.bytes fails
the command; nothing of the read holding it is appended, and what went before
it stays.`,
		Example: `  echo hello | logfs produce orders
  seq 1000 | logfs produce --data /srv/logfs orders 2
  echo '{"key":"k1","value":"v1","headers":{"h":"x"}}' | logfs produce --format jsonl orders`,
		Args: args("TOPIC", "[PARTITION]"),
		RunE: func(cmd *cobra.Command, a []string) error {
			topic := a[0]
			if err := checkTopic(topic); err != nil {
				return err
			}
			id := 0
			if len(a) > 1 {
				var err error
				if id, err = parsePartition(a[1]); err != nil {
					return err
				}
			}
			f, err := storage.ParseFormat(format)
			if err != nil {
				return usageErrorf("--format %q: want values or jsonl", format)
			}
			l, err := openLog(dir, storage.Options{Logger: newLogger(cmd.ErrOrStderr(), slog.LevelWarn, false, false)})
			if err != nil {
				return err
			}
			p, err := findPartition(l, topic, id)
			if err == nil {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				err = produce(ctx, cmd.InOrStdin(), p, f)
				stop()
			}
			return closeLog(l, err)
		},
	}
	addDataFlag(cmd, &dir)
	cmd.Flags().StringVarP(&format, "format", "f", "values", "input format: values (a line is a value) or jsonl")
	return cmd
}

// produce appends the lines of r to p until r ends or ctx is done.
func produce(ctx context.Context, r io.Reader, p *storage.Partition, f storage.Format) error {
	type chunk struct {
		b   []byte
		err error
	}
	chunks := make(chan chunk)
	go func() {
		for {
			b := make([]byte, produceChunk)
			n, err := r.Read(b)
			select {
			case chunks <- chunk{b[:n], err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	pr := producer{p: p, format: f, line: 1}
	for {
		var c chunk
		select {
		case c = <-chunks:
		case <-ctx.Done():
			// Interrupted: the partial line is appended, as the mount
			// does when the append file is released.
			return pr.flush()
		}
		pr.pending = append(pr.pending, c.b...)
		if i := bytes.LastIndexByte(pr.pending, '\n'); i >= 0 {
			if err := pr.appendLines(pr.pending[:i+1]); err != nil {
				return err
			}
			pr.pending = append(pr.pending[:0], pr.pending[i+1:]...)
		}
		if limit := p.Topic().Config().MaxMessageBytes; int64(len(pr.pending)) > limit {
			return fmt.Errorf("line %d is longer than max.message.bytes (%d) of topic %s; nothing of it was appended", pr.line, limit, p.Topic().Name())
		}
		switch {
		case c.err == io.EOF:
			return pr.flush()
		case c.err != nil:
			return fmt.Errorf("read stdin: %w", c.err)
		}
	}
}

// producer turns lines into batches.
type producer struct {
	p       *storage.Partition
	format  storage.Format
	pending []byte // a line whose '\n' has not come yet
	line    int    // number of the next line, for messages
	recs    []storage.Record
}

// flush appends the last line, which has no '\n'.
func (pr *producer) flush() error {
	if len(pr.pending) == 0 {
		return nil
	}
	err := pr.appendLines(append(pr.pending, '\n'))
	pr.pending = nil
	return err
}

// appendLines appends b, whole lines each ending in '\n', as one batch, or
// as several when one would not fit in a segment.
func (pr *producer) appendLines(b []byte) error {
	first := pr.line
	cfg := pr.p.Topic().Config()
	pr.recs = pr.recs[:0]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		var r storage.Record
		if pr.format == storage.JSONL {
			var err error
			if r, err = storage.ParseJSONRecord(b[:i]); err != nil {
				return fmt.Errorf("line %d: %w; nothing from line %d on was appended", pr.line, err, first)
			}
		} else {
			r.Value = b[:i]
		}
		if n := record.HeaderSize + record.RecordSize(0, 0, r.Key, r.Value, r.Headers); int64(n) > cfg.MaxMessageBytes {
			return fmt.Errorf("line %d: a record of %d bytes exceeds max.message.bytes (%d) of topic %s; nothing from line %d on was appended",
				pr.line, n, cfg.MaxMessageBytes, pr.p.Topic().Name(), first)
		}
		pr.recs = append(pr.recs, r)
		pr.line++
		b = b[i+1:]
	}
	// One batch, unless it would not fit in a segment.
	recs := pr.recs
	for len(recs) > 0 {
		n, size := 0, int64(record.HeaderSize)
		for n < len(recs) {
			r := &recs[n]
			rs := int64(record.RecordSize(0, int32(n), r.Key, r.Value, r.Headers))
			if pr.format == storage.JSONL {
				rs += 9 // a timestamp delta takes up to 10 bytes, not 1
			}
			if n > 0 && size+rs > cfg.SegmentBytes {
				break
			}
			size += rs
			n++
		}
		if _, err := pr.p.Append(recs[:n]); err != nil {
			if errors.Is(err, storage.ErrRecordTooLarge) {
				return fmt.Errorf("line %d: %w", first, err)
			}
			return fmt.Errorf("append to %s: %w", pr.p, err)
		}
		first += n
		recs = recs[n:]
	}
	return nil
}
