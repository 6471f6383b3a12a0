package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ClusterOptions is what the cluster phase (logfs bench --cluster) does.
type ClusterOptions struct {
	// Bytes is the value bytes of the partition read; default 256 MiB.
	Bytes int64
	// Size is the record value size; default 1 KiB.
	Size int
	// AppendBytes is the size of the file cat >> append writes; default
	// 64 MiB.
	AppendBytes int64
	// Lags is the records produced one at a time for the tail -f lag;
	// default 200.
	Lags int
	// Seed seeds the values.
	Seed uint64
	// Dir is the parent of the run's temporary directory.
	Dir string
	// Exe is the logfs binary whose mount serves the cluster.
	Exe string
	// Kcat is the kcat binary of the baselines; "" looks it up on PATH.
	Kcat string
}

// DefaultClusterOptions returns the defaults of logfs bench --cluster.
func DefaultClusterOptions() ClusterOptions {
	return ClusterOptions{Bytes: 256 << 20, Size: 1024, AppendBytes: 64 << 20, Lags: 200, Seed: 1}
}

// ClusterResult is one row of the cluster phase's report.
type ClusterResult struct {
	What     string  `json:"what"`
	Seconds  float64 `json:"seconds,omitempty"`
	MBps     float64 `json:"mb_per_s,omitempty"`
	Baseline string  `json:"baseline,omitempty"`
	BaseMBps float64 `json:"baseline_mb_per_s,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"` // MBps / BaseMBps
	P50ms    float64 `json:"p50_ms,omitempty"`
	P99ms    float64 `json:"p99_ms,omitempty"`
	Target   string  `json:"target,omitempty"`
}

