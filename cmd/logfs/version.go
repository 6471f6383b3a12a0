package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time for releases:
//
//	go build -ldflags "-X main.version=1.2.0" ./cmd/logfs
//
// Otherwise it comes from the module version (go install …@v1.2.0) or the
// commit the binary was built from, when Go recorded them.
var version = ""

// versionString is what logfs --version prints: the version, the commit
// when known, and the Go toolchain and platform.
func versionString() string {
	v, commit, dirty := version, "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	s := "logfs " + v
	if commit != "" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		s += " (commit " + commit
		if dirty {
			s += ", modified"
		}
		s += ")"
	}
	return s + fmt.Sprintf(", %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
