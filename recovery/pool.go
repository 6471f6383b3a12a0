package recovery

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logfs/logfs/layout"
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

	// Progress: the .log bytes of every partition that will be scanned,
	// counted down as each partition passes its segments.
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
				bytesLeft.Add(dirLogBytes(p))
				<-sem
			}()
		}
		wg.Wait()
		logger.Info("recovering logs", "partitions", len(parts), "bytes", bytesLeft.Load(), "threads", threads)
	}
	done := make(chan struct{})
	var ticker sync.WaitGroup
	if !rep.Clean {
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
					p.Progress = func(n int64) { bytesLeft.Add(-n) }
				}
				states[i], errs[i] = LoadPartition(p)
				left.Add(-1)
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

// dirLogBytes sums the .log files of a partition folder, for progress.
func dirLogBytes(p PartitionOptions) int64 {
	entries, err := p.FS.ReadDir(p.Dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), layout.LogSuffix) {
			continue
		}
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}
