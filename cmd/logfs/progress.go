package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/logfs/logfs/recovery"
)

// Progress of long work (recovery, check, produce) for the person waiting
// on it. On a terminal a bar on stderr shows bytes done of the total, the
// rate, the time left and a detail (partitions left, say); it appears once
// the work has taken progressDelay, so quick work shows nothing, and is
// cleared at the end. When stderr is not a terminal (a log file, the
// journal), a line goes to the log every progressInterval instead.
//
// LOGFS_PROGRESS_DELAY and LOGFS_PROGRESS_INTERVAL (Go durations) change
// both, for tests and for people who want more or fewer lines.
var (
	progressDelay    = envDuration("LOGFS_PROGRESS_DELAY", 500*time.Millisecond)
	progressInterval = envDuration("LOGFS_PROGRESS_INTERVAL", 5*time.Second)
	// progressOut is where progress goes: the command's stderr (run sets it).
	progressOut io.Writer = os.Stderr
)

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d >= 0 {
		return d
	}
	return def
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// meter follows one piece of work. Its methods may be called from any
// goroutine; the display runs on its own.
type meter struct {
	what   string // "recovering", "checking", "producing"
	unit   string // "" for bytes, else what is counted ("partitions")
	total  atomic.Int64
	done   atomic.Int64
	detail atomic.Pointer[string]
	start  time.Time

	w      io.Writer
	term   bool
	logger *slog.Logger
	bar    *progressbar.ProgressBar // once shown; after startMeter's first draw only the display goroutine touches it

	stopOnce sync.Once
	stop     chan struct{}
	stopped  chan struct{}
}

// newMeter starts following work of total bytes (-1: not known) and
// displays it on w.
func newMeter(w io.Writer, what string, total int64) *meter {
	return newCountMeter(w, what, "", total)
}

// newCountMeter is newMeter for work counted in units other than bytes.
func newCountMeter(w io.Writer, what, unit string, total int64) *meter {
	return startMeter(w, what, unit, total, 0, "")
}

// startMeter starts a meter with some work done and a detail already, so
// that its first frame shows them.
func startMeter(w io.Writer, what, unit string, total, done int64, detail string) *meter {
	m := &meter{what: what, unit: unit, start: time.Now(), w: w, term: isTerminal(w),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	m.total.Store(total)
	m.done.Store(done)
	m.setDetail(detail)
	if m.term {
		// The first frame, here rather than in the display goroutine: it
		// shows the work as it starts, not as it is by the time that
		// goroutine runs (on a busy machine the start's detail was gone).
		m.draw()
	} else {
		m.logger = newLogger(w, slog.LevelInfo, false, false)
	}
	go m.run()
	return m
}

func (m *meter) add(n int64)        { m.done.Add(n) }
func (m *meter) set(done int64)     { m.done.Store(done) }
func (m *meter) setTotal(n int64)   { m.total.Store(n) }
func (m *meter) setDetail(s string) { m.detail.Store(&s) }

// finish stops the display and clears the bar, if one was shown: the
// command's own last line follows on a clean line.
func (m *meter) finish() {
	m.stopOnce.Do(func() { close(m.stop) })
	<-m.stopped
}

func (m *meter) run() {
	defer close(m.stopped)
	tick := 100 * time.Millisecond
	if !m.term {
		tick = progressInterval
	}
	if tick <= 0 {
		tick = time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			if m.bar != nil {
				m.bar.Set64(m.done.Load())
				m.bar.Finish() // clears it (OptionClearOnFinish)
			}
			return
		case <-t.C:
			if m.term {
				m.draw()
			} else {
				line := m.line()
				m.logger.Info(line)
				announceStatus(line, 3*tick) // under systemd: more time to start
			}
		}
	}
}

// draw shows or updates the bar once the work has taken progressDelay.
func (m *meter) draw() {
	if m.bar == nil {
		if time.Since(m.start) < progressDelay {
			return
		}
		unitOpts := []progressbar.Option{progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true)}
		if m.unit != "" {
			unitOpts = []progressbar.Option{progressbar.OptionShowIts(), progressbar.OptionSetItsString(m.unit)}
		}
		unitOpts = append(unitOpts, progressbar.OptionShowCount(), progressbar.OptionShowTotalBytes(true))
		m.bar = progressbar.NewOptions64(m.total.Load(), append(unitOpts,
			progressbar.OptionSetWriter(m.w),
			progressbar.OptionSetDescription(m.description()),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
		)...)
	}
	if total := m.total.Load(); total != m.bar.GetMax64() {
		m.bar.ChangeMax64(total)
	}
	m.bar.Describe(m.description())
	m.bar.Set64(m.done.Load())
}

func (m *meter) description() string {
	if d := m.detail.Load(); d != nil && *d != "" {
		return m.what + ": " + *d
	}
	return m.what
}

// line is the log line of the progress so far: bytes done of the total,
// the share, the rate, the detail and the time left.
func (m *meter) line() string {
	done, total := m.done.Load(), m.total.Load()
	elapsed := time.Since(m.start)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", m.what, m.amount(done))
	if total >= 0 {
		fmt.Fprintf(&b, " of %s", m.amount(total))
		if total > 0 {
			fmt.Fprintf(&b, " (%d%%)", done*100/total)
		}
	}
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	fmt.Fprintf(&b, ", %s/s", m.amount(int64(rate)))
	if d := m.detail.Load(); d != nil && *d != "" {
		fmt.Fprintf(&b, ", %s", *d)
	}
	if total > 0 && rate > 0 && done < total {
		left := time.Duration(float64(total-done) / rate * float64(time.Second))
		fmt.Fprintf(&b, ", about %s left", left.Round(time.Second))
	}
	return b.String()
}

// amount writes n in the meter's unit.
func (m *meter) amount(n int64) string {
	if m.unit == "" {
		return sizeString(n)
	}
	return fmt.Sprintf("%d %s", n, m.unit)
}

// sizeString writes n bytes in binary units: 512 B, 1.5 KiB, 2.0 GiB.
func sizeString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// recoveryProgress returns a storage.Options.RecoveryProgress that
// shows loading a data directory: recovery after a crash or a forced
// one (check --repair) by bytes, a clean open of many partitions by
// partitions. Nothing shows for a load that is quick.
func recoveryProgress(w io.Writer) func(recovery.Progress) {
	var (
		mu sync.Mutex
		m  *meter
	)
	return func(p recovery.Progress) {
		mu.Lock()
		defer mu.Unlock()
		left := fmt.Sprintf("%d of %d partitions left", p.PartitionsLeft, p.Partitions)
		if m == nil {
			if p.Done {
				return
			}
			if p.Clean {
				m = startMeter(w, "opening", "partitions", int64(p.Partitions), int64(p.Partitions-p.PartitionsLeft), "")
			} else {
				m = startMeter(w, "recovering", "", p.Bytes, p.Bytes-p.BytesLeft, left)
			}
		}
		if p.Clean {
			m.set(int64(p.Partitions - p.PartitionsLeft))
		} else {
			m.set(p.Bytes - p.BytesLeft)
			m.setDetail(left)
		}
		if p.Done {
			m.finish()
		}
	}
}
