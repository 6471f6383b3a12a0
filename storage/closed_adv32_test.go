package storage_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// TestAdv32ReadClosedPartition: opening a reader or a view of a partition
// whose topic was deleted (or whose log was closed) fails with an error;
// it must not spin forever. Reader.Seek and NewView loop ("deleted by
// retention under us; look again") while segment.acquire fails, which it
// does for every segment of a closed partition, whose list and start
// offset never change again. Through a mount this is a LOOKUP of
// offset/N that never returns, burning a CPU (seen with a topic deleted
// under a mount and created again).
func TestAdv32ReadClosedPartition(t *testing.T) {
	for _, how := range []string{"delete", "close"} {
		t.Run(how, func(t *testing.T) {
			l, err := storage.Open(t.TempDir(), storage.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RetentionCheckInterval: -1})
			require.NoError(t, err)
			top, err := l.CreateTopic("t", 1, nil)
			require.NoError(t, err)
			p, err := top.Partition(0)
			require.NoError(t, err)
			_, err = p.AppendValues([][]byte{[]byte("a"), []byte("b")})
			require.NoError(t, err)
			if how == "delete" {
				require.NoError(t, l.DeleteTopic("t"))
				defer l.Close()
			} else {
				require.NoError(t, l.Close())
			}
			for name, open := range map[string]func() error{
				"NewReader": func() error {
					r, err := p.NewReader(0)
					if err == nil {
						r.Close()
					}
					return err
				},
				"NewView": func() error {
					v, err := p.NewView(storage.Values, 0)
					if err == nil {
						v.Close()
					}
					return err
				},
			} {
				done := make(chan error, 1)
				go func() { done <- open() }()
				select {
				case err := <-done:
					require.Error(t, err, name)
				case <-time.After(700 * time.Millisecond):
					t.Fatalf("%s of a partition after %s: no answer in 0.7 s (spinning)", name, how)
				}
			}
		})
	}
}

// TestAdv32NullHeaderKeyRefused: a header without a key (nil) cannot be
// read back (record.RecordIter: "bad header key", a corrupt batch), so
// Append must refuse it (ErrInvalidRecord) rather than write a batch that
// every read then fails with EIO and that a recovery would cut, with
// every record after it.
func TestAdv32NullHeaderKeyRefused(t *testing.T) {
	l, err := storage.Open(t.TempDir(), storage.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	_, err = p.Append([]storage.Record{{Value: []byte("v"), Headers: []record.Header{{Key: nil, Value: []byte("x")}}}})
	if err == nil {
		_, err = p.AppendValues([][]byte{[]byte("after")})
		require.NoError(t, err)
		r, rerr := p.NewReader(0)
		require.NoError(t, rerr)
		defer r.Close()
		_, rerr = r.Next()
		require.NoError(t, rerr, "Append took a record it cannot read back")
		require.NoError(t, l.Check())
	}
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
}
