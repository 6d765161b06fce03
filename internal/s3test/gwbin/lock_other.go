//go:build !unix

package gwbin

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"
)

// lockFile creates path exclusively, waiting while it exists; unlock
// removes it. (A process that dies holding it leaves it behind: remove it
// by hand.)
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
