package recovery

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// checkpointVersion is the only version of Kafka's offset checkpoint format.
const checkpointVersion = 0

// TopicPartition names a partition in a checkpoint.
type TopicPartition struct {
	Topic     string
	Partition int
}

func (tp TopicPartition) String() string { return layout.PartitionDirName(tp.Topic, tp.Partition) }

// ReadCheckpoint reads one of Kafka's offset checkpoint files:
//
//	0                    version
//	2                    number of entries
//	orders 0 1234        topic partition offset
//	orders 1 99
//
// A missing file is an empty map. A malformed one is an error wrapping
// ErrBadCheckpoint; Kafka then treats every partition as unrecovered, and so
// do the callers here.
func ReadCheckpoint(fs vfs.FS, path string) (map[TopicPartition]record.Offset, error) {
	data, err := vfs.ReadFile(fs, path)
	if err != nil {
		if isNotExist(err) {
			return map[TopicPartition]record.Offset{}, nil
		}
		return nil, err
	}
	m, err := parseCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func parseCheckpoint(data []byte) (map[TopicPartition]record.Offset, error) {
	s := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !s.Scan() {
			return "", false
		}
		return s.Text(), true
	}
	v, ok := line()
	if !ok {
		return nil, fmt.Errorf("%w: empty", ErrBadCheckpoint)
	}
	if strings.TrimSpace(v) != strconv.Itoa(checkpointVersion) {
		return nil, fmt.Errorf("%w: version %q", ErrBadCheckpoint, v)
	}
	c, ok := line()
	n, err := strconv.Atoi(strings.TrimSpace(c))
	if !ok || err != nil || n < 0 {
		return nil, fmt.Errorf("%w: entry count %q", ErrBadCheckpoint, c)
	}
	m := make(map[TopicPartition]record.Offset, min(n, 1<<16))
	for i := 0; i < n; i++ {
		l, ok := line()
		if !ok {
			return nil, fmt.Errorf("%w: %d entries, header says %d", ErrBadCheckpoint, i, n)
		}
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: line %q", ErrBadCheckpoint, l)
		}
		p, err1 := strconv.Atoi(f[1])
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 {
			return nil, fmt.Errorf("%w: line %q", ErrBadCheckpoint, l)
		}
		m[TopicPartition{f[0], p}] = record.Offset(off)
	}
	if extra, ok := line(); ok && strings.TrimSpace(extra) != "" {
		return nil, fmt.Errorf("%w: more entries than the header's %d", ErrBadCheckpoint, n)
	}
	return m, s.Err()
}

// WriteCheckpoint replaces a checkpoint file atomically: write path.tmp,
// fsync, rename, fsync the directory.
func WriteCheckpoint(fs vfs.FS, path string, m map[TopicPartition]record.Offset) error {
	keys := make([]TopicPartition, 0, len(m))
	for tp := range m {
		keys = append(keys, tp)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(keys))
	for _, tp := range keys {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, m[tp])
	}
	return vfs.WriteFileAtomic(fs, path, b.Bytes())
}
