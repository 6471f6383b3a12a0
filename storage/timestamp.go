package storage

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseTimestamp reads a point in time as users write it: unix seconds
// ("1700000000", up to 11 digits), unix milliseconds (12 digits or more,
// "1700000000000"), or RFC 3339 ("2023-11-14T22:13:20Z", fractions and
// offsets allowed). It returns milliseconds since the epoch.
func ParseTimestamp(s string) (int64, error) {
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
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: want unix seconds, unix milliseconds or RFC 3339", ErrInvalidTimestamp, s)
	}
	return t.UnixMilli(), nil
}
