package pgembed

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
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
