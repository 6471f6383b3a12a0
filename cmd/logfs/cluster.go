package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	mountfs "github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// clusterArgs are the flags that point a command at a Kafka cluster
// instead of a data directory (mount, consume, produce).
type clusterArgs struct {
	bootstrap     []string // --bootstrap-server HOST:PORT[,…]
	commandConfig string   // --command-config FILE: client properties
	props         []string // -X name=value
	isolation     string   // --isolation-level
	copyBytes     string   // --copy-bytes
	dataSet       bool     // --data was given: the copy lives there
}

// enabled reports whether the command works on a cluster.
func (c *clusterArgs) enabled() bool { return len(c.bootstrap) > 0 }

// addClusterFlags adds --bootstrap-server, --command-config, -X,
// --isolation-level and (for mount) --copy-bytes.
func addClusterFlags(cmd *cobra.Command, c *clusterArgs, copyBudget bool) {
	f := cmd.Flags()
	f.StringArrayVar(&c.bootstrap, "bootstrap-server", nil, "a Kafka cluster instead of a data directory: `HOST:PORT[,HOST:PORT…]` (then --data is where the local copy lives)")
	f.StringVar(&c.commandConfig, "command-config", "", "Kafka client properties `FILE` (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location …), as Kafka's tools take it")
	f.StringArrayVarP(&c.props, "property", "X", nil, "one Kafka client property `name=value` (repeatable; overrides --command-config)")
	f.StringVar(&c.isolation, "isolation-level", "read_committed", "read_committed (records of committed transactions only, up to the last stable offset, as kcat shows) or read_uncommitted (aborted and open ones too)")
	if copyBudget {
		f.StringVar(&c.copyBytes, "copy-bytes", "", "with --bootstrap-server: byte budget of the local copy (4g by default; k, m, g suffixes)")
	}
}

// properties gathers the client properties: the file, then -X, then
// --isolation-level when it was given.
func (c *clusterArgs) properties(cmd *cobra.Command) (kafka.Properties, error) {
	props := kafka.Properties{}
	if c.commandConfig != "" {
		p, err := kafka.ReadProperties(c.commandConfig)
		if err != nil {
			return nil, fmt.Errorf("--command-config: %w", err)
		}
		props = p
	}
	for _, kv := range c.props {
		if err := props.SetPair(kv); err != nil {
			return nil, usageErrorf("-X %s: %v", kv, err)
		}
	}
	if cmd.Flags().Changed("isolation-level") || props["isolation.level"] == "" {
		if _, err := kafka.ParseIsolationLevel(c.isolation); err != nil {
			return nil, usageErrorf("--isolation-level %q: want read_committed or read_uncommitted", c.isolation)
		}
		props["isolation.level"] = c.isolation
	}
	return props, nil
}

// parseBytes reads a size such as 512m or 4g.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(strings.ToLower(s), "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(strings.ToLower(s), "m"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(strings.ToLower(s), "g"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("want a positive size such as 512m or 4g")
	}
	return n * mult, nil
}

// openCluster connects to the cluster and opens the local copy: in dir
// when --data was given, else in the cluster's own cache directory.
func openCluster(ctx context.Context, cmd *cobra.Command, c clusterArgs, dir string, logger *slog.Logger) (*kafka.Cluster, error) {
	props, err := c.properties(cmd)
	if err != nil {
		return nil, err
	}
	o := kafka.Options{Brokers: c.bootstrap, Properties: props, Logger: logger}
	if c.dataSet {
		o.Dir = dir
	}
	if c.copyBytes != "" {
		if o.CopyBytes, err = parseBytes(c.copyBytes); err != nil {
			return nil, usageErrorf("--copy-bytes %q: %v", c.copyBytes, err)
		}
	}
	return kafka.Open(ctx, o)
}

// mountCluster is the cluster as the mount's Options want it: a nil
// interface, not a nil pointer, when there is none.
func mountCluster(c *kafka.Cluster) mountfs.Cluster {
	if c == nil {
		return nil
	}
	return c
}

// clusterPartition opens the cluster for produce or consume and returns
// the copy of one of its partitions, and how to close it all. Without
// --data the copy is a temporary directory, removed at the end, so that
// the command works beside a mount of the same cluster.
func clusterPartition(cmd *cobra.Command, c clusterArgs, dir, topic string, id int, logger *slog.Logger) (*kafka.Cluster, *storage.Partition, func(*storage.Log, error) error, error) {
	tmp := ""
	if !c.dataSet {
		var err error
		if tmp, err = os.MkdirTemp("", "logfs-copy-"); err != nil {
			return nil, nil, nil, err
		}
		tempCopies.Store(tmp, struct{}{})
		dir, c.dataSet = tmp, true
	}
	removeTemp := func() {
		if tmp != "" {
			os.RemoveAll(tmp)
			tempCopies.Delete(tmp)
		}
	}
	kc, err := openCluster(cmd.Context(), cmd, c, dir, logger)
	if err != nil {
		removeTemp()
		return nil, nil, nil, err
	}
	closeAll := func(_ *storage.Log, err error) error {
		err = errors.Join(err, kc.Close())
		removeTemp()
		return err
	}
	p, err := kc.Copy(cmd.Context(), topic, id)
	if err != nil {
		if errors.Is(err, storage.ErrNoTopic) || errors.Is(err, storage.ErrNoPartition) {
			err = fmt.Errorf("the cluster has no partition %d of topic %q", id, topic)
		}
		return nil, nil, nil, closeAll(nil, err)
	}
	return kc, p, closeAll, nil
}

