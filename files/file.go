package files

import (
	"time"

	"github.com/google/uuid"
)

// File is one upload as its owner named it. Two uploads of the same bytes
// by the same owner are two Files (each its own ID and Filename) sharing
// one stored copy of the bytes.
type File struct {
	ID        uuid.UUID
	Owner     string // the user id (conversation.UserFromContext)
	Filename  string
	MediaType string // decided from the bytes (see DecideMediaType)
	Size      int64
	SHA256    string // lower-case hex
	CreatedAt time.Time
}

// Limits bound what uploads may hold. A field of 0 or less takes its
// default (DefaultLimits).
type Limits struct {
	// MaxFileBytes bounds one file (CONVO_FILE_MAX_BYTES): an upload is
	// stopped once it has sent one byte more, and nothing is kept.
	MaxFileBytes int64
	// MaxUserBytes bounds the bytes one user's files hold, each distinct
	// content counted once (CONVO_FILE_USER_BYTES).
	MaxUserBytes int64
	// MaxFilesPerMessage bounds the files one message may hold
	// (CONVO_FILE_MAX_PER_MESSAGE); the message's writer enforces it.
	MaxFilesPerMessage int
}

// The default limits.
const (
	DefaultMaxFileBytes       = 25 << 20
	DefaultMaxUserBytes       = 1 << 30
	DefaultMaxFilesPerMessage = 10
)

// DefaultLimits returns the limits a server has unless configured: 25 MiB
// a file, 1 GiB a user, 10 files a message.
func DefaultLimits() Limits {
	return Limits{MaxFileBytes: DefaultMaxFileBytes, MaxUserBytes: DefaultMaxUserBytes, MaxFilesPerMessage: DefaultMaxFilesPerMessage}
}

// withDefaults returns l with each unset field at its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxUserBytes <= 0 {
		l.MaxUserBytes = d.MaxUserBytes
	}
	if l.MaxFilesPerMessage <= 0 {
		l.MaxFilesPerMessage = d.MaxFilesPerMessage
	}
	return l
}
