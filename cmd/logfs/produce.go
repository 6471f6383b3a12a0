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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/logfs/logfs/kafka"
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
		cl     clusterArgs
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
  echo '{"key":"k1","value":"v1","headers":{"h":"x"}}' | logfs produce --format jsonl orders
  seq 10 | logfs produce --bootstrap-server kafka1:9092 orders 0`,
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
			logger := newLogger(cmd.ErrOrStderr(), slog.LevelWarn, false, false)
			var l *storage.Log
			var p *storage.Partition
			var send func([]storage.Record) (int, record.Offset, error)
			closeLog := closeLog
			// Ctrl-C ends ctx (see secondSignalQuits). To a cluster it is
			// caught from before the cluster is opened, which a signal
			// quits (nothing is on its way yet), so that one that comes as
			// that lets go is caught here.
			var ctx context.Context
			stop := func() {}
			interruptible := func() {
				if ctx == nil {
					ctx, stop = signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				}
			}
			defer func() { stop() }()
			if cl.enabled() {
				cl.dataSet = cmd.Flags().Changed("data")
				var kc *kafka.Cluster
				interruptible()
				stopQuit := quitOnSignal(cmd, "interrupted while opening the cluster; nothing was appended")
				kc, p, closeLog, err = clusterPartition(cmd, cl, dir, topic, id, logger)
				stopQuit()
				if err != nil {
					return err
				}
				send = func(recs []storage.Record) (int, record.Offset, error) { return kc.ProduceAt(cmd.Context(), p, recs) }
			} else {
				if l, err = openExistingLog(dir, storage.Options{Logger: logger}); err != nil {
					return err
				}
				p, err = findPartition(l, topic, id)
			}
			var sum produceSummary
			if err == nil {
				interruptible()
				finished := make(chan struct{})
				go secondSignalQuits(ctx, stop, finished, cmd.ErrOrStderr())
				in := cmd.InOrStdin()
				m := newMeter(progressOut, "producing", inputSize(in))
				sum, err = produce(ctx, &meterReader{r: in, m: m}, p, f, m, send)
				close(finished)
				m.finish()
				stop()
				if err != nil && sum.records > 0 {
					// The summary is not printed on a failure: the error
					// says what went in before it, to go on from there.
					err = fmt.Errorf("%w; before that, %s", err, strings.TrimPrefix(sum.String(p), "logfs produce: "))
				}
			}
			if err = closeLog(l, err); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), sum.String(p))
			return nil
		},
	}
	addDataFlag(cmd, &dir)
	addClusterFlags(cmd, &cl, false)
	cmd.Flags().StringVarP(&format, "format", "f", "values", "input format: values (a line is a value) or jsonl")
	return cmd
}

// secondSignalQuits lets a second Ctrl-C (or SIGTERM) end the process at
// once. The first ends ctx: produce stops reading, appends the partial
// line and waits for the batches on their way, so that its summary is
// true; to a broker that does not answer that wait lasts up to
// delivery.timeout.ms, said after a second unless finished closes first.
// The second removes the temporary copies (see clusterPartition) and
// exits with the signal's status.
func secondSignalQuits(ctx context.Context, stop context.CancelFunc, finished <-chan struct{}, stderr io.Writer) {
	<-ctx.Done()
	// Caught here before stop lets go of them: no signal finds the
	// default action, which would leave the temporary copy behind.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	stop()
	if context.Cause(ctx) == context.Canceled {
		return // produce ended by itself (stop cancels ctx too)
	}
	said := time.After(time.Second)
	for {
		select {
		case <-said:
			fmt.Fprintln(stderr, "logfs produce: interrupted; waiting for the records on their way to be acknowledged (Ctrl-C again quits at once: they may still be appended)")
		case s := <-sig:
			quit(stderr, s, "logfs produce: interrupted again; quitting: the records on their way may still be appended")
		case <-finished:
			return
		}
	}
}

// produceSummary is what a produce appended.
type produceSummary struct {
	records     int
	bytes       int64 // of input, '\n's included
	first, last record.Offset
}

// String is the line produce ends with: records, bytes, offsets.
func (s produceSummary) String(p *storage.Partition) string {
	if s.records == 0 {
		return fmt.Sprintf("logfs produce: appended no records to %s (no input); its log ends at offset %d", p, p.EndOffset())
	}
	offsets := fmt.Sprintf("offset %d", s.first)
	if s.last != s.first {
		offsets = fmt.Sprintf("offsets %d to %d", s.first, s.last)
	}
	return fmt.Sprintf("logfs produce: appended %d record%s (%s of input) to %s at %s", s.records, plural(s.records), sizeString(s.bytes), p, offsets)
}

// inputSize is what is left of r to read when it is a regular file
// (stdin redirected from one), else -1.
func inputSize(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return -1
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return -1
	}
	pos, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return -1
	}
	return max(st.Size()-pos, 0)
}

// meterReader counts what is read for a meter.
type meterReader struct {
	r io.Reader
	m *meter
}

func (mr *meterReader) Read(b []byte) (int, error) {
	n, err := mr.r.Read(b)
	mr.m.add(int64(n))
	return n, err
}

// produce appends the lines of r to p until r ends or ctx is done, and
// says what it appended.
func produce(ctx context.Context, r io.Reader, p *storage.Partition, f storage.Format, m *meter, send func([]storage.Record) (int, record.Offset, error)) (produceSummary, error) {
	pr := producer{p: p, format: f, line: 1, meter: m, send: send}
	err := pr.run(ctx, r)
	return pr.sum, err
}

func (pr *producer) run(ctx context.Context, r io.Reader) error {
	p := pr.p
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
		if limit := p.Topic().Config().MaxMessageBytes; pr.tooLong(len(pr.pending), limit) {
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
	lens    []int64 // of recs' lines, '\n' included
	sum     produceSummary
	meter   *meter
	// send produces to a cluster instead (--bootstrap-server): the records
	// that fit one batch, how many, and the first one's offset.
	send func([]storage.Record) (int, record.Offset, error)
}

// tooLong reports whether an unfinished line already n bytes long can no
// longer become a record under limit, as the mount's append files judge
// it: a JSON line can encode a value in a sixth of its length (\u0000
// escapes, as consume --format jsonl prints NULs).
func (pr *producer) tooLong(n int, limit int64) bool {
	if pr.format == storage.JSONL {
		return int64(n) > 6*limit+4096
	}
	return int64(n) > limit
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

// appendLines appends b, whole lines each ending in '\n', in one atomic
// Partition.Append (a cluster takes what fits one batch at a time).
func (pr *producer) appendLines(b []byte) error {
	first := pr.line
	cfg := pr.p.Topic().Config()
	pr.recs, pr.lens = pr.recs[:0], pr.lens[:0]
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
		pr.lens = append(pr.lens, int64(i+1))
		pr.line++
		b = b[i+1:]
	}
	// Locally, one atomic Append: one batch unless it would not fit
	// max.message.bytes or a segment, and nothing of it on an error.
	recs := pr.recs
	for len(recs) > 0 {
		n := len(recs)
		var off record.Offset
		var err error
		if pr.send != nil {
			n, off, err = pr.send(recs) // a cluster's batch: what fits one
		} else {
			off, err = pr.p.Append(recs)
		}
		if err != nil && n > 0 && n < len(recs) {
			// A cluster took the first ones; the rest failed and may
			// have been appended: not sent again.
			return fmt.Errorf("append to %s: lines before %d went in; from line %d on: %w (not sent again)", pr.p, first+n, first+n, err)
		}
		if err != nil {
			if errors.Is(err, storage.ErrRecordTooLarge) {
				return fmt.Errorf("line %d: %w", first, err)
			}
			return fmt.Errorf("append to %s: %w", pr.p, err)
		}
		if pr.sum.records == 0 {
			pr.sum.first = off
		}
		pr.sum.records += n
		pr.sum.last = off + record.Offset(n) - 1
		for _, k := range pr.lens[len(pr.recs)-len(recs):][:n] {
			pr.sum.bytes += k
		}
		if pr.meter != nil {
			pr.meter.setDetail(fmt.Sprintf("%d records", pr.sum.records))
		}
		first += n
		recs = recs[n:]
	}
	return nil
}
