package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/convo-dev/convo/files"
)

// FileSettings bound the files users upload (docs/files.md). Each has an
// environment variable and a flag.
type FileSettings struct {
	// MaxBytes bounds one file (CONVO_FILE_MAX_BYTES, --file-max-bytes).
	MaxBytes int64
	// UserBytes bounds the bytes one user's files hold, each content once
	// (CONVO_FILE_USER_BYTES, --file-user-bytes).
	UserBytes int64
	// MaxPerMessage bounds the files one message holds
	// (CONVO_FILE_MAX_PER_MESSAGE, --file-max-per-message).
	MaxPerMessage int
	// Grace is how long a file no message holds is kept before the
	// collector deletes it (CONVO_FILE_GRACE, --file-grace): the time a
	// client has between uploading a file and sending it.
	Grace time.Duration
	// UploadTimeout bounds how long an upload's body (POST /v1/files) may
	// take to arrive (CONVO_FILE_UPLOAD_TIMEOUT, --file-upload-timeout), in
	// place of CONVO_BODY_TIMEOUT: a 25 MiB file at 1 MB/s takes 26 s.
	UploadTimeout time.Duration
}

// DefaultFileSettings: 25 MiB a file, 1 GiB a user, 10 files a message,
// a day's grace.
func DefaultFileSettings() FileSettings {
	d := files.DefaultLimits()
	return FileSettings{MaxBytes: d.MaxFileBytes, UserBytes: d.MaxUserBytes, MaxPerMessage: d.MaxFilesPerMessage, Grace: 24 * time.Hour,
		UploadTimeout: 10 * time.Minute}
}

// minFileGrace is the shortest grace the collector may have: it must
// outlast every upload in flight, whose blob is pending until committed.
const minFileGrace = time.Minute

func (s *FileSettings) fromEnv(getenv func(string) string) error {
	for name, dst := range map[string]*int64{"CONVO_FILE_MAX_BYTES": &s.MaxBytes, "CONVO_FILE_USER_BYTES": &s.UserBytes} {
		if v := getenv(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not a whole number of bytes", name, v)
			}
			*dst = n
		}
	}
	if v := getenv("CONVO_FILE_MAX_PER_MESSAGE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("CONVO_FILE_MAX_PER_MESSAGE: %q is not a whole number", v)
		}
		s.MaxPerMessage = n
	}
	for name, dst := range map[string]*time.Duration{"CONVO_FILE_GRACE": &s.Grace, "CONVO_FILE_UPLOAD_TIMEOUT": &s.UploadTimeout} {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a duration such as 24h or 90m", name, v)
			}
			*dst = d
		}
	}
	return nil
}

func (s *FileSettings) registerFlags(fs *flag.FlagSet) {
	fs.Int64Var(&s.MaxBytes, "file-max-bytes", s.MaxBytes, "largest file a user may upload, in bytes (CONVO_FILE_MAX_BYTES)")
	fs.Int64Var(&s.UserBytes, "file-user-bytes", s.UserBytes, "bytes one user's files may hold in all, each content counted once (CONVO_FILE_USER_BYTES)")
	fs.IntVar(&s.MaxPerMessage, "file-max-per-message", s.MaxPerMessage, "most files one message may hold (CONVO_FILE_MAX_PER_MESSAGE)")
	fs.DurationVar(&s.Grace, "file-grace", s.Grace, "how long a file no message holds is kept before it is deleted (CONVO_FILE_GRACE); at least 1m, and longer than the upload timeout")
	fs.DurationVar(&s.UploadTimeout, "file-upload-timeout", s.UploadTimeout, "how long an upload's body may take to arrive (CONVO_FILE_UPLOAD_TIMEOUT)")
}

// check refuses settings out of range, naming each through name.
func (s *FileSettings) check(name func(flag string) string) error {
	if s.MaxBytes < 1 {
		return fmt.Errorf("%s: want 1 or more", name("file-max-bytes"))
	}
	if s.UserBytes < 1 {
		return fmt.Errorf("%s: want 1 or more", name("file-user-bytes"))
	}
	if s.MaxPerMessage < 1 {
		return fmt.Errorf("%s: want 1 or more", name("file-max-per-message"))
	}
	if s.UploadTimeout < time.Second {
		return fmt.Errorf("%s: want 1s or more", name("file-upload-timeout"))
	}
	if s.Grace < minFileGrace || s.Grace <= s.UploadTimeout {
		return fmt.Errorf("%s: want %s or more, and more than %s: the collector must not take an upload still in flight",
			name("file-grace"), minFileGrace, name("file-upload-timeout"))
	}
	return nil
}

// limits returns the files.Limits of the settings.
func (s FileSettings) limits() files.Limits {
	return files.Limits{MaxFileBytes: s.MaxBytes, MaxUserBytes: s.UserBytes, MaxFilesPerMessage: s.MaxPerMessage}
}
