package main

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/storage"
)

// consume works beside a running mount (README): the mount's retention
// deletes segments while consume opens the data directory read-only,
// between its listing of a partition and its open of the segments. consume
// must not fail on a segment that retention removed under it; it goes on
// from the new log start, as --follow promises.
func TestConsumeBesideRetentionAdv34c(t *testing.T) {
	data := filepath.Join(t.TempDir(), "logfs-data")
	l, err := storage.Open(data, storage.Options{RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.CreateTopic("r", 1, storage.Overrides{
		"segment.bytes": 200, "retention.bytes": 2000, "file.delete.delay.ms": 0,
	})
	require.NoError(t, err)
	p, err := l.Partition("r", 0)
	require.NoError(t, err)
	for i := 0; i < 300; i++ { // about 300 segments of one batch each
		_, err := p.Append([]storage.Record{{Value: []byte(fmt.Sprintf("record %d padded to fill a segment", i))}})
		require.NoError(t, err)
	}

	// The writer goes on appending and deleting the oldest segments by
	// retention, as a mount does, while consume opens the directory.
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 300; i++ {
			if _, err := p.Append([]storage.Record{{Value: []byte(fmt.Sprintf("more %d padded to fill a segment", i))}}); err != nil {
				done <- err
				return
			}
			if _, err := l.EnforceRetention(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	c := consumeArgs{dir: data, topic: "r", offset: "earliest", format: storage.Values}
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			return
		default:
		}
		_, err := consumeOnce(io.Discard, io.Discard, c, -1)
		require.NoError(t, err)
	}
}
