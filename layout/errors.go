package layout

import "errors"

var (
	// ErrInvalidTopic is returned for a topic name that breaks Kafka's rules:
	// 1 to 249 characters from [a-zA-Z0-9._-], and not "." or "..".
	ErrInvalidTopic = errors.New("logfs: invalid topic name")

	// ErrInvalidPartition is returned for a partition that is not a
	// non-negative decimal number in canonical form ("7", not "07").
	ErrInvalidPartition = errors.New("logfs: invalid partition")
)
