package fs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// TestTimeNamesAdv34 mounts a partition with records stamped out of
// order and looks up time/T under odd spellings of T: each is either
// ENOENT (a name that cannot exist) or shows exactly the records from the
// first one stamped T or later (README, "Find records by time").
func TestTimeNamesAdv34(t *testing.T) {
	dir := t.TempDir()
	l, err := storage.Open(dir, storage.Options{Logger: quietLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	// Offsets 0..5; 2023-11-14T22:13:20Z is 1700000000000.
	stamps := []int64{5, 1_700_000_000_500, 1_699_999_999_000, 1_700_000_000_000, 1_700_000_001_000, 1_700_000_000_999}
	for _, ts := range stamps {
		_, err := p.Append([]storage.Record{{Timestamp: ts, Value: []byte("v")}})
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	mp, _, _ := adv33MountDir(t, dir)
	first := func(ts int64) record.Offset {
		for i, s := range stamps {
			if s >= ts {
				return record.Offset(i)
			}
		}
		return record.Offset(len(stamps))
	}
	want := func(ts int64, f storage.Format) []byte {
		var out []byte
		for i := first(ts); int(i) < len(stamps); i++ {
			out = f.Append(out, &record.Record{Offset: i, Timestamp: stamps[i], Value: []byte("v")})
		}
		return out
	}
	read := func(name string) ([]byte, error) {
		return os.ReadFile(filepath.Join(mp, "t", "0", "time", name))
	}
	for name, ts := range map[string]int64{
		"1700000000":                        1_700_000_000_000,
		"01700000000":                       1_700_000_000_000, // 11 digits: seconds
		"1700000000000":                     1_700_000_000_000,
		"1700000000001":                     1_700_000_000_001,
		"1700000000.jsonl":                  1_700_000_000_000,
		"0":                                 0,
		"6":                                 6_000,
		"00000000000000000000":              0,
		"9223372036854775807":               1<<63 - 1, // nothing that recent: empty
		"2023-11-14T22:13:20Z":              1_700_000_000_000,
		"2023-11-14t22:13:20z":              1_700_000_000_000,
		"2023-11-14T23:13:20+01:00":         1_700_000_000_000,
		"2023-11-14T22:13:20.5Z":            1_700_000_000_500,
		"2023-11-14T22:13:20.500999Z.jsonl": 1_700_000_000_501, // stamped .500 is before T
		"2023-11-14T22:13:20.999001Z":       1_700_000_001_000, // stamped .999 is before T
		"2023-11-14":                        1_699_920_000_000,
		"1970-01-01T00:00:00.005001Z":       6, // stamped 5 is before T
	} {
		_, f := splitFormat(name)
		got, err := read(name)
		require.NoError(t, err, name)
		assert.Equal(t, string(want(ts, f)), string(got), "time/%s", name)
	}
	for _, name := range []string{
		"", "+1700000000", " 1700000000", "1700000000 ", "-0", "-1", "0x10", "1e9", "1_700_000_000",
		"１７００００００００", "٣", "99999999999999999999", "1700000000.JSONL", ".jsonl",
		"1700000000.jsonl.jsonl", "2023-11-14T22:13:20+24:00", "2023-11-14T24:00:00Z", "2023-02-30",
		"2023-11-14 22:13:20Z", "1700000000.5",
	} {
		_, err := read(name)
		if name == "" {
			continue // the time directory itself
		}
		var errno syscall.Errno
		assert.True(t, errors.As(err, &errno) && errno == syscall.ENOENT, "time/%q: %v", name, err)
	}
}
