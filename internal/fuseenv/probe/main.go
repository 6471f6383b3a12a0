// Command probe tells .ci/run whether mounts work on this machine for this
// user: it exits 0, or prints the reason on one line and exits 1.
package main

import (
	"fmt"
	"os"

	"github.com/logfs/logfs/internal/fuseenv"
)

func main() {
	if err := fuseenv.TryMount(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
