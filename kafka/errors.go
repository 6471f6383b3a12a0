package kafka

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/logfs/logfs/storage"
)

// Errors of this package. Errors from the cluster wrap the broker's error
// (a *kerr.Error, with the broker's message in the text) and what it means
// to the file system: a storage sentinel (storage.ErrTopicExists,
// ErrInvalidTopic, ErrInvalidPartition, ErrRecordTooLarge, ErrNoTopic,
// ErrNoPartition) or a syscall.Errno (EPERM for authorization, ETIMEDOUT
// for an append not acknowledged in time, EIO for the rest), so that the
// mount's one errno mapping (fs/errno.go) needs no Kafka knowledge.
var (
	// ErrConfig is returned for a client property that cannot be used.
	ErrConfig = errors.New("logfs/kafka: bad client property")

	// ErrCopy is returned when the copy directory belongs to another
	// cluster than the one mounted.
	ErrCopy = errors.New("logfs/kafka: copy directory")

	// ErrClosed is returned by operations after Close.
	ErrClosed = errors.New("logfs/kafka: closed")

	// ErrTimeout is returned when the cluster did not answer within
	// default.api.timeout.ms (a lookup, a wait for the copy) or an append
	// was not acknowledged within delivery.timeout.ms. It wraps
	// syscall.ETIMEDOUT.
	ErrTimeout = fmt.Errorf("logfs/kafka: timed out (%w)", syscall.ETIMEDOUT)
)

// brokerError turns an error code in a response into an error that says
// what happened, with the broker's message when it sent one. op names the
// request ("create topic orders").
func brokerError(op string, code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	kind := kerr.ErrorForCode(code)
	text := ""
	if msg != nil && *msg != "" {
		text = ": " + *msg
	}
	return fmt.Errorf("%s: %w%s (%w)", op, kind, text, meaning(kind))
}

// meaning is what a broker's error is to a file system caller.
func meaning(err error) error {
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return storage.ErrTopicExists
	case errors.Is(err, kerr.InvalidTopicException), errors.Is(err, kerr.InvalidReplicationFactor),
		errors.Is(err, kerr.InvalidReplicaAssignment), errors.Is(err, kerr.InvalidConfig),
		errors.Is(err, kerr.PolicyViolation), errors.Is(err, kerr.InvalidRequest):
		return storage.ErrInvalidTopic
	case errors.Is(err, kerr.InvalidPartitions):
		return storage.ErrInvalidPartition
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.GroupAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.DelegationTokenAuthorizationFailed):
		return syscall.EPERM
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return storage.ErrRecordTooLarge
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return storage.ErrNoTopic
	case errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.CorruptMessage):
		return storage.ErrInvalidRecord
	}
	return syscall.EIO
}

// clientError wraps an error of the client itself (a connection that
// failed, SASL refused) so that it reads as one line and maps to an errno.
func clientError(op string, err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Errorf("%s: %w (%w)", op, err, meaning(ke))
	}
	var errno syscall.Errno
	if errors.As(err, &errno) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrClosed) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w (%w)", op, err, syscall.EIO)
}
