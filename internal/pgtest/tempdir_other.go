//go:build !unix

package pgtest

import (
	"fmt"
	"os"
)

// lockedTempDir creates the directory of this process's cluster. (pgembed
// does not run on these systems; this keeps the package compiling.)
func lockedTempDir() (dir string, unlock func(), err error) {
	dir, err = os.MkdirTemp("", "convo-pgtest-*")
	if err != nil {
		return "", nil, fmt.Errorf("temporary directory: %w", err)
	}
	return dir, func() {}, nil
}

func removeStaleDirs() {}