// RunCluster measures logfs's mount of a Kafka cluster against kcat on
// the same partition, in the same run: a fake cluster (kfake) in this
// process, a `logfs mount --bootstrap-server` child mounting it, kcat and
// cat as their own processes. Every byte read through the mount is
// checked against what was produced. It removes everything it made.
func RunCluster(ctx context.Context, o ClusterOptions, progress io.Writer) (_ []ClusterResult, err error) {
	if o.Size < MinSize {
		return nil, fmt.Errorf("%w: record size %d below %d", ErrInvalidOptions, o.Size, MinSize)
	}
	if o.Kcat == "" {
		if o.Kcat, err = exec.LookPath("kcat"); err != nil {
			return nil, fmt.Errorf("the cluster phase compares with kcat, which is not installed (Debian: apt-get install kcat)")
		}
	}
	logf := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, format+"\n", args...)
		}
	}
	root, err := os.MkdirTemp(o.Dir, "logfs-bench-cluster-")
	if err != nil {
		return nil, err
	}
	r := &runner{o: Options{Exe: o.Exe}, root: root}
	defer func() { err = errors.Join(err, r.cleanup()) }()

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "read", "tail", "append-logfs", "append-kcat"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	p := newPayload(o.Size, o.Seed)
	n := o.Bytes / int64(o.Size)
	logf("logfs bench --cluster: a fake cluster at %s; producing %d records of %d B (%s) to topic read", brokers, n, o.Size, fmt.Sprintf("%d MiB", o.Bytes>>20))
	if err := produceValues(ctx, c, "read", p, n); err != nil {
		return nil, err
	}

	var out []ClusterResult
	mbps := func(d time.Duration) float64 { return float64(o.Bytes) / 1e6 / d.Seconds() }
	kcatRead := func() (time.Duration, error) {
		return runTool(ctx, io.Discard, o.Kcat, "-C", "-b", brokers, "-t", "read", "-p", "0", "-o", "beginning", "-e", "-q")
	}
	kd, err := kcatRead()
	if err != nil {
		return nil, err
	}
	logf("kcat -C -e -q > /dev/null: %.2f s, %.0f MB/s of values", kd.Seconds(), mbps(kd))

	copyDir, mp := filepath.Join(root, "copy"), filepath.Join(root, "mnt")
	m, err := r.startCluster(ctx, brokers, copyDir, mp)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(mp, "read/0/offset/0")
	cold, err := runTool(ctx, io.Discard, "cat", file)
	if err != nil {
		return nil, err
	}
	kd2, err := kcatRead()
	if err != nil {
		return nil, err
	}
	base := (kd + kd2) / 2
	logf("cat offset/0 > /dev/null, cold (nothing local): %.2f s, %.0f MB/s; kcat again %.2f s", cold.Seconds(), mbps(cold), kd2.Seconds())
	out = append(out, ClusterResult{What: "cat offset/0, cold (copy empty)", Seconds: cold.Seconds(), MBps: mbps(cold),
		Baseline: "kcat -C -e -q (mean of two)", BaseMBps: mbps(base), Ratio: base.Seconds() / cold.Seconds(), Target: ">= 1.5x kcat"})
	if err := checkRead(file, p, n); err != nil {
		return nil, fmt.Errorf("WRONG: %s: %w", file, err)
	}
	warm, err := runTool(ctx, io.Discard, "cat", file)
	if err != nil {
		return nil, err
	}
	warm2, err := runTool(ctx, io.Discard, "cat", file)
	if err != nil {
		return nil, err
	}
	// The same bytes from a local mount: the copy is a data directory,
	// closed cleanly first, as a local one would be.
	if err := m.stop(); err != nil {
		return nil, err
	}
	lmp := filepath.Join(root, "lmnt")
	lm, err := r.startMountArgs(ctx, lmp, "mount", "--read-only", "--data", copyDir, lmp)
	if err != nil {
		return nil, err
	}
	lfile := filepath.Join(lmp, "read/0/offset/0")
	ld, err := runTool(ctx, io.Discard, "cat", lfile)
	if err != nil {
		return nil, err
	}
	ld2, err := runTool(ctx, io.Discard, "cat", lfile)
	if err != nil {
		return nil, err
	}
	if err := lm.stop(); err != nil {
		return nil, err
	}
	if m, err = r.startCluster(ctx, brokers, copyDir, filepath.Join(root, "mnt2")); err != nil {
		return nil, err
	}
	mp = filepath.Join(root, "mnt2")
	w, l := (warm+warm2)/2, (ld+ld2)/2
	logf("cat offset/0 again: %.2f and %.2f s; a local mount of the copy: %.2f and %.2f s", warm.Seconds(), warm2.Seconds(), ld.Seconds(), ld2.Seconds())
	out = append(out, ClusterResult{What: "cat offset/0, again (copy local)", Seconds: w.Seconds(), MBps: mbps(w),
		Baseline: "cat offset/0 of a local mount of the same data", BaseMBps: mbps(l), Ratio: l.Seconds() / w.Seconds(), Target: "as fast as local (1x)"})

	lags, fileLags, err := tailLag(ctx, c, mp, o.Lags)
	if err != nil {
		return nil, err
	}
	out = append(out, ClusterResult{What: "tail -f offset/latest: produce ack -> line out of tail", P50ms: pct(lags, 50), P99ms: pct(lags, 99)},
		ClusterResult{What: "produce ack -> record readable in the file", P50ms: pct(fileLags, 50), P99ms: pct(fileLags, 99)})
	logf("lag from produce ack: tail -f p50 %.1f ms p99 %.1f ms; in the file p50 %.1f ms p99 %.1f ms",
		pct(lags, 50), pct(lags, 99), pct(fileLags, 50), pct(fileLags, 99))

	// cat FILE >> append against kcat -P of the same file.
	src := filepath.Join(root, "lines")
	lines := o.AppendBytes / int64(o.Size)
	if err := writeRendering(src, p, 0, lines); err != nil {
		return nil, err
	}
	ad, err := runTool(ctx, io.Discard, "sh", "-c", `cat "$1" >> "$2"`, "sh", src, filepath.Join(mp, "append-logfs/0/append"))
	if err != nil {
		return nil, err
	}
	pd, err := runTool(ctx, io.Discard, "sh", "-c", `"$1" -P -b "$2" -t append-kcat -p 0 < "$3"`, "sh", o.Kcat, brokers, src)
	if err != nil {
		return nil, err
	}
	if err := checkRead(filepath.Join(mp, "append-logfs/0/offset/0"), p, lines); err != nil {
		return nil, fmt.Errorf("WRONG: what cat >> append appended: %w", err)
	}
	if err := checkKcat(ctx, o.Kcat, brokers, "append-kcat", p, lines); err != nil {
		return nil, fmt.Errorf("WRONG: what kcat -P appended: %w", err)
	}
	abytes := float64(lines * int64(o.Size+1))
	out = append(out, ClusterResult{What: fmt.Sprintf("cat FILE >> append (%d MiB)", int64(abytes)>>20), Seconds: ad.Seconds(), MBps: abytes / 1e6 / ad.Seconds(),
		Baseline: "kcat -P < FILE", BaseMBps: abytes / 1e6 / pd.Seconds(), Ratio: pd.Seconds() / ad.Seconds()})
	logf("cat >> append: %.2f s; kcat -P: %.2f s", ad.Seconds(), pd.Seconds())
	return out, m.stop()
}

