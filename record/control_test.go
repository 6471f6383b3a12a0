package record

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestControlRecords(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		var b Builder
		b.Append(1, MarkerKey(typ), MarkerValue(7), nil)
		raw, err := b.BuildWith(BuildOptions{ProducerID: 3, Attributes: transactionalBit | controlBit})
		require.NoError(t, err)
		batch, err := ParseBatch(raw, 0)
		require.NoError(t, err)
		var d Decoder
		got, err := d.ControlType(&batch)
		require.NoError(t, err)
		require.Equal(t, typ, got)
		it, err := d.Records(&batch)
		require.NoError(t, err)
		require.True(t, it.Next())
		epoch, err := ParseMarkerValue(it.Record().Value)
		require.NoError(t, err)
		require.Equal(t, int32(7), epoch)
	}
	require.Equal(t, "LEADER_CHANGE", ControlLeaderChange.String())
	require.Equal(t, "UNKNOWN", ControlType(5).String(), "Kafka 3.7 has no name for KRaft's type 5")
	_, err := ParseControlKey([]byte{0, 0, 1})
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = ParseControlKey([]byte{0xff, 0xff, 0, 1})
	require.ErrorIs(t, err, ErrCorrupt, "a negative version")
	_, err = ParseMarkerValue([]byte{0, 0, 0, 0, 1})
	require.ErrorIs(t, err, ErrCorrupt)
}
