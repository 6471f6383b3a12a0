package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	mountfs "github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
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
	f.StringVar(&c.isolation, "isolation-level", "read_committed", "with --bootstrap-server: read_committed (records of committed transactions only, as kcat shows) or read_uncommitted")
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