// WriteClusterTable prints the cluster phase's rows.
func WriteClusterTable(w io.Writer, rows []ClusterResult) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "cluster (kfake in this process)\tlogfs\tbaseline\tx base\ttarget")
	for _, r := range rows {
		if r.P50ms > 0 || r.P99ms > 0 {
			fmt.Fprintf(tw, "%s\tp50 %.1f ms, p99 %.1f ms\t\t\t%s\n", r.What, r.P50ms, r.P99ms, r.Target)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f MB/s (%.2f s)\t%s: %.0f MB/s\t%.2fx\t%s\n", r.What, r.MBps, r.Seconds, r.Baseline, r.BaseMBps, r.Ratio, r.Target)
	}
	return tw.Flush()
}

// produceValues produces the payload's values of offsets [0, n) to topic.
func produceValues(ctx context.Context, c *kfake.Cluster, topic string, p *payload, n int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<16),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var mu sync.Mutex
	var first error
	for off := int64(0); off < n; off++ {
		v := make([]byte, p.size)
		p.fill(v, off)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: v, Timestamp: time.UnixMilli(timestampOf(off))}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = cmpErr(first, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// checkRead reads a record file in 1 MiB reads and checks every byte.
func checkRead(path string, p *payload, n int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := newExpectWriter(p, 0, n)
	if _, err := io.CopyBuffer(w, f, make([]byte, 1<<20)); err != nil {
		return err
	}
	return w.done()
}

// checkKcat checks what kcat consumes of topic.
func checkKcat(ctx context.Context, kcat, brokers, topic string, p *payload, n int64) error {
	w := newExpectWriter(p, 0, n)
	if _, err := runTool(ctx, w, kcat, "-C", "-b", brokers, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"); err != nil {
		return err
	}
	return w.done()
}

// startCluster runs `logfs mount --bootstrap-server` and waits for it.
func (r *runner) startCluster(ctx context.Context, brokers, copyDir, mp string) (*mountProc, error) {
	return r.startMountArgs(ctx, mp, "mount", "--bootstrap-server", brokers, "--data", copyDir, mp)
}

// tailLag produces one record at a time to topic tail while tail -f
// follows offset/latest and a reader polls the same file, and returns the
// delays from each produce's acknowledgement to the record's line out of
// tail, and to its bytes in the file.
func tailLag(ctx context.Context, c *kfake.Cluster, mp string, count int) (tailMs, fileMs []float64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	path := filepath.Join(mp, "tail/0/offset/latest")
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tail := exec.CommandContext(tctx, "tail", "-f", path)
	stdout, err := tail.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := tail.Start(); err != nil {
		return nil, nil, err
	}
	defer func() { cancel(); _ = tail.Wait() }()
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	type seen struct {
		line string
		at   time.Time
	}
	tailLines, fileLines := make(chan seen, count), make(chan seen, count)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			tailLines <- seen{sc.Text(), time.Now()}
		}
	}()
	go func() {
		var pos int64
		var pending []byte
		buf := make([]byte, 64<<10)
		for tctx.Err() == nil {
			k, _ := f.ReadAt(buf, pos)
			if k == 0 {
				time.Sleep(200 * time.Microsecond)
				continue
			}
			now := time.Now()
			pos += int64(k)
			pending = append(pending, buf[:k]...)
			for {
				i := slices.Index(pending, '\n')
				if i < 0 {
					break
				}
				fileLines <- seen{string(pending[:i]), now}
				pending = pending[i+1:]
			}
		}
	}()
	time.Sleep(1500 * time.Millisecond) // tail has opened the file and looked at its size
	acked := make([]time.Time, count)
	for i := 0; i < count; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tail", Value: []byte("lag-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			return nil, nil, err
		}
		acked[i] = time.Now()
		time.Sleep(10 * time.Millisecond)
	}
	collect := func(ch chan seen, what string) ([]float64, error) {
		var out []float64
		deadline := time.After(10 * time.Second)
		for i := 0; i < count; i++ {
			select {
			case s := <-ch:
				if s.line != "lag-"+strconv.Itoa(i) {
					return nil, fmt.Errorf("WRONG: %s gave %q where lag-%d was produced", what, s.line, i)
				}
				out = append(out, float64(s.at.Sub(acked[i]).Microseconds())/1000)
			case <-deadline:
				return nil, fmt.Errorf("%s showed %d of %d records", what, i, count)
			}
		}
		return out, nil
	}
	if fileMs, err = collect(fileLines, "the record file"); err != nil {
		return nil, nil, err
	}
	tailMs, err = collect(tailLines, "tail -f")
	return tailMs, fileMs, err
}

func pct(v []float64, p int) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(min(i, len(s))-1, 0)]
}
