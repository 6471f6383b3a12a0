package kafka

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/storage"
)

// TestWaitAnswerAnsweredBeforeGiveUp: a batch answered for good by the
// time a stopping mount gives up its append is reported as answered, not
// as "sent and not acknowledged, may still be appended": the mount would
// log a line lost that is in the cluster. (Both are ready when waitAnswer
// looks; a select alone picks either.)
func TestWaitAnswerAnsweredBeforeGiveUp(t *testing.T) {
	b := &batch{done: make(chan struct{})}
	close(b.done)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("%w: given up", storage.ErrClosed))
	for i := 0; i < 200; i++ {
		require.NoError(t, waitAnswer(ctx, b), "try %d", i)
	}
}
