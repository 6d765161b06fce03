package files

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

const (
	// MinURLKeyBytes is the shortest key a Signer takes.
	MinURLKeyBytes = 32
	// DefaultURLTTL is how long a signed URL is valid unless
	// CONVO_FILE_URL_TTL says otherwise.
	DefaultURLTTL = time.Hour
)

// Signer signs and checks the short-lived URLs of files' content
// (/v1/files/{id}/content?exp=…&sig=…), which a browser fetches without a
// bearer token (an <img src>). A signature is the HMAC-SHA256, under the
// Signer's key, of the file's id, its owner and the expiry: it is valid
// for that file only, until then only, and every process with the same
// key accepts it. A Signer is safe for concurrent use.
type Signer struct {
	key []byte
	ttl time.Duration
}

// NewSigner returns a Signer whose URLs are valid for ttl (DefaultURLTTL
// when 0). Errors: a key shorter than MinURLKeyBytes, a negative ttl.
func NewSigner(key []byte, ttl time.Duration) (*Signer, error) {
	if len(key) < MinURLKeyBytes {
		return nil, fmt.Errorf("file URL key: %d bytes; want at least %d", len(key), MinURLKeyBytes)
	}
	if ttl < 0 {
		return nil, fmt.Errorf("file URL TTL: %v; want a positive duration", ttl)
	}
	if ttl == 0 {
		ttl = DefaultURLTTL
	}
	return &Signer{key: append([]byte(nil), key...), ttl: ttl}, nil
}

// ParseURLKey decodes a key given as text (CONVO_FILE_URL_KEY): hex, or
// base64 (standard or URL alphabet, padded or not), of at least
// MinURLKeyBytes bytes. The error says which of the two was wrong.
func ParseURLKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	key, err := hex.DecodeString(s)
	if err != nil {
		key, err = decodeBase64(s)
	}
	if err != nil {
		return nil, errors.New("is neither hex nor base64")
	}
	if len(key) < MinURLKeyBytes {
		return nil, fmt.Errorf("decodes to %d bytes; want at least %d (e.g. openssl rand -hex 32)", len(key), MinURLKeyBytes)
	}
	return key, nil
}

func decodeBase64(s string) ([]byte, error) {
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var key []byte
		if key, err = enc.DecodeString(s); err == nil {
			return key, nil
		}
	}
	return nil, err
}

// TTL is how long the URLs of URL are valid.
func (s *Signer) TTL() time.Duration { return s.ttl }

// URL returns the signed path and query of owner's file id's content,
// valid from now for the Signer's TTL (rounded up to the second), and
// when it expires.
func (s *Signer) URL(id uuid.UUID, owner string, now time.Time) (string, time.Time) {
	exp := now.Add(s.ttl + time.Second - 1).Truncate(time.Second)
	e := strconv.FormatInt(exp.Unix(), 10)
	q := url.Values{"exp": {e}, "sig": {s.sign(id, owner, e)}}
	return "/v1/files/" + id.String() + "/content?" + q.Encode(), exp
}

// sign is the signature of id, owner and exp: the HMAC-SHA256 of the
// three, unambiguous as the id has a fixed length, exp only digits and the
// owner comes last.
func (s *Signer) sign(id uuid.UUID, owner, exp string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("convo file url v1\n" + id.String() + "\n" + exp + "\n" + owner))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ErrSignatureMismatch is Verify's error for a signature of something
// else: another file, owner or expiry, or another key.
var ErrSignatureMismatch = &SignatureError{Field: "sig", Reason: "does not match this file and expiry (tampered with, or signed with another key)"}

// SignatureError is why Verify refused a signed URL: Field is the query
// parameter at fault (exp or sig).
type SignatureError struct {
	Field  string
	Reason string
}

func (e *SignatureError) Error() string { return e.Field + ": " + e.Reason }

// Verify checks the exp and sig query parameters of a URL for owner's
// file id at now: the signature must be the Signer's for exactly these
// (compared in constant time) and exp must not have passed. Errors are
// *SignatureError: a malformed exp or sig, ErrSignatureMismatch, or an
// expired signature.
func (s *Signer) Verify(id uuid.UUID, owner, exp, sig string, now time.Time) error {
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || unix <= 0 || strconv.FormatInt(unix, 10) != exp {
		return &SignatureError{Field: "exp", Reason: "is not a time in Unix seconds"}
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return &SignatureError{Field: "sig", Reason: "is not a signature (base64url of 32 bytes)"}
	}
	want, _ := base64.RawURLEncoding.DecodeString(s.sign(id, owner, exp))
	if !hmac.Equal(got, want) {
		return ErrSignatureMismatch
	}
	if expires := time.Unix(unix, 0); !now.Before(expires) {
		return &SignatureError{Field: "exp", Reason: fmt.Sprintf("the URL expired at %s; ask for a fresh one (GET /v1/files/{id})", expires.UTC().Format(time.RFC3339))}
	}
	return nil
}
