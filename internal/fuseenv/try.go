package fuseenv

import (
	"fmt"
	"os"
	"strings"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TryMount answers whether a mount really works here: Check, then a mount
// of an empty file system on a new temporary directory, the way fs.Mount
// mounts (mount(2) as root, fusermount3 otherwise or as root's fallback),
// unmounted again at once. It returns nil or a one-line reason. Tests
// use it (through internal/fusetest) so that a machine where FUSE cannot
// work skips them with the reason instead of failing each one.
func TryMount() error {
	if err := Check(false); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "logfs-fuse-probe-")
	if err != nil {
		return fmt.Errorf("try a mount: %v", err)
	}
	defer os.Remove(dir)
	root := os.Geteuid() == 0
	srv, err := fuse.NewServer(fuse.NewDefaultRawFileSystem(), dir, &fuse.MountOptions{
		Name:              "logfs-probe",
		FsName:            "logfs-probe",
		DirectMount:       root,
		DirectMountStrict: root && Fusermount() == "",
		DisableXAttrs:     true,
	})
	if err != nil {
		msg := strings.Join(strings.Fields(err.Error()), " ")
		if strings.HasPrefix(msg, "fusermount exited") {
			return fmt.Errorf("a test mount with fusermount3 failed (%s; its message is above): %s", msg, FusermountAdvice)
		}
		return fmt.Errorf("a test mount on %s failed: %s", dir, msg)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return fmt.Errorf("a test mount on %s did not come up: %v", dir, err)
	}
	if err := srv.Unmount(); err != nil {
		return fmt.Errorf("a test mount on %s could not be unmounted: %v", dir, err)
	}
	srv.Wait()
	return nil
}
