package recovery

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// progressEvery is how often LoadAll reports what is left.
const progressEvery = 5 * time.Second

// LoadAll loads partitions on a pool of threads, as Kafka's LogManager does
// with num.recovery.threads.per.data.dir: one job per partition, the
// segments of a partition in order. It logs progress (partitions and bytes
// left) while unclean loads run. Results and errors are by position.
func LoadAll(parts []PartitionOptions, threads int, logger *slog.Logger) ([]*PartitionState, []error) {
	if threads < 1 {
		threads = 1
	}
	if logger == nil {
		logger = slog.Default()
	}
	states := make([]*PartitionState, len(parts))
	errs := make([]error, len(parts))
	var left atomic.Int64
	left.Store(int64(len(parts)))
	var bytesLeft atomic.Int64
	for _, p := range parts {
		if !p.Clean {
			bytesLeft.Add(dirLogBytes(p))
		}
	}
	done := make(chan struct{})
	if bytesLeft.Load() > 0 {
		go func() {
			t := time.NewTicker(progressEvery)
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
				before := int64(0)
				if !p.Clean {
					before = dirLogBytes(p)
				}
				states[i], errs[i] = LoadPartition(p)
				bytesLeft.Add(-before)
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
	return states, errs
}

// dirLogBytes sums the .log files of a partition folder, for progress.
func dirLogBytes(p PartitionOptions) int64 {
	entries, err := p.FS.ReadDir(p.Dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && len(e.Name()) > 4 && e.Name()[len(e.Name())-4:] == ".log" {
			n += info.Size()
		}
	}
	return n
}
