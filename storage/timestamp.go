package storage

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseTimestamp reads a point in time as users write it: unix seconds
// ("1700000000", up to 11 digits), unix milliseconds (12 digits or more,
// "1700000000000"), RFC 3339 ("2023-11-14T22:13:20Z", fractions and
// offsets allowed), or a plain date ("2023-11-14": midnight UTC). It
// returns milliseconds since the epoch.
//
// Digits are told apart by their count: 11 digits of seconds reach the year
// 5138, and 12 digits of milliseconds start in 1973, so every timestamp of
// a real log reads the same either way it was meant.
func ParseTimestamp(s string) (int64, error) { return parseTimestamp(s, false) }

// ParseTimeBound is ParseTimestamp for the T of a lookup by time (time/T,
// consume --time), which finds the records stamped T or later: a time
// between two milliseconds (2024-10-10T12:00:00.0005Z) rounds up, since a
// record stamped the millisecond below was stamped before T.
func ParseTimeBound(s string) (int64, error) { return parseTimestamp(s, true) }

func parseTimestamp(s string, up bool) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrInvalidTimestamp)
	}
	if strings.Trim(s, "0123456789") == "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %q: %v", ErrInvalidTimestamp, s, err)
		}
		if len(s) >= 12 {
			return n, nil
		}
		return n * 1000, nil
	}
	layout := time.RFC3339Nano
	if len(s) == len(time.DateOnly) {
		layout = time.DateOnly // parsed as UTC
	}
	// RFC 3339 allows a lower-case t and z; Go's parser does not.
	t, err := time.Parse(layout, strings.ToUpper(s))
	if err == nil && layout == time.RFC3339Nano {
		err = checkZoneOffset(s)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %q: want unix seconds, unix milliseconds, RFC 3339 (2024-10-10T12:00:00Z) or a date (2024-10-10)", ErrInvalidTimestamp, s)
	}
	ms := t.UnixMilli() // rounded down, before 1970 too
	if up && t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms, nil
}

// checkZoneOffset refuses the offsets Go's parser lets through and RFC 3339
// does not: an hour over 23 (+24:00) or a minute over 59 (+12:60).
func checkZoneOffset(s string) error {
	if strings.HasSuffix(s, "Z") || strings.HasSuffix(s, "z") || len(s) < 6 {
		return nil
	}
	off := s[len(s)-6:] // ±hh:mm, as the layout requires
	h, herr := strconv.Atoi(off[1:3])
	m, merr := strconv.Atoi(off[4:6])
	if herr != nil || merr != nil || h > 23 || m > 59 {
		return fmt.Errorf("zone offset %s out of range", off)
	}
	return nil
}
