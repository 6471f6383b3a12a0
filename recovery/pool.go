package recovery

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// DefaultProgressInterval is how often LoadAll reports what is left while
// it scans.
const DefaultProgressInterval = 5 * time.Second

// LoadOptions tune LoadAll.
type LoadOptions struct {
	// Threads bounds how many partitions load at once (Kafka's
	// num.recovery.threads.per.data.dir); below 1 means 1.
	Threads int
	// Logger receives progress and the summary; nil means slog.Default().
	// A partition whose options have no Logger gets this one.
	Logger *slog.Logger
	// ProgressInterval is how often progress is logged while partitions
	// are scanned; 0 means DefaultProgressInterval.
	ProgressInterval time.Duration
	// OnProgress, if not nil, is told how far the load has got: once at
	// the start, after each segment scanned or dropped and each partition
	// loaded, and once at the end (Done), clean loads included (with no
	// bytes). It is called from the loading goroutines, concurrently, and
	// must be quick. With it LoadAll logs no periodic progress lines: the
	// caller shows progress its own way (logfs draws a bar on a terminal).
	OnProgress func(Progress)
}

// Progress is how far LoadAll has got.
type Progress struct {
	Partitions     int   // partitions to load
	PartitionsLeft int   // of them not loaded yet
	Bytes          int64 // .log bytes to scan: the work ahead (ScanBytes), 0 on a clean load
	BytesLeft      int64 // of them not scanned yet
	Clean          bool  // a clean load: nothing is scanned
	Done           bool  // the last call
}

// LoadAll loads partitions on a bounded pool, as Kafka's LogManager does:
// one job per partition, the segments of a partition in order. While
// unclean loads run it logs, every ProgressInterval, how many partitions
// and how many bytes of .log are left ("recovering logs"), and at the end a
// summary ("recovery done"). States and errors are by position; the report
// lists every partition that loaded.
func LoadAll(parts []PartitionOptions, o LoadOptions) ([]*PartitionState, []error, *Report) {
	start := time.Now()
	threads := max(o.Threads, 1)
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	interval := o.ProgressInterval
	if interval <= 0 {
		interval = DefaultProgressInterval
	}
	rep := &Report{Clean: true, ReadOnly: len(parts) > 0}
	for _, p := range parts {
		rep.Clean = rep.Clean && p.Clean && !p.Force
		rep.Forced = rep.Forced || p.Force
		rep.ReadOnly = rep.ReadOnly && p.ReadOnly
	}
	states := make([]*PartitionState, len(parts))
	errs := make([]error, len(parts))

	// Progress: the .log bytes every partition will scan (ScanBytes),
	// counted down as the loads scan or drop segments.
	var left, bytesLeft atomic.Int64
	left.Store(int64(len(parts)))
	if !rep.Clean {
		var wg sync.WaitGroup
		sem := make(chan struct{}, threads)
		for _, p := range parts {
			if p.Clean && !p.Force {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				bytesLeft.Add(ScanBytes(p))
				<-sem
			}()
		}
		wg.Wait()
		logger.Info("recovering logs", "partitions", len(parts), "bytes", bytesLeft.Load(), "threads", threads)
	}
	total := bytesLeft.Load()
	report := func(done bool) {}
	if o.OnProgress != nil {
		report = func(done bool) {
			o.OnProgress(Progress{Partitions: len(parts), PartitionsLeft: int(left.Load()), Bytes: total,
				BytesLeft: bytesLeft.Load(), Clean: rep.Clean, Done: done})
		}
	}
	report(false)
	done := make(chan struct{})
	var ticker sync.WaitGroup
	if !rep.Clean && o.OnProgress == nil {
		ticker.Add(1)
		go func() {
			defer ticker.Done()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					logger.Info("recovering logs", "partitions_left", left.Load(), "bytes_left", bytesLeft.Load())
				}
			}
		}()
	}

	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(threads, len(parts)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				p := parts[i]
				if p.Logger == nil {
					p.Logger = logger
				}
				if !p.Clean || p.Force {
					p.Progress = func(n int64) {
						bytesLeft.Add(-n)
						report(false)
					}
				}
				states[i], errs[i] = LoadPartition(p)
				left.Add(-1)
				report(false)
			}
		}()
	}
	for i := range parts {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(done)
	ticker.Wait()
	report(true)

	for i, st := range states {
		if errs[i] == nil && st != nil {
			rep.Partitions = append(rep.Partitions, st.Report)
		}
	}
	rep.Duration = time.Since(start)
	if !rep.Clean {
		scanned := rep.ScannedBytes()
		mbps := 0.0
		if s := rep.Duration.Seconds(); s > 0 {
			mbps = float64(scanned) / s / 1e6
		}
		var cuts, drops, corrupt int
		for i := range rep.Partitions {
			p := &rep.Partitions[i]
			cuts, drops, corrupt = cuts+len(p.Cuts), drops+len(p.Dropped), corrupt+len(p.Corrupt)
		}
		logger.Info("recovery done", "partitions", len(parts), "scanned_bytes", scanned, "duration", rep.Duration,
			"mb_per_s", int64(mbps), "cuts", cuts, "dropped_segments", drops, "corrupt_batches", corrupt, "read_only", rep.ReadOnly)
	}
	return states, errs, rep
}

// ScanBytes is the work a load of p has ahead: the .log bytes of the
// segments it will scan (or drop), from the one holding the recovery point
// to the end, every one when forced or without a recovery point, none on a
// clean load. Segments below the log start are removed unread and not
// counted. It only lists the folder; LoadAll's progress counts it down.
func ScanBytes(p PartitionOptions) int64 {
	if p.Clean && !p.Force {
		return 0
	}
	entries, err := p.FS.ReadDir(p.Dir)
	if err != nil {
		return 0
	}
	sizes := map[record.Offset]int64{}
	var bases []record.Offset
	for _, e := range entries {
		base, suffix, ok := layout.ParseSegmentFileName(e.Name())
		if !ok || e.IsDir() || suffix != layout.LogSuffix {
			continue
		}
		if info, err := e.Info(); err == nil {
			sizes[base] = info.Size()
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	bases = bases[expiredPrefix(bases, p.LogStart):]
	l := loader{o: p}
	from := l.recoverFrom(bases)
	var n int64
	for _, b := range bases {
		if b >= from {
			n += sizes[b]
		}
	}
	return n
}
