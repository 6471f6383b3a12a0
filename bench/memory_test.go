package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMappedSegmentFile(t *testing.T) {
	const data = "/tmp/run/memory/data"
	const prefix = "7f0000000000-7f0000001000 r--s 00000000 fd:01 1234    "
	cases := map[string]struct {
		line string
		want string // "" when the line is not a segment file of the memory data set
	}{
		"index":         {line: prefix + data + "/mem-3/00000000000000000016.index", want: "3/16"},
		"time index":    {line: prefix + data + "/mem-0/00000000000000000000.timeindex", want: "0/0"},
		"deleted":       {line: prefix + data + "/mem-9/00000000000000000792.index (deleted)", want: "9/792"},
		"log":           {line: prefix + data + "/mem-3/00000000000000000016.log", want: "3/16"},
		"view index":    {line: prefix + data + "/mem-3/00000000000000000016.viewindex"},
		"other topic":   {line: prefix + data + "/bench-0/00000000000000000016.index"},
		"other dir":     {line: prefix + "/elsewhere/mem-3/00000000000000000016.index"},
		"not a segment": {line: prefix + data + "/mem-3/leader-epoch-checkpoint.index"},
		"anonymous":     {line: "7f0000000000-7f0000001000 rw-p 00000000 00:00 0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := mappedSegmentFile(tc.line, data)
			require.Equal(t, tc.want != "", ok)
			require.Equal(t, tc.want, got)
		})
	}
}
