package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as one indented JSON object.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes the report as logfs bench prints it: a header on the
// machine and the load, a table per record size, the memory phase, the
// targets, and a last line when there were wrong answers.
func (rep *Report) WriteTable(w io.Writer) error {
	m, o := rep.Machine, rep.Options
	fmt.Fprintf(w, "logfs bench: %s/%s, %s, %d CPUs (GOMAXPROCS %d), kernel %s, %s, %s RAM, data on %s\n",
		m.GOOS, m.GOARCH, m.GoVersion, m.NumCPU, m.GOMAXPROCS, m.Kernel, m.CPU, m.MemTotal, m.DataFS)
	fmt.Fprintf(w, "load average %s at start, %s at end; took %.0fs; segment.bytes %s, flush.ms=-1; %d run(s) per cell, median shown\n",
		m.LoadAvg, rep.LoadEnd, rep.ElapsedS, sizeCell(o.SegmentBytes), o.Count)
	fmt.Fprintln(w, "time/op: per record (append, read, mixed), lookup, or tool run; MB/s: value bytes (tools: bytes in or out);")
	fmt.Fprintln(w, "x base: baseline's time per record (per op when no records move) / this row's: > 1 is faster than the baseline;")
	fmt.Fprintln(w, "raw = write(2)/read(2)/pread(2) of the same values, no index; plain = the same tool on a plain file.")
	for i, size := range o.Sizes {
		var rows []Result
		for _, r := range rep.Results {
			if r.Size == size {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n== record size %d B: %d records (%s of values) ==\n", size, rep.Records[i], sizeCell(rep.Records[i]*int64(size)))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "phase\tbatch\tsubject\tops\ttime/op\tMB/s\trec/s\tp50\tp99\tx base\tchecked\tmeasured\tnote\t")
		prev := ""
		for _, r := range rows {
			group := fmt.Sprintf("%s/%d", r.Phase, r.Batch)
			if prev != "" && group != prev {
				fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t\t\t\t")
			}
			prev = group
			batch := "-"
			if r.Batch > 0 {
				batch = strconv.Itoa(r.Batch)
			}
			vs := "-"
			if r.VsBase > 0 {
				vs = fmt.Sprintf("%.2f %s", r.VsBase, r.Baseline)
			}
			note := r.Note
			if r.Phase == PhaseMixed {
				note = fmt.Sprintf("readers %.0f MB/s, lag p50 %s p99 %s; %s", r.ReaderMBps, DurationCell(r.LagP50), DurationCell(r.LagP99), note)
			}
			if r.DiskSize > 0 && r.Bytes > 0 {
				note = strings.TrimPrefix(note+fmt.Sprintf("; disk %.2fx values", float64(r.DiskSize)/float64(r.Bytes)), "; ")
			}
			if r.Wrong > 0 {
				note = fmt.Sprintf("WRONG %d: %s", r.Wrong, r.WrongExample)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.Phase, batch, r.Subject, r.Ops, NanosCell(r.NsPerOp),
				mbCell(r), CountCell(r.RecPerS), DurationCell(r.P50), DurationCell(r.P99), vs, r.Verified, r.What, note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if mem := rep.Memory; mem != nil {
		fmt.Fprintf(w, "\n== memory: a mount of %d segments (%d partitions, one batch of %d x %d B each; built in %.1fs) ==\n",
			mem.Segments, mem.Partitions, memBatch, memRecordSize, mem.BuildS)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "step\tVmRSS\tVmHWM\tmaps\tsegment file maps\tsegments mapped\t")
		for _, s := range mem.Steps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t\n", s.Step, sizeCell(s.RSS), sizeCell(s.HWM), s.Maps, s.FileMaps, s.SegsMapped)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "reads: head -n 1 at 3 segment bases and tail -n 10 in partitions 0-2, cat offset/0 of partition 3: %d segments read, %d mapped, %d mapped but not read%s; %d outputs checked\n",
			mem.SegmentsRead, mem.Mapped, mem.MappedUnread, strings.Join(append([]string{""}, mem.Unread...), " "), mem.Verified)
		if mem.Wrong > 0 {
			fmt.Fprintf(w, "WRONG %d: %s\n", mem.Wrong, mem.WrongExample)
		}
	}
	for _, m := range rep.MountRSS {
		fmt.Fprintf(w, "\nmount RSS around the readers phase (%d B): %s before, %s after serving %s\n", m.Size, sizeCell(m.Before), sizeCell(m.After), sizeCell(m.Served))
	}
	if len(rep.Targets) > 0 {
		fmt.Fprintf(w, "\n== targets (those against liftbridge: bench/peers) ==\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range rep.Targets {
			met := "MISSED"
			if t.Met {
				met = "met"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", met, t.Target, t.Measured)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if rep.Wrong > 0 {
		fmt.Fprintf(w, "\n== WRONG ANSWERS: %d ==\n", rep.Wrong)
	}
	return nil
}

// NanosCell is a table cell of a time per operation in ns, rounded to the
// ns: DurationCell's, "-" when there is none. The bench/peers tables use
// it too.
func NanosCell(ns float64) string {
	if ns <= 0 {
		return "-"
	}
	return DurationCell(time.Duration(ns + 0.5))
}

// DurationCell is a table cell of a duration: "850ns", "12.34µs",
// "1.50ms", "2.00s"; "-" for none (d <= 0). The bench/peers tables use
// it too.
func DurationCell(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.2fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func mbCell(r Result) string {
	if r.Bytes == 0 || r.MBps == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", r.MBps)
}

// CountCell is a table cell of a rate or a count: "850", "12.3k",
// "1.50M"; "-" for none (x <= 0). The bench/peers tables use it too.
func CountCell(x float64) string {
	switch {
	case x <= 0:
		return "-"
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

func sizeCell(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