// tempCopies are the temporary copies of cluster commands open now: a
// command that a second signal ends at once (see secondSignalQuits)
// removes them on its way out.
var tempCopies sync.Map // directory → struct{}

func removeTempCopies() {
	tempCopies.Range(func(dir, _ any) bool {
		os.RemoveAll(dir.(string))
		return true
	})
}

// quitOnSignal makes Ctrl-C or SIGTERM end the command at once, saying
// why after its name, until the returned func is called: while
// clusterPartition makes a temporary copy and opens the cluster (up to
// 15 s for a first contact that gets no answer), and while consume
// fetches into it what it prints. The signal's default action would leave
// the copy behind. A command that handles signals itself afterwards
// installs its handler first, so that a signal at the handover reaches
// one of them.
func quitOnSignal(cmd *cobra.Command, why string) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			quit(cmd.ErrOrStderr(), s, cmd.CommandPath()+": "+why)
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
		})
	}
}

// quit removes the temporary copies, says why it quits, and exits with
// the status of a process that signal s ended.
func quit(stderr io.Writer, s os.Signal, why string) {
	removeTempCopies()
	fmt.Fprintln(stderr, why)
	code := 128 + int(syscall.SIGTERM)
	if n, ok := s.(syscall.Signal); ok {
		code = 128 + int(n)
	}
	os.Exit(code)
}

// consumeCluster is consume of a cluster's partition: the bytes of the
// mount's record file, from a copy that holds them (see kafka.Cluster.Hold),
// then with --follow what the copy gains as it follows the cluster.
func consumeCluster(ctx context.Context, cmd *cobra.Command, out *bufio.Writer, c consumeArgs) error {
	logger := newLogger(cmd.ErrOrStderr(), slog.LevelWarn, c.debug, false)
	// Ctrl-C quits at once, the copy removed: with --follow only while
	// the cluster is opened, as it then ends ctx.
	stop := quitOnSignal(cmd, "interrupted")
	defer stop()
	kc, p, closeAll, err := clusterPartition(cmd, c.cluster, c.dir, c.topic, c.partition, logger)
	if err != nil {
		return err
	}
	if c.follow {
		stop()
	}
	return closeAll(nil, printCluster(ctx, out, kc, p, c))
}

func printCluster(ctx context.Context, out *bufio.Writer, kc *kafka.Cluster, p *storage.Partition, c consumeArgs) error {
	start, end, err := kc.Offsets(ctx, p)
	if err != nil {
		return err
	}
	var from record.Offset
	switch c.offset {
	case "earliest":
		from = start
	case "latest":
		from = end
	case "":
		ts, err := storage.ParseTimeBound(c.time)
		if err != nil {
			return err
		}
		if from, err = kc.OffsetForTime(ctx, p, ts); err != nil {
			return err
		}
	default:
		n, err := strconv.ParseInt(c.offset, 10, 64)
		if err != nil {
			return err
		}
		switch from = record.Offset(n); {
		case from < start:
			return fmt.Errorf("offset %d of %s is gone: the cluster's log starts at %d (older records were deleted)", from, p, start)
		case from > end:
			return fmt.Errorf("offset %d of %s does not exist yet: the cluster's log ends at %d", from, p, end)
		}
	}
	release, err := kc.Hold(ctx, p, from)
	if err != nil {
		return err
	}
	defer release()
	v, err := p.NewView(c.format, from)
	if err != nil {
		return err
	}
	defer v.Close()
	size, err := v.Size() // what the record file shows now
	if err != nil {
		return err
	}
	buf := make([]byte, 256<<10)
	for pos := int64(0); ; {
		ch := p.Changed()
		for c.follow || pos < size {
			want := buf
			if !c.follow {
				want = buf[:min(int64(len(buf)), size-pos)]
			}
			n, err := v.ReadAt(want, pos)
			if _, werr := out.Write(want[:n]); werr != nil {
				return fmt.Errorf("write: %w", werr)
			}
			pos += int64(n)
			if err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
		}
		if !c.follow {
			return nil
		}
		if err := out.Flush(); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// takeClusterOptions moves the -o words of a cluster mount that are
// producer properties (compression.type) to the client properties, and
// refuses topic defaults, which set nothing on a cluster.
func takeClusterOptions(m *mountArgs) error {
	if !m.cluster.enabled() {
		return nil
	}
	var keep []string
	for _, list := range m.options {
		for _, o := range strings.Split(list, ",") {
			o = strings.TrimSpace(o)
			name, _, isProp := strings.Cut(o, "=")
			switch {
			case name == "compression.type":
				m.cluster.props = append(m.cluster.props, o)
			case isProp && name != "umask" && name != "gid" && name != "uid":
				return usageErrorf("-o %s: topic settings apply to a data directory; on a cluster, set them on the cluster (kafka-configs.sh), or use -X for client properties", o)
			default:
				keep = append(keep, o)
			}
		}
	}
	m.options = keep
	return nil
}
