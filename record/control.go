package record

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the type of a control record, the int16 at bytes 2-3 of
// its key (Kafka's ControlRecordType). A control batch holds one control
// record.
type ControlType int16

// The control record types Kafka 3.7 knows (ControlRecordType.java); the
// KRaft ones are written by controllers to __cluster_metadata.
const (
	ControlAbort          ControlType = 0
	ControlCommit         ControlType = 1
	ControlLeaderChange   ControlType = 2
	ControlSnapshotHeader ControlType = 3
	ControlSnapshotFooter ControlType = 4
	// ControlUnknown is what Kafka calls every other type.
	ControlUnknown ControlType = -1
)

// controlKeySize is a control record key: version int16, type int16.
const controlKeySize = 4

// markerValueSize is a transaction marker's value: version int16,
// coordinator epoch int32 (EndTransactionMarker).
const markerValueSize = 6

// String names the type as Kafka's enum does: ABORT, COMMIT,
// LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, or UNKNOWN for any
// other number.
func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	case ControlLeaderChange:
		return "LEADER_CHANGE"
	case ControlSnapshotHeader:
		return "SNAPSHOT_HEADER"
	case ControlSnapshotFooter:
		return "SNAPSHOT_FOOTER"
	}
	return "UNKNOWN"
}

// Known reports whether Kafka 3.7 has a name for the type.
func (t ControlType) Known() bool { return t >= ControlAbort && t <= ControlSnapshotFooter }

// ParseControlKey reads the type of a control record from its key, as
// Kafka's ControlRecordType.parseTypeId: at least 4 bytes, a version that
// is not negative (other versions are read as version 0).
func ParseControlKey(key []byte) (ControlType, error) {
	t, why := parseControlKey(key)
	if why != "" {
		return t, fmt.Errorf("%w: %s", ErrCorrupt, why)
	}
	return t, nil
}

func parseControlKey(key []byte) (ControlType, string) {
	if len(key) < controlKeySize {
		return ControlUnknown, fmt.Sprintf("control record key of %d bytes, want at least %d", len(key), controlKeySize)
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return ControlUnknown, fmt.Sprintf("control record key version %d", v)
	}
	return ControlType(int16(binary.BigEndian.Uint16(key[2:]))), ""
}

// ParseMarkerValue reads a transaction marker's (ABORT or COMMIT) value, as
// Kafka's EndTransactionMarker: at least 6 bytes, a version that is not
// negative, then the coordinator epoch.
func ParseMarkerValue(value []byte) (coordinatorEpoch int32, err error) {
	if len(value) < markerValueSize {
		return 0, fmt.Errorf("%w: transaction marker value of %d bytes, want at least %d", ErrCorrupt, len(value), markerValueSize)
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return 0, fmt.Errorf("%w: transaction marker version %d", ErrCorrupt, v)
	}
	return int32(binary.BigEndian.Uint32(value[2:])), nil
}

// MarkerKey and MarkerValue are the key and value of a transaction marker
// record of type t (ControlAbort or ControlCommit), version 0, as a
// transaction coordinator has a partition leader write them.
func MarkerKey(t ControlType) []byte {
	k := make([]byte, controlKeySize)
	binary.BigEndian.PutUint16(k[2:], uint16(t))
	return k
}

// MarkerValue: see MarkerKey.
func MarkerValue(coordinatorEpoch int32) []byte {
	v := make([]byte, markerValueSize)
	binary.BigEndian.PutUint32(v[2:], uint32(coordinatorEpoch))
	return v
}

// ControlType returns the type of the control record in b, a control batch
// read whole: the key of its first record, as Kafka reads a marker. It
// returns ControlUnknown and no error for a batch without records.
func (d *Decoder) ControlType(b *Batch) (ControlType, error) {
	it, err := d.Records(b)
	if err != nil {
		return ControlUnknown, err
	}
	if !it.Next() {
		return ControlUnknown, it.Err()
	}
	t, why := parseControlKey(it.Record().Key)
	if why != "" {
		return ControlUnknown, corruptf(b.Pos, "%s", why)
	}
	return t, nil
}
