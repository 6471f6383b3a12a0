package fs

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFusermountErrno: what go-fuse reports of a failed `fusermount3 -u`
// becomes umount(2)'s errno, so that a user who is not root reads the
// same line as root; what is not an errno stays, on one line.
func TestFusermountErrno(t *testing.T) {
	for in, want := range map[string]error{
		"/usr/bin/fusermount3: failed to unmount /m: Device or resource busy\n (code exit status 1)\n": syscall.EBUSY,
		"fusermount3: failed to unmount /m: Invalid argument\n (code exit status 1)\n":                 syscall.EINVAL,
		"fusermount3: entry for /m not found in /etc/mtab\n (code exit status 1)\n":                    errors.New("fusermount3: entry for /m not found in /etc/mtab"),
		"exec: \"fusermount3\": executable file not found in $PATH":                                    errors.New("exec: \"fusermount3\": executable file not found in $PATH"),
	} {
		require.Equal(t, want, fusermountErrno(errors.New(in)), "%q", in)
	}
	require.Equal(t, syscall.EBUSY, fusermountErrno(syscall.EBUSY), "umount(2)'s errno as it is")
}
