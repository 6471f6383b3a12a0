package layout

// An adversarial review of the names of a data directory (adv35): topic
// names, partition folders (live and being deleted) and segment files,
// against Kafka's own rules transcribed below from its source
// (clients/.../internal/Topic.java, core/.../LocalLog.scala,
// storage/.../LogFileUtils.java), on every string of a small alphabet of
// the characters that matter, and on the edges: lengths, signs, leading
// zeros, numbers past int32 and int64.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// kafkaValidTopic is Kafka's Topic.validate: not empty, not "." or "..",
// at most 249 characters, each of [a-zA-Z0-9._-].
func kafkaValidTopic(name string) bool {
	if name == "" || name == "." || name == ".." || len([]rune(name)) > 249 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// javaParse is Java's Integer.parseInt / Long.parseLong on ASCII: an
// optional sign, then one or more digits, leading zeros allowed, within
// bits.
func javaParse(s string, bits int) (int64, bool) {
	if s == "" || s == "+" || s == "-" {
		return 0, false
	}
	for i, c := range s {
		if !(c >= '0' && c <= '9' || i == 0 && (c == '+' || c == '-')) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, bits) // takes a sign and leading zeros too
	return n, err == nil
}

// kafkaPartitionDir is LocalLog.parseTopicPartitionName for a live
// partition's folder (no -delete, -future or -stray suffix): split at
// the last '-', a topic not empty, a partition Integer.parseInt takes.
func kafkaPartitionDir(name string) (string, int64, bool) {
	for _, s := range []string{"-delete", "-future", "-stray"} {
		if strings.HasSuffix(name, s) {
			return "", 0, false
		}
	}
	dash := strings.LastIndexByte(name, '-')
	if dash < 0 {
		return "", 0, false
	}
	topic, ps := name[:dash], name[dash+1:]
	if topic == "" || ps == "" {
		return "", 0, false
	}
	p, ok := javaParse(ps, 32)
	return topic, p, ok
}

// kafkaSegmentBase is LogFileUtils.offsetFromFileName: Long.parseLong of
// what comes before the first '.'.
func kafkaSegmentBase(name string) (int64, bool) {
	dot := strings.IndexByte(name, '.')
	if dot < 0 {
		return 0, false
	}
	return javaParse(name[:dot], 64)
}

// allStrings returns every string of up to n characters from alphabet.
func allStrings(alphabet []string, n int) []string {
	out := []string{""}
	level := []string{""}
	for i := 0; i < n; i++ {
		var next []string
		for _, s := range level {
			for _, c := range alphabet {
				next = append(next, s+c)
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// TestAdv35TopicRulesAreKafkas compares ValidateTopic with Kafka's rule on
// every byte, every string of up to four characters that matter, and the
// lengths around 249.
func TestAdv35TopicRulesAreKafkas(t *testing.T) {
	for b := 0; b < 256; b++ {
		s := string([]byte{byte(b)})
		require.Equal(t, kafkaValidTopic(s), ValidateTopic(s) == nil, "%q", s)
		s = "a" + s + "b"
		require.Equal(t, kafkaValidTopic(s), ValidateTopic(s) == nil, "%q", s)
	}
	for _, s := range allStrings([]string{"a", "Z", "0", ".", "_", "-", "/", " ", "\x00", "\n", "ü", "\xff"}, 4) {
		err := ValidateTopic(s)
		require.Equal(t, kafkaValidTopic(s), err == nil, "%q", s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidTopic)
		}
	}
	for _, n := range []int{1, 248, 249, 250, 255, 1000} {
		for _, c := range []string{"a", ".", "-"} {
			s := strings.Repeat(c, n)
			require.Equal(t, kafkaValidTopic(s), ValidateTopic(s) == nil, "%d × %q", n, c)
		}
	}
	// 249 characters of which some are multi-byte: Kafka counts UTF-16
	// units, logfs bytes; both refuse, for the letters are not allowed.
	require.Error(t, ValidateTopic(strings.Repeat("ü", 100)))
}

// TestAdv35PartitionDirNamesAgainstKafka: a folder logfs takes for a
// partition is one Kafka takes for the same topic and partition; and one
// Kafka takes, with a valid topic and a partition written as Kafka writes
// it (no sign, no leading zero) below MaxPartitions, logfs takes.
// Deliberately stricter than Kafka: "t-07" and "t-+7", which Kafka reads
// as partition 7 though it never writes them, are not partitions to
// logfs (two folders would be one partition), nor are partitions from
// MaxPartitions on, nor folders whose topic Kafka would refuse to create.
func TestAdv35PartitionDirNamesAgainstKafka(t *testing.T) {
	names := allStrings([]string{"a", "0", "1", "9", "-", "+", ".", "_", " "}, 5)
	for _, extra := range []string{"t-999999", "t-1000000", "t-2147483647", "t-2147483648", "t-4294967296", "t-9223372036854775808",
		"t-00", "t-007", "t--7", "t-+7", "t-٣", "t-１", "t-7 ", "t-7\n", "t-0x7", "t-7e0", "t-1_0", "t-1.0",
		strings.Repeat("x", 249) + "-99999", strings.Repeat("x", 250) + "-0", ".-0", "..-0", "...-0", "-0", "--0", "---0"} {
		names = append(names, extra)
	}
	checked := 0
	for _, name := range names {
		topic, p, ok := ParsePartitionDirName(name)
		ktopic, kp, kok := kafkaPartitionDir(name)
		if ok {
			require.True(t, kok, "%q: logfs takes a folder Kafka does not", name)
			require.Equal(t, ktopic, topic, "%q", name)
			require.Equal(t, kp, int64(p), "%q", name)
			require.NoError(t, ValidateTopic(topic), "%q", name)
			require.True(t, p >= 0 && p < MaxPartitions, "%q", name)
			require.Equal(t, name, PartitionDirName(topic, p), "%q round-trips", name)
			checked++
			continue
		}
		if kok && ValidateTopic(ktopic) == nil && kp >= 0 && kp < MaxPartitions && strconv.FormatInt(kp, 10) == name[strings.LastIndexByte(name, '-')+1:] {
			t.Fatalf("%q: Kafka takes it for %s partition %d, logfs does not", name, ktopic, kp)
		}
	}
	require.Greater(t, checked, 1000)
	for _, s := range []string{"", "+0", "-0", "00", "07", " 1", "1 ", "１", "٣", "1000000", "2147483648", "9223372036854775808", "0x1", "1e2"} {
		_, err := ParsePartition(s)
		require.ErrorIs(t, err, ErrInvalidPartition, "%q", s)
	}
	for _, p := range []int{0, 1, 10, 99999, MaxPartitions - 1} {
		got, err := ParsePartition(strconv.Itoa(p))
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
}

// TestAdv35DeletedPartitionDirNames: the folder a deleted partition is
// renamed to is Kafka's (LocalLog.logDirNameWithSuffixCappedLength), fits
// a file name for every topic length and partition, is never taken for a
// live partition, and is recognised; names that only look like one are
// not.
func TestAdv35DeletedPartitionDirNames(t *testing.T) {
	for n := 1; n <= 249; n++ {
		for _, topic := range []string{strings.Repeat("a", n), strings.Repeat("-", n), strings.Repeat(".", max(n, 3))} {
			if ValidateTopic(topic) != nil {
				continue
			}
			for _, p := range []int{0, 7, 99999, MaxPartitions - 1} {
				for _, u := range []uint64{0, 1, math.MaxUint64} {
					name := DeletedPartitionDirName(topic, p, u)
					suffix := fmt.Sprintf("-%d.%032x-delete", p, u)
					want := topic[:min(len(topic), 255-len(suffix))] + suffix // Kafka's formula
					require.Equal(t, want, name)
					require.LessOrEqual(t, len(name), MaxNameLength)
					require.True(t, IsDeletedPartitionDir(name), name)
					_, _, ok := ParsePartitionDirName(name)
					require.False(t, ok, "%s is no live partition", name)
					_, _, kok := kafkaPartitionDir(name)
					require.False(t, kok)
				}
			}
		}
	}
	hex := "0123456789abcdef0123456789abcdef"
	for name, want := range map[string]bool{
		"t-0." + hex + "-delete":                  true,
		"a.b-c-12." + hex + "-delete":             true,
		"t-0." + strings.ToUpper(hex) + "-delete": false, // Kafka's UUIDs are lower case
		"t-0." + hex[:31] + "-delete":             false,
		"t-0." + hex + "0-delete":                 false,
		"t-0." + hex + "-delete-delete":           false,
		"." + hex + "-delete":                     false,
		"-0." + hex + "-delete":                   false,
		"t0." + hex + "-delete":                   false,
		"t-0" + hex + "-delete":                   false,
		"t-0." + hex + "-future":                  false,
		"t-0." + hex + "-stray":                   false,
		"t-0.-delete":                             false,
		"-delete":                                 false,
		"":                                        false,
	} {
		require.Equal(t, want, IsDeletedPartitionDir(name), "%q", name)
	}
}

// TestAdv35SegmentFileNamesAgainstKafka: a name logfs takes for a segment
// file is one Kafka reads the same base offset from; and one Kafka reads,
// whose base is twenty digits as Kafka writes it, logfs takes.
// Deliberately stricter: "1234.log" or "+0000000000000000001.log", which
// Kafka would read, are not segments to logfs (recovery sets them aside),
// for a second name of one offset would stand in for the segment.
func TestAdv35SegmentFileNamesAgainstKafka(t *testing.T) {
	twenty := func(s string) bool {
		dot := strings.IndexByte(s, '.')
		if dot != 20 {
			return false
		}
		for _, c := range s[:20] {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
	var names []string
	for _, base := range []string{"00000000000000000000", "00000000000000000001", "09223372036854775807", "09223372036854775808",
		"99999999999999999999", "19223372036854775807", "0000000000000000000", "000000000000000000000", "+0000000000000000001",
		"-0000000000000000001", " 0000000000000000001", "0000000000000000000a", "000000000000000000٣", "0000000000000000001\n", ""} {
		for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".log.deleted", ".index.swap",
			".log.cut-0-10", ".", "..log", ".log.", "", "log"} {
			names = append(names, base+suffix)
		}
	}
	for _, name := range names {
		base, suffix, ok := ParseSegmentFileName(name)
		kbase, kok := kafkaSegmentBase(name)
		if ok {
			require.True(t, kok, "%q", name)
			require.Equal(t, kbase, int64(base), "%q", name)
			require.True(t, base >= 0)
			require.Equal(t, name, SegmentFileName(base, suffix), "%q round-trips", name)
			continue
		}
		require.False(t, kok && twenty(name) && kbase >= 0, "%q: Kafka reads base %d, logfs does not", name, kbase)
	}
	for _, off := range []int64{0, 1, 9, 10, 1 << 31, 1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		name := SegmentFileName(record.Offset(off), LogSuffix)
		require.Len(t, name, 24)
		base, suffix, ok := ParseSegmentFileName(name)
		require.True(t, ok, name)
		require.Equal(t, off, int64(base))
		require.Equal(t, LogSuffix, suffix)
		cut := CutFileName(record.Offset(off), 4096, 8192)
		base, suffix, ok = ParseSegmentFileName(cut)
		require.True(t, ok, cut)
		require.Equal(t, off, int64(base))
		require.Equal(t, LogSuffix+CutInfix+"4096-8192", suffix)
	}
	// Names sort as their offsets do, as Kafka's padding is for.
	prev := SegmentFileName(0, LogSuffix)
	for _, off := range []int64{1, 9, 10, 99, 100, 1 << 40, math.MaxInt64} {
		name := SegmentFileName(record.Offset(off), LogSuffix)
		require.Less(t, prev, name)
		prev = name
	}
}

// FuzzParseSegmentFileName: whatever the name, a segment logfs takes
// round-trips and is one Kafka reads the same base from.
func FuzzParseSegmentFileName(f *testing.F) {
	for _, s := range []string{"00000000000000000000.log", "09223372036854775807.index", "99999999999999999999.log",
		"+0000000000000000001.log", "1234.log", "00000000000000000000.log.cut-1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		base, suffix, ok := ParseSegmentFileName(name)
		if !ok {
			return
		}
		kbase, kok := kafkaSegmentBase(name)
		if !kok || kbase != int64(base) || base < 0 || SegmentFileName(base, suffix) != name {
			t.Fatalf("%q: %d %q", name, base, suffix)
		}
	})
}

// FuzzParsePartitionDirName: whatever the name, a partition logfs takes
// round-trips, has a valid topic and a partition below MaxPartitions, and
// is one Kafka takes for the same.
func FuzzParsePartitionDirName(f *testing.F) {
	for _, s := range []string{"orders-0", "a-1-0", "orders--1", "orders-01", "orders-+1", "-0", "t-1000000",
		"orders-0.0123456789abcdef0123456789abcdef-delete"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		topic, p, ok := ParsePartitionDirName(name)
		if !ok {
			return
		}
		ktopic, kp, kok := kafkaPartitionDir(name)
		if !kok || ktopic != topic || kp != int64(p) || ValidateTopic(topic) != nil || p < 0 || p >= MaxPartitions ||
			PartitionDirName(topic, p) != name || IsDeletedPartitionDir(name) {
			t.Fatalf("%q: %q %d", name, topic, p)
		}
	})
}
