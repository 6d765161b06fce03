package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/files"
	httpfiles "github.com/convo-dev/convo/httpapi/files"
)

// messageFileURLs signs the URLs of the files messages hold
// (wire.FileURLs) with the server's files.Signer. A signature names the
// file's owner, which a message's file block does not carry: it is read
// from the database once per file and kept, as a file's owner never
// changes. The cache is bounded (emptied when full), so that it holds at
// most ownerCacheSize entries however many files are signed.
type messageFileURLs struct {
	signer *files.Signer
	owners httpfiles.Owners
	logger *slog.Logger

	mu    sync.Mutex
	cache map[uuid.UUID]string
}

// ownerCacheSize bounds messageFileURLs' cache of owners.
const ownerCacheSize = 10000

// ownerLookupTimeout bounds one lookup of a file's owner: signing happens
// on the way to a client, which must not wait long on it.
const ownerLookupTimeout = 5 * time.Second

func newMessageFileURLs(signer *files.Signer, owners httpfiles.Owners, logger *slog.Logger) *messageFileURLs {
	return &messageFileURLs{signer: signer, owners: owners, logger: logger, cache: map[uuid.UUID]string{}}
}

// FileURL implements wire.FileURLs. A file that does not exist (any more)
// or whose owner cannot be read gets no URL (""), and the zero time.
func (u *messageFileURLs) FileURL(id string) (string, time.Time) {
	fid, err := uuid.Parse(id)
	if err != nil {
		return "", time.Time{}
	}
	owner, ok := u.owner(fid)
	if !ok {
		return "", time.Time{}
	}
	return u.signer.URL(fid, owner, time.Now())
}

func (u *messageFileURLs) owner(id uuid.UUID) (string, bool) {
	u.mu.Lock()
	owner, ok := u.cache[id]
	u.mu.Unlock()
	if ok {
		return owner, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), ownerLookupTimeout)
	defer cancel()
	owner, err := u.owners.FileOwner(ctx, id)
	if err != nil {
		if err != files.ErrNotFound {
			u.logger.Warn("sign a file's URL: read its owner", "file", id, "err", err)
		}
		return "", false
	}
	u.mu.Lock()
	if len(u.cache) >= ownerCacheSize {
		clear(u.cache)
	}
	u.cache[id] = owner
	u.mu.Unlock()
	return owner, true
}
