package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/vfs"
)

// A topic's settings file, DATA/<topic>.props, holds its overrides in
// Kafka's property names and, while a topic is being created or deleted,
// that state:
//
//	# logfs settings for topic orders, in Kafka's property names.
//	# Properties not listed take the log's defaults. Read when the log opens.
//	retention.ms=86400000
//	# logfs: being deleted; the next writable open finishes it.
//	logfs.topic.state=deleting
//
// The state makes creating and deleting a topic of several partitions
// all or nothing across a crash. Each is written durably before the first
// partition folder is made or renamed away, and taken back (or the file
// removed) after the last: an Open that finds a topic still "creating" or
// "deleting" removes what is left of it (see finishTopics), so after a
// crash the topic is whole or gone, never a few of its partitions. A
// read-only Open shows no such topic.

// topicState is what a settings file says of its topic besides settings.
type topicState string

const (
	topicLive     topicState = ""
	topicCreating topicState = "creating"
	topicDeleting topicState = "deleting"
)

// stateProperty is the line of a settings file that holds its state.
const stateProperty = "logfs.topic.state"

// topicFile is the content of a settings file.
type topicFile struct {
	overrides Overrides
	state     topicState
}

// parseTopicFile reads a settings file: ParseOverrides's format, plus the
// state line.
func parseTopicFile(data []byte) (topicFile, error) {
	var tf topicFile
	var rest bytes.Buffer
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.TrimSpace(k) != stateProperty {
			rest.WriteString(line)
			continue
		}
		switch st := topicState(strings.TrimSpace(v)); st {
		case topicCreating, topicDeleting:
			tf.state = st
		default:
			return tf, fmt.Errorf("%w: %s=%q: want %s or %s", ErrInvalidConfig, stateProperty, v, topicCreating, topicDeleting)
		}
		rest.WriteString("\n") // keeps ParseOverrides's line numbers
	}
	o, err := ParseOverrides(rest.Bytes())
	tf.overrides = o
	return tf, err
}

func (tf topicFile) format(topic string) []byte {
	b := tf.overrides.Format(topic)
	switch tf.state {
	case topicCreating:
		b = fmt.Appendf(b, "# logfs: being created; if this line is still here at the next writable open, the topic is removed.\n%s=%s\n", stateProperty, tf.state)
	case topicDeleting:
		b = fmt.Appendf(b, "# logfs: being deleted; the next writable open finishes it.\n%s=%s\n", stateProperty, tf.state)
	}
	return b
}

func (l *Log) topicFilePath(topic string) string {
	return filepath.Join(l.dir, topic+layout.TopicConfigSuffix)
}

// writeTopicFile replaces a topic's settings file durably: through the
// one temporary file, under settingsMu, since a name of 249 characters
// leaves no room for a ".tmp" of its own. A live topic without overrides
// has no file.
func (l *Log) writeTopicFile(topic string, tf topicFile) error {
	l.settingsMu.Lock()
	defer l.settingsMu.Unlock()
	path := l.topicFilePath(topic)
	if len(tf.overrides) == 0 && tf.state == topicLive {
		if err := l.fs.Remove(path); errors.Is(err, os.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		return l.fs.SyncDir(l.dir)
	}
	return vfs.WriteFileAtomicVia(l.fs, path, filepath.Join(l.dir, layout.TopicConfigTmp), tf.format(topic))
}

// topicFiles reads the settings files of a data directory's listing, by
// topic. A settings file under the legacy name counts where there is none
// under the new one; legacy lists those, to be renamed by a writable open.
func (l *Log) topicFiles(entries []os.DirEntry) (files map[string]topicFile, legacy []string, err error) {
	files = map[string]topicFile{}
	read := func(name string) (topicFile, error) {
		data, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, name))
		if err != nil {
			return topicFile{}, err
		}
		tf, err := parseTopicFile(data)
		if err != nil {
			return tf, fmt.Errorf("%s: %w", filepath.Join(l.dir, name), err)
		}
		return tf, nil
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if topic, ok := strings.CutSuffix(e.Name(), layout.TopicConfigSuffix); ok && layout.ValidateTopic(topic) == nil {
			if files[topic], err = read(e.Name()); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, e := range entries {
		topic, ok := strings.CutSuffix(e.Name(), layout.LegacyTopicConfigSuffix)
		if e.IsDir() || !ok || layout.ValidateTopic(topic) != nil {
			continue
		}
		if _, ok := files[topic]; !ok {
			if files[topic], err = read(e.Name()); err != nil {
				return nil, nil, err
			}
		}
		legacy = append(legacy, topic)
	}
	return files, legacy, nil
}

// finishTopics, at a writable open, removes what crashes left: the
// partition folders of topics whose settings file says they were being
// created or deleted, then those files; partition folders renamed for
// deletion; the temporary settings file. It renames legacy settings files
// to the new name. Each step is durable before the next.
func (l *Log) finishTopics(entries []os.DirEntry, files map[string]topicFile, legacy []string) error {
	var doomed []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir() && layout.IsDeletedPartitionDir(name):
			doomed = append(doomed, filepath.Join(l.dir, name))
		case e.IsDir():
			if topic, id, ok := layout.ParsePartitionDirName(name); ok && files[topic].state != topicLive {
				to := filepath.Join(l.dir, layout.DeletedPartitionDirName(topic, id, uint64(l.now().UnixNano())))
				if err := l.fs.Rename(filepath.Join(l.dir, name), to); err != nil {
					return err
				}
				doomed = append(doomed, to)
			}
		}
	}
	for topic, tf := range files {
		if tf.state != topicLive {
			l.logger.Warn("removing a topic whose create or delete a crash interrupted", "topic", topic, "state", string(tf.state))
		}
	}
	if len(doomed) > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	for _, d := range doomed {
		if err := l.fs.RemoveAll(d); err != nil {
			return err
		}
	}
	removed := false
	for topic, tf := range files {
		if tf.state == topicLive {
			continue
		}
		for _, p := range []string{l.topicFilePath(topic), filepath.Join(l.dir, topic+layout.LegacyTopicConfigSuffix)} {
			if err := l.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		delete(files, topic)
		removed = true
	}
	if err := l.fs.Remove(filepath.Join(l.dir, layout.TopicConfigTmp)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, topic := range legacy {
		if _, live := files[topic]; !live {
			continue
		}
		old := filepath.Join(l.dir, topic+layout.LegacyTopicConfigSuffix)
		if _, err := l.fs.Stat(l.topicFilePath(topic)); err == nil {
			err = l.fs.Remove(old) // the new one wins
			if err != nil {
				return err
			}
		} else if err := l.fs.Rename(old, l.topicFilePath(topic)); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		return l.fs.SyncDir(l.dir)
	}
	return nil
}
