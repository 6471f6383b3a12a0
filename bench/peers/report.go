package peers

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/logfs/logfs/bench"
)

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes the report as aligned text tables: per record size, the
// phases (rows grouped by phase, one per log), the mixed workload, and, when
// logfs ran, logfs against every peer.
func WriteTable(w io.Writer, rep *Report) error {
	m := rep.Machine
	fmt.Fprintf(w, "peerbench: %s/%s, %s, %d CPUs (GOMAXPROCS %d), kernel %s, %s, %s RAM, data on %s, load at start %s\n",
		m.GOOS, m.GOARCH, m.GoVersion, m.NumCPU, m.GOMAXPROCS, orDash(m.Kernel), orDash(m.CPU), orDash(m.MemTotal), orDash(m.DataFS), orDash(m.LoadAvg))
	fmt.Fprintf(w, "segment %s, lookups <= %d and <= %v per phase, append+fsync <= %v, mixed: %d readers, <= %d records; %d run(s) per cell, median shown; took %.0fs\n",
		sizeStr(rep.Options.SegmentBytes), rep.Options.Lookups, rep.Options.PhaseTime, rep.Options.FsyncTime,
		rep.Options.Readers, rep.Options.MixedRecords, rep.Options.Repeat, rep.Elapsed)
	fmt.Fprintln(w, "time/op: per record (append, read, mixed appender) or per lookup; p50/p99: per Append call (+Sync) or per lookup;")
	fmt.Fprintln(w, "MB/s: value bytes; x raw: time/op / raw's time/op in the same row group (raw = write(2)/pread(2) physical floor, not an indexed log);")
	fmt.Fprintln(w, "max/min: slowest / fastest time/op over the runs of the cell.")

	for i, size := range rep.Options.Sizes {
		var rs []Result
		for _, r := range rep.Results {
			if r.Size == size {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		n := 0
		if i < len(rep.Records) {
			n = rep.Records[i]
		}
		fmt.Fprintf(w, "\n== record size %d B: %d records (%s of values) ==\n", size, n, sizeStr(int64(n)*int64(size)))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "phase\tbatch\tlog\tops\ttime/op\tMB/s\trec/s\tp50\tp99\tx raw\tmax/min\tnote\t")
		prev := ""
		for _, r := range sortedResults(rs) {
			if r.Phase == PhaseMixed {
				continue
			}
			group := fmt.Sprintf("%s/%d", r.Phase, r.Batch)
			if prev != "" && group != prev {
				fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t\t\t")
			}
			prev = group
			b := "-"
			if r.Batch > 0 {
				b = fmt.Sprint(r.Batch)
			}
			if r.NA != "" {
				fmt.Fprintf(tw, "%s\t%s\t%s\tn/a\t\t\t\t\t\t\t\t%s\t\n", r.Phase, b, r.Log, r.NA)
				continue
			}
			note := ""
			if r.DiskSize > 0 && r.Bytes > 0 {
				note = fmt.Sprintf("disk %.2fx values", float64(r.DiskSize)/float64(r.Bytes))
			}
			if r.Wrong > 0 {
				note = wrongStr(r)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				r.Phase, b, r.Log, r.Ops, bench.NanosCell(r.NsPerOp), mbStr(r), bench.CountCell(r.RecPerS),
				bench.DurationCell(r.LatP50), bench.DurationCell(r.LatP99), ratioStr(r.VsRaw), spreadStr(r), note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}

		var mixed []Result
		var mixedNA []string
		for _, r := range sortedResults(rs) {
			switch {
			case r.Phase != PhaseMixed:
			case r.NA != "":
				if !slices.Contains(mixedNA, r.Log) {
					mixedNA = append(mixedNA, r.Log)
				}
			default:
				mixed = append(mixed, r)
			}
		}
		if len(mixed) > 0 || len(mixedNA) > 0 {
			fmt.Fprintf(w, "\nmixed (size %d B): one appender, readers following the tail from offset 0; lag = start of the Append call -> reader has the record\n", size)
		}
		if len(mixed) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "batch\tlog\trecords\tappend time/op\tappend MB/s\treaders\treaders MB/s (sum)\tlag p50\tlag p99\tlag max\tnote\t")
			for _, r := range mixed {
				note := ""
				if r.Wrong > 0 {
					note = wrongStr(r)
				}
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%.1f\t%d\t%.1f\t%s\t%s\t%s\t%s\t\n",
					r.Batch, r.Log, r.Records, bench.NanosCell(r.NsPerOp), r.MBps, r.Readers, r.ReaderMBps,
					bench.DurationCell(r.LagP50), bench.DurationCell(r.LagP99), bench.DurationCell(r.LagMax), note)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if len(mixedNA) > 0 {
			fmt.Fprintf(w, "n/a (readers cannot wait for data): %s\n", strings.Join(mixedNA, ", "))
		}
	}
	if err := writeLogfsVsPeers(w, rep.Results); err != nil {
		return err
	}
	if bad := rep.WrongAnswers(); len(bad) > 0 {
		fmt.Fprintf(w, "\n== WRONG ANSWERS ==\n")
		for _, r := range bad {
			fmt.Fprintf(w, "%s %s size=%d batch=%d: %s, first: %s\n",
				r.Log, r.Phase, r.Size, r.Batch, wrongStr(r), r.WrongExample)
		}
	}
	return nil
}

// writeLogfsVsPeers prints logfs time/op divided by each peer's, per cell.
func writeLogfsVsPeers(w io.Writer, rs []Result) error {
	type key struct {
		phase       string
		size, batch int
	}
	byKey := map[key]map[string]float64{}
	var peers []string
	var keys []key
	for _, r := range rs {
		if r.NA != "" || r.NsPerOp <= 0 {
			continue
		}
		k := key{r.Phase, r.Size, r.Batch}
		if byKey[k] == nil {
			byKey[k] = map[string]float64{}
			keys = append(keys, k)
		}
		byKey[k][r.Log] = r.NsPerOp
		if r.Log != LogfsName && !slices.Contains(peers, r.Log) {
			peers = append(peers, r.Log)
		}
	}
	has := false
	for _, k := range keys {
		if _, ok := byKey[k][LogfsName]; ok {
			has = true
		}
	}
	if !has {
		return nil
	}
	fmt.Fprintf(w, "\n== logfs time/op / peer time/op (< 1: logfs faster) ==\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "size\tphase\tbatch\t%s\t\n", strings.Join(peers, "\t"))
	for _, k := range keys {
		lf, ok := byKey[k][LogfsName]
		if !ok {
			continue
		}
		cells := make([]string, len(peers))
		for i, p := range peers {
			cells[i] = "n/a"
			if v, ok := byKey[k][p]; ok {
				cells[i] = ratioStr(lf / v)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t\n", k.size, k.phase, k.batch, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// sortedResults orders rows by phase (report order), batch, then log
// (report order), keeping results stable.
func sortedResults(rs []Result) []Result {
	out := slices.Clone(rs)
	logRank := map[string]int{}
	for i, n := range Adapters() {
		logRank[n] = i
	}
	slices.SortStableFunc(out, func(a, b Result) int {
		if d := slices.Index(Phases, a.Phase) - slices.Index(Phases, b.Phase); d != 0 {
			return d
		}
		if d := a.Batch - b.Batch; d != 0 {
			return d
		}
		return logRank[a.Log] - logRank[b.Log]
	})
	return out
}

func progressLine(r Result) string {
	head := fmt.Sprintf("size=%-5d batch=%-2d %-12s %-10s", r.Size, r.Batch, r.Phase, r.Log)
	if r.NA != "" {
		return head + " n/a: " + r.NA
	}
	s := fmt.Sprintf("%s %9s/op %9s MB/s  p50 %s p99 %s  (%d ops)", head, bench.NanosCell(r.NsPerOp), mbStr(r), bench.DurationCell(r.LatP50), bench.DurationCell(r.LatP99), r.Ops)
	if r.Phase == PhaseMixed {
		s += fmt.Sprintf("  readers %.1f MB/s lag p50 %s p99 %s", r.ReaderMBps, bench.DurationCell(r.LagP50), bench.DurationCell(r.LagP99))
	}
	if r.Wrong > 0 {
		s += fmt.Sprintf("  WRONG %d: %s", r.Wrong, r.WrongExample)
	}
	return s
}

// wrongStr: Wrong is summed over all runs of the cell, Ops is per run.
func wrongStr(r Result) string {
	if r.Runs > 1 {
		return fmt.Sprintf("WRONG %d in %d runs of %d ops", r.Wrong, r.Runs, r.Ops)
	}
	return fmt.Sprintf("WRONG %d of %d", r.Wrong, r.Ops)
}

func spreadStr(r Result) string {
	if r.Runs < 2 || r.MinNsPerOp <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.MaxNsPerOp/r.MinNsPerOp)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func mbStr(r Result) string {
	if r.Bytes == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", r.MBps)
}

func ratioStr(x float64) string {
	if x <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", x)
}

func sizeStr(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
