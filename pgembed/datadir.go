package pgembed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// LogFileName is the server log inside the data directory. Each Start
// moves the previous one to LogFileName + ".1"; Restart appends.
const LogFileName = "postgres.log"

// initialised reports whether dir holds a PostgreSQL cluster.
func initialised(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "PG_VERSION"))
	return err == nil
}

// prepareDataDir makes c.dataDir hold a cluster the server user owns,
// running initdb when it does not hold one yet.
//
// initdb writes into a sibling directory that is renamed into place only
// once it succeeded, so an initdb killed halfway never leaves a directory
// that looks initialised but cannot start. (If the rename is impossible,
// because the data directory is a mount point or an existing empty
// directory, initdb writes into it directly.)
func (c *Cluster) prepareDataDir(ctx context.Context) error {
	if err := c.as.reach(c.dataDir); err != nil {
		return err
	}
	if initialised(c.dataDir) {
		pw, err := readSecret(filepath.Join(c.dataDir, PasswordFileName))
		if err != nil {
			return err
		}
		if pw == "" {
			// Made before pgembed used passwords: Start protects it.
			if pw, err = newPassword(); err != nil {
				return err
			}
			c.unprotected = true
		}
		c.password = pw
		return nil
	}
	pw, err := newPassword()
	if err != nil {
		return err
	}
	c.password = pw
	entries, err := os.ReadDir(c.dataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("data directory: %w%s", err, c.as.hint())
	case len(entries) > 0:
		return fmt.Errorf("data directory %s is not empty and holds no PostgreSQL cluster: "+
			"empty it or choose another one", c.dataDir)
	}
	parent := filepath.Dir(c.dataDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("data directory %s: cannot make its parent directory: %w", c.dataDir, err)
	}

	tmp := c.dataDir + ".initdb"
	if err := os.RemoveAll(tmp); err != nil { // left by an interrupted earlier run
		return fmt.Errorf("data directory %s: %w", c.dataDir, err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("data directory %s: its parent directory %s must be writable by this process "+
			"(the new data directory is made beside it, in %s, then renamed): %w", c.dataDir, parent, filepath.Base(tmp), err)
	}
	c.logger.Info("initialising a new PostgreSQL data directory (initdb; first start only)", "data_dir", c.dataDir)
	if err := c.as.chown(tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := c.initdb(ctx, tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := c.writeSecret(filepath.Join(tmp, PasswordFileName), c.password); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	err = os.Rename(tmp, c.dataDir)
	if err == nil {
		c.logger.Info("postgres data directory initialised", "data_dir", c.dataDir)
		return nil
	}
	os.RemoveAll(tmp)
	// EBUSY, EXDEV: a mount point; EEXIST, ENOTEMPTY: an existing empty
	// directory that rename will not replace.
	if !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.EXDEV) &&
		!errors.Is(err, syscall.EEXIST) && !errors.Is(err, syscall.ENOTEMPTY) {
		return fmt.Errorf("data directory: %w", err)
	}
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return fmt.Errorf("data directory %s: %w", c.dataDir, err)
	}
	if err := c.as.chown(c.dataDir); err != nil {
		return err
	}
	if err := c.initdb(ctx, c.dataDir); err != nil {
		return err
	}
	if err := c.writeSecret(filepath.Join(c.dataDir, PasswordFileName), c.password); err != nil {
		return err
	}
	c.logger.Info("postgres data directory initialised", "data_dir", c.dataDir)
	return nil
}

// initdb creates a cluster in dir with a superuser named postgres whose
// password is c.password (needed over TCP; the socket is trusted) and
// UTF-8 encoding. It asks for the C.UTF-8 locale and falls back to C where
// that locale does not exist.
func (c *Cluster) initdb(ctx context.Context, dir string) error {
	pwfile, remove, err := c.pwfile(c.password)
	if err != nil {
		return err
	}
	defer remove()
	var out []byte
	for _, locale := range []string{"C.UTF-8", "C"} {
		args := []string{"-D", dir, "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256",
			"--pwfile=" + pwfile, "-E", "UTF8", "--locale=" + locale}
		if c.fast {
			args = append(args, "--no-sync")
		}
		cmd := exec.CommandContext(ctx, c.bin.initdb, args...)
		cmd.Dir = "/"
		cmd.SysProcAttr = sysProcAttr(c.as, 0)
		out, err = cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !bytes.Contains(out, []byte("locale")) {
			break
		}
		// initdb removes what it wrote on failure, but be sure.
		if rmErr := emptyDir(dir); rmErr != nil {
			return fmt.Errorf("initdb: %w; clean up: %w", err, rmErr)
		}
	}
	tail := strings.TrimSpace(string(out))
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	// initdb's own lines, one to a line, indented under ours.
	return fmt.Errorf("initdb %s: %w%s; initdb said:\n  %s", c.dataDir, err, c.as.hint(),
		strings.ReplaceAll(tail, "\n", "\n  "))
}

// emptyDir removes everything inside dir but dir itself.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// HoldsCluster reports whether dir holds a PostgreSQL cluster (initdb has
// run in it).
func HoldsCluster(dir string) bool { return initialised(dir) }
