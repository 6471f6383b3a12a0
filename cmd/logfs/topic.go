package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/storage"
)

func init() { addCommand(newTopicCommand) }

func newTopicCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic create|list|describe|delete [--data DIR] [--partitions N] [--config k=v …] NAME",
		Short: "Create, list, describe and delete topics (offline)",
		Long: `Create, list, describe and delete topics in a data directory that no mount
has open. With a mount running, list and describe work beside it; create a
topic with mkdir on the mount, and stop the mount to delete one (the mount
refuses rm and rmdir).`,
		Example: `  logfs topic create --partitions 3 --config retention.ms=86400000 orders
  logfs topic list
  logfs topic describe orders
  logfs topic delete orders`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("missing action: create, list, describe or delete (see %s --help)", cmd.CommandPath())
			}
			return usageErrorf("unknown action %q: want create, list, describe or delete (see %s --help)", args[0], cmd.CommandPath())
		},
		RunE: func(*cobra.Command, []string) error { return nil }, // Args always fails
	}
	cmd.AddCommand(newTopicCreate(), newTopicList(), newTopicDescribe(), newTopicDelete())
	return cmd
}

func newTopicCreate() *cobra.Command {
	var (
		dir        string
		partitions int
		configs    []string
	)
	cmd := &cobra.Command{
		Use:   "create [--data DIR] [--partitions N] [--config k=v …] NAME",
		Short: "Create a topic",
		Long: `Create a topic with N partitions (1 by default). --config sets a topic
property under its Kafka name; it is kept in DATA/NAME.props.
Properties: ` + strings.Join(storage.PropertyNames(), ", ") + `.`,
		Example: `  logfs topic create orders
  logfs topic create --partitions 3 --config segment.bytes=1048576 --config retention.ms=-1 orders`,
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			name := a[0]
			if err := checkTopic(name); err != nil {
				return err
			}
			if partitions < 1 || partitions > layout.MaxPartitions {
				return usageErrorf("--partitions must be from 1 to %d, not %d", layout.MaxPartitions, partitions)
			}
			o := storage.Overrides{}
			for _, kv := range configs {
				if err := o.SetPair(kv); err != nil {
					return usageErrorf("--config %s: %v", kv, err)
				}
			}
			l, err := openLog(dir, storage.Options{Logger: newLogger(cmd.ErrOrStderr(), slog.LevelWarn, false, false)})
			if err != nil {
				return err
			}
			_, err = l.CreateTopic(name, partitions, o)
			switch {
			case errors.Is(err, storage.ErrTopicExists):
				err = fmt.Errorf("topic %q already exists in %s", name, dir)
			case errors.Is(err, storage.ErrTopicCollides):
				err = errors.New(strings.TrimPrefix(err.Error(), storage.ErrTopicCollides.Error()+": "))
			case err != nil:
				// CreateTopic takes back what it made: say so, or an error
				// from deep inside (a file of partition 6662) reads as if
				// part of the topic were there.
				err = fmt.Errorf("topic %q not created: %w", name, err)
			}
			if err = closeLog(l, err); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created topic %s with %d partition%s in %s\n", name, partitions, plural(partitions), dir)
			return nil
		},
	}
	addCreatingDataFlag(cmd, &dir, "on first use")
	cmd.Flags().IntVarP(&partitions, "partitions", "p", 1, "number of partitions")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic property `name=value` (repeatable)")
	return cmd
}

func newTopicList() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:     "list [--data DIR]",
		Short:   "List the topics, one name a line",
		Example: `  logfs topic list --data /var/lib/kafka/data`,
		Args:    args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := openLog(dir, storage.Options{ReadOnly: true, Logger: newLogger(cmd.ErrOrStderr(), slog.LevelError, false, false)})
			if err != nil {
				return err
			}
			for _, name := range l.Topics() {
				if _, err = fmt.Fprintln(cmd.OutOrStdout(), name); err != nil {
					err = fmt.Errorf("write: %w", err)
					break
				}
			}
			return closeLog(l, err)
		},
	}
	addDataFlag(cmd, &dir)
	return cmd
}

func newTopicDescribe() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "describe [--data DIR] NAME",
		Short: "Show a topic's partitions, offsets, sizes, segments and settings",
		Long: `Show a topic's settings (each property, its value, and whether the topic
sets it or takes the default), then for each partition its log start and end
offsets, its size and its segments (base offset, bytes, newest timestamp).`,
		Example: `  logfs topic describe orders`,
		Args:    args("NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkTopic(a[0]); err != nil {
				return err
			}
			l, err := openLog(dir, storage.Options{ReadOnly: true, Logger: newLogger(cmd.ErrOrStderr(), slog.LevelError, false, false)})
			if err != nil {
				return err
			}
			return closeLog(l, describeTopic(cmd.OutOrStdout(), l, a[0]))
		},
	}
	addDataFlag(cmd, &dir)
	return cmd
}

func describeTopic(w io.Writer, l *storage.Log, name string) error {
	t, err := l.Topic(name)
	if err != nil {
		return fmt.Errorf("no topic %q in %s (logfs topic list shows the topics)", name, l.Dir())
	}
	ps := t.Partitions()
	fmt.Fprintf(w, "topic %s: %d partition%s\n", name, len(ps), plural(len(ps)))
	fmt.Fprintf(w, "settings (%s):\n", filepath.Join(l.Dir(), name+layout.TopicConfigSuffix))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	cfg, over := t.Config(), t.Overrides()
	for _, prop := range storage.PropertyNames() {
		v, _ := cfg.Get(prop)
		from := "default"
		if _, ok := over[prop]; ok {
			from = "set for this topic"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", prop, v, from)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range ps {
		segs, err := p.Segments()
		if err != nil {
			return fmt.Errorf("partition %d: %w", p.ID(), err)
		}
		fmt.Fprintf(w, "partition %d: start offset %d, end offset %d, %d bytes in %d segment%s\n",
			p.ID(), p.StartOffset(), p.EndOffset(), p.Size(), len(segs), plural(len(segs)))
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "  segment\tbase offset\tbytes\tmax timestamp\n")
		for _, s := range segs {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\n", layout.SegmentFileName(s.BaseOffset, layout.LogSuffix), s.BaseOffset, s.Bytes, formatTimestamp(s.MaxTimestamp))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func newTopicDelete() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "delete [--data DIR] NAME",
		Short: "Delete a topic and all its records",
		Long: `Delete a topic: its partition folders and its settings file. The settings
file first records, durably, that the topic is being deleted: if the delete
is interrupted (a kill, a crash), the topic is gone for every reader, none of
its partitions shows, and the next command or mount that opens the data
directory for writing removes what is left. Creating a topic of several
partitions is all or nothing in the same way.`,
		Example: `  logfs topic delete orders`,
		Args:    args("NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			name := a[0]
			if err := checkTopic(name); err != nil {
				return err
			}
			l, err := openExistingLog(dir, storage.Options{Logger: newLogger(cmd.ErrOrStderr(), slog.LevelWarn, false, false)})
			if err != nil {
				return err
			}
			err = l.DeleteTopic(name)
			if errors.Is(err, storage.ErrNoTopic) {
				err = fmt.Errorf("no topic %q in %s (logfs topic list shows the topics)", name, dir)
			}
			if err = closeLog(l, err); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s from %s\n", name, dir)
			return nil
		},
	}
	addDataFlag(cmd, &dir)
	return cmd
}

// formatTimestamp shows milliseconds since the epoch with their UTC time.
func formatTimestamp(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%s)", ms, time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z"))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
