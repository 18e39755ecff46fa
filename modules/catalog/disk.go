package catalog

import (
	"os"
	"path/filepath"
	"syscall"
)

// FreeBytes is the space available to this process on the file system holding dir (or its
// nearest existing parent, since the models folder is created on first install).
func FreeBytes(dir string) (int64, error) {
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(dir, &st)
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize), nil
		}
		if !os.IsNotExist(err) {
			return 0, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return 0, err
		}
		dir = parent
	}
}
