package storage

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/logfs/logfs/record"
)

// Config holds the settings in force for a topic, under Kafka's property
// names. Overrides say which were set; Config.With applies them.
type Config struct {
	SegmentBytes       int64 // segment.bytes: roll when the next batch would not fit (1 GiB)
	SegmentMs          int64 // segment.ms: roll when the active segment's first batch is older (7 days)
	SegmentIndexBytes  int64 // segment.index.bytes: preallocated size of each index (10 MiB)
	IndexIntervalBytes int64 // index.interval.bytes: log bytes between index entries (4096)
	RetentionMs        int64 // retention.ms: delete segments whose newest record is older; -1 = never (7 days)
	RetentionBytes     int64 // retention.bytes: delete the oldest segments beyond this size; -1 = never (-1)
	MaxMessageBytes    int64 // max.message.bytes: largest single-record batch (1048588)
	FlushMessages      int64 // flush.messages: fsync after this many records; -1 = no count (-1)
	FlushMs            int64 // flush.ms: fsync at least this often; -1 = never (1000 here; Kafka: never)
	FileDeleteDelayMs  int64 // file.delete.delay.ms: how long a deleted segment lingers (60000)
}

// CheckRecord applies max.message.bytes and segment.bytes to one record:
// the batch holding it alone must fit both (RecordLimit), as Kafka measures
// a batch. It returns an error wrapping ErrRecordTooLarge, or
// ErrInvalidRecord for a header without a key, or nil.
//
// A record without headers whose key and value leave room for the most
// framing they can have fits whatever its exact size: that takes a
// comparison instead of sizing the record, for each of the ten thousand
// lines of a 1 MiB write of 100-byte lines, twice.
func (c Config) CheckRecord(r *Record) error {
	if surelyFits(r, c.SureFit()) {
		return nil
	}
	for i, h := range r.Headers {
		if h.Key == nil {
			// The format has room for it (length -1), but Kafka, and
			// logfs's reading of a batch, refuse it: such a batch, once
			// written, could never be read back.
			return fmt.Errorf("%w: header %d has a null key", ErrInvalidRecord, i)
		}
	}
	limit, setting := c.RecordLimit()
	return checkRecordSize(r, limit, setting)
}

// surelyFits is CheckRecord's shortcut: r has no headers, and its key and
// value together are at most fit, SureFit's figure.
func surelyFits(r *Record, fit int) bool {
	return len(r.Headers) == 0 && len(r.Key)+len(r.Value) <= fit
}

// RecordLimit is the largest batch a record must fit in alone, and the
// setting that says so: max.message.bytes, or segment.bytes when smaller,
// as a batch never spans segments (Kafka refuses a batch larger than a
// segment). A segment.bytes of 0 or less, in a Config made by hand, does
// not count.
func (c Config) RecordLimit() (int64, string) {
	if c.SegmentBytes > 0 && c.SegmentBytes < c.MaxMessageBytes {
		return c.SegmentBytes, "segment.bytes"
	}
	return c.MaxMessageBytes, "max.message.bytes"
}

// SureFit is the most bytes of key and value together that a record
// without headers can hold and pass CheckRecord whatever its exact
// framing: loops over thousands of records compare their lengths with it
// and call CheckRecord only for those longer.
func (c Config) SureFit() int {
	limit, _ := c.RecordLimit()
	return int(limit - (record.HeaderSize + maxFraming))
}

// maxFraming bounds what record.RecordSize(0, 0, key, value, nil) adds to
// key and value: its length, attributes, the two deltas, the two lengths
// and the header count, with lengths below 2^31 (max.message.bytes is an
// int32) taking 5 bytes at most.
const maxFraming = 5 + 1 + 1 + 1 + 5 + 5 + 1

func checkRecordSize(r *Record, limit int64, setting string) error {
	if n := int64(record.HeaderSize + record.RecordSize(0, 0, r.Key, r.Value, r.Headers)); n > limit {
		return fmt.Errorf("%w: a record of %d bytes in a batch of its own, %s is %d", ErrRecordTooLarge, n, setting, limit)
	}
	return nil
}

// DefaultConfig returns Kafka's defaults, except flush.ms: with no
// replication to fall back on, logfs fsyncs every second by default instead
// of leaving it to the page cache.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * int64(time.Hour/time.Millisecond),
		SegmentIndexBytes:  10 << 20,
		IndexIntervalBytes: 4096,
		RetentionMs:        7 * 24 * int64(time.Hour/time.Millisecond),
		RetentionBytes:     -1,
		MaxMessageBytes:    1048588,
		FlushMessages:      -1,
		FlushMs:            1000,
		FileDeleteDelayMs:  60000,
	}
}

