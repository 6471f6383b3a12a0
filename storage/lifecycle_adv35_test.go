package storage

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Adversarial tests of what a topic's delete (and its re-creation under the
// same name) leaves for the holders of its old handles: Readers, Views,
// segments they pin, Topic handles, delayed deletes. See
// retention_adv35_test.go for retention raced against the same.

// adv35Append appends n records "prefix-i", one batch each, to every
// partition of top.
func adv35Append(t *testing.T, top *Topic, n int, prefix string) {
	t.Helper()
	for _, p := range top.Partitions() {
		for i := 0; i < n; i++ {
			_, err := p.Append([]Record{{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}})
			require.NoError(t, err)
		}
	}
}

// adv35NewCfg are the new topic's settings: the old one's segment size,
// so that its segments have the old ones' names, and no retention.
func adv35NewCfg() Overrides { return small("segment.bytes=300", "retention.ms=-1") }

// adv35CheckOld requires the records an old reader returned to be the old
// topic's, in order from offset 0, and its end an error.
func adv35CheckOld(t *testing.T, got []string, end error, what string) {
	t.Helper()
	for i, r := range got {
		require.True(t, r == fmt.Sprintf("old-%d", i) || r == fmt.Sprintf("%d:old-%d", i, i), "%s: record %d is %q", what, i, r)
	}
	require.Error(t, end, "%s: ends without an error after %d records", what, len(got))
	require.NotErrorIs(t, end, io.EOF, "%s: ends as if the old topic ended there", what)
}

// adv35ReadReader reads r to its first error and returns the records
// ("offset:value") and the error.
func adv35ReadReader(r *Reader) ([]string, error) {
	var got []string
	for {
		rec, err := r.Next()
		if err != nil {
			return got, err
		}
		got = append(got, fmt.Sprintf("%d:%s", rec.Offset, rec.Value))
	}
}

// adv35WithTimeout runs fn, which asserts nothing itself, failing the test
// if it does not return within 5 s (a hang).
func adv35WithTimeout(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s hangs", what)
	}
}

// TestAdv35ReaderEndsWhenTopicGoes: a Reader of a partition whose topic is
// deleted (created again or not), or whose Log is closed, ends with
// ErrClosed once it has read the segment it holds: the segments after it
// can no longer be pinned, and it must not wait for them for ever
// (before, it spun on them, a CPU at 100 %, and never returned).
func TestAdv35ReaderEndsWhenTopicGoes(t *testing.T) {
	for _, how := range []string{"delete", "recreate", "close"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			l := reopen(t, dir, false)
			top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.ms=-1"))
			require.NoError(t, err)
			adv35Append(t, top, 20, "old")
			p, _ := top.Partition(0)
			require.Greater(t, len(p.SegmentBases()), 2)
			r, err := p.NewReader(0)
			require.NoError(t, err)
			defer r.Close()
			switch how {
			case "delete":
				require.NoError(t, l.DeleteTopic("t"))
			case "recreate":
				require.NoError(t, l.DeleteTopic("t"))
				top, err := l.CreateTopic("t", 1, adv35NewCfg())
				require.NoError(t, err)
				adv35Append(t, top, 10, "new")
			case "close":
				require.NoError(t, l.Close())
			}
			var got []string
			var end error
			adv35WithTimeout(t, "the Reader", func() { got, end = adv35ReadReader(r) })
			adv35CheckOld(t, got, end, "Reader")
			require.ErrorIs(t, end, ErrClosed)
			require.Less(t, len(got), 20, "it read segments nobody pinned")
			require.NoError(t, l.Close())
		})
	}
}
