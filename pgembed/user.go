package pgembed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// runAs is the identity the postgres processes run as when it differs from
// the current one. A nil *runAs means "as the current user".
type runAs struct {
	name     string
	uid, gid int
}

// serverUser decides who runs postgres. PostgreSQL refuses to run as root,
// so a root process runs it as the postgres user; anyone else runs it as
// themselves.
func serverUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no postgres user to run it as (%w): "+
			"create one (useradd --system postgres), run as another user, or set DATABASE_URL", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("user postgres: uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, fmt.Errorf("user postgres: gid %q: %w", u.Gid, err)
	}
	return &runAs{name: u.Username, uid: uid, gid: gid}, nil
}

// chown gives path to the server user; it does nothing when postgres runs
// as the current user.
func (r *runAs) chown(path string) error {
	if r == nil {
		return nil
	}
	if err := os.Chown(path, r.uid, r.gid); err != nil {
		return fmt.Errorf("give %s to user %s: %w", path, r.name, err)
	}
	return nil
}

// hint explains a permission problem in terms of the user postgres runs as.
func (r *runAs) hint() string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf(" (postgres runs as user %s because this process is root: the data directory and "+
		"every parent directory must be reachable by that user)", r.name)
}

// reach checks that the server user can enter every existing parent
// directory of dataDir (search permission, x), which PostgreSQL needs to
// reach its data directory; the missing ones are made with mode 0755. The
// error names the first parent that fails and the rule. It does nothing
// when postgres runs as the current user.
func (r *runAs) reach(dataDir string) error {
	if r == nil {
		return nil
	}
	var parents []string
	for dir := filepath.Dir(dataDir); ; dir = filepath.Dir(dir) {
		parents = append(parents, dir)
		if dir == filepath.Dir(dir) {
			break
		}
	}
	for i := len(parents) - 1; i >= 0; i-- {
		dir := parents[i]
		fi, err := os.Stat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // made by Start, mode 0755
		}
		if err != nil {
			return fmt.Errorf("data directory %s: parent directory %s: %w", dataDir, dir, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("data directory %s: parent %s is not a directory", dataDir, dir)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil // cannot tell; postgres will say
		}
		mode := fi.Mode().Perm()
		var can bool
		switch {
		case int(st.Uid) == r.uid:
			can = mode&0o100 != 0
		case int(st.Gid) == r.gid:
			can = mode&0o010 != 0
		default:
			can = mode&0o001 != 0
		}
		if !can {
			return fmt.Errorf("data directory %s: user %s cannot enter its parent directory %s (mode %04o, owner uid %d): "+
				"PostgreSQL runs as user %s because this process is root, and every parent directory of the data "+
				"directory must let that user in (x permission). Run `chmod o+x %s`, or choose a data directory "+
				"under a directory that user can enter (for example /var/lib/convo/pgdata)",
				dataDir, r.name, dir, mode, st.Uid, r.name, dir)
		}
	}
	return nil
}