// property describes one setting: its name, where it lives, its range.
type property struct {
	name string
	get  func(*Config) *int64
	min  int64
	max  int64
	neg1 bool // -1 is allowed and means "unlimited"
}

var properties = []property{
	// A segment's positions are 32-bit in its .index, so a segment holds at
	// most MaxInt32 bytes, as in Kafka.
	{"segment.bytes", func(c *Config) *int64 { return &c.SegmentBytes }, 14, math.MaxInt32, false},
	{"segment.ms", func(c *Config) *int64 { return &c.SegmentMs }, 1, math.MaxInt64, false},
	{"segment.index.bytes", func(c *Config) *int64 { return &c.SegmentIndexBytes }, 24, math.MaxInt32, false},
	{"index.interval.bytes", func(c *Config) *int64 { return &c.IndexIntervalBytes }, 0, math.MaxInt32, false},
	{"retention.ms", func(c *Config) *int64 { return &c.RetentionMs }, 0, math.MaxInt64, true},
	{"retention.bytes", func(c *Config) *int64 { return &c.RetentionBytes }, 0, math.MaxInt64, true},
	{"max.message.bytes", func(c *Config) *int64 { return &c.MaxMessageBytes }, 0, math.MaxInt32, false},
	{"flush.messages", func(c *Config) *int64 { return &c.FlushMessages }, 1, math.MaxInt64, true},
	{"flush.ms", func(c *Config) *int64 { return &c.FlushMs }, 0, math.MaxInt64, true},
	{"file.delete.delay.ms", func(c *Config) *int64 { return &c.FileDeleteDelayMs }, 0, math.MaxInt64, false},
}

// PropertyNames lists the settings a topic takes, sorted.
func PropertyNames() []string {
	names := make([]string, len(properties))
	for i, p := range properties {
		names[i] = p.name
	}
	sort.Strings(names)
	return names
}

func lookupProperty(name string) (property, error) {
	for _, p := range properties {
		if p.name == name {
			return p, nil
		}
	}
	return property{}, fmt.Errorf("%w: unknown property %q (known: %s)", ErrInvalidConfig, name, strings.Join(PropertyNames(), ", "))
}

// Get returns a property's value in c.
func (c Config) Get(name string) (int64, error) {
	p, err := lookupProperty(name)
	if err != nil {
		return 0, err
	}
	return *p.get(&c), nil
}

// With returns c with the overrides applied.
func (c Config) With(o Overrides) Config {
	for name, v := range o {
		if p, err := lookupProperty(name); err == nil {
			*p.get(&c) = v
		}
	}
	return c
}

// Overrides are the properties set for a topic (or for the whole log), by
// Kafka property name.
type Overrides map[string]int64

// Set parses and checks one property.
func (o Overrides) Set(name, value string) error {
	p, err := lookupProperty(name)
	if err != nil {
		return err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s=%q is not an integer", ErrInvalidConfig, name, value)
	}
	if (v < p.min || v > p.max) && !(p.neg1 && v == -1) {
		if p.neg1 {
			return fmt.Errorf("%w: %s=%d is outside [%d, %d], and not -1 (which turns it off)", ErrInvalidConfig, name, v, p.min, p.max)
		}
		return fmt.Errorf("%w: %s=%d is outside [%d, %d]", ErrInvalidConfig, name, v, p.min, p.max)
	}
	o[name] = v
	return nil
}

// SetPair parses "name=value".
func (o Overrides) SetPair(kv string) error {
	name, value, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("%w: %q: want name=value", ErrInvalidConfig, kv)
	}
	return o.Set(strings.TrimSpace(name), value)
}

// ParseOverrides reads a topic config file: Java-properties style
// "name=value" lines, '#' or '!' comments, blank lines.
func ParseOverrides(data []byte) (Overrides, error) {
	o := Overrides{}
	s := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; s.Scan(); line++ {
		text := strings.TrimSpace(s.Text())
		if text == "" || text[0] == '#' || text[0] == '!' {
			continue
		}
		if err := o.SetPair(text); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
	}
	return o, s.Err()
}

// Format renders the overrides as a config file.
func (o Overrides) Format(topic string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# logfs settings for topic %s, in Kafka's property names.\n", topic)
	fmt.Fprintf(&b, "# Properties not listed take the log's defaults. Read when the log opens.\n")
	names := make([]string, 0, len(o))
	for name := range o {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%s=%d\n", name, o[name])
	}
	return b.Bytes()
}
