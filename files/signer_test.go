package files_test

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/files"
)

func newSigner(t *testing.T, key string, ttl time.Duration) *files.Signer {
	t.Helper()
	s, err := files.NewSigner([]byte(key), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signedQuery splits a URL of Signer.URL into its path, exp and sig.
func signedQuery(t *testing.T, u string) (path, exp, sig string) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := parsed.Query()
	return parsed.Path, q.Get("exp"), q.Get("sig")
}

// TestSignerAcceptsOnlyItsOwnUnexpiredSignature checks that a URL verifies
// for its file until it expires, and that a change to any part of it (the
// file, exp, sig, the key) or its expiry is refused,
// naming the parameter at fault.
func TestSignerAcceptsOnlyItsOwnUnexpiredSignature(t *testing.T) {
	t.Parallel()
	const key = "0123456789abcdef0123456789abcdef"
	s := newSigner(t, key, 10*time.Minute)
	id := uuid.New()
	now := time.Unix(1_700_000_000, 500_000_000)
	u, expires := s.URL(id, now)
	path, exp, sig := signedQuery(t, u)
	if path != "/v1/files/"+id.String()+"/content" {
		t.Fatalf("path = %q", path)
	}
	if want := now.Add(10*time.Minute + time.Second).Truncate(time.Second); !expires.Equal(want) || exp != strconv.FormatInt(want.Unix(), 10) {
		t.Fatalf("expires %v, exp %q; want %v", expires, exp, want)
	}
	if err := s.Verify(id, exp, sig, now); err != nil {
		t.Fatalf("own URL refused: %v", err)
	}
	if err := s.Verify(id, exp, sig, expires.Add(-time.Millisecond)); err != nil {
		t.Fatalf("refused just before it expires: %v", err)
	}
	otherKey := newSigner(t, strings.ToUpper(key), 10*time.Minute)
	laterExp := strconv.FormatInt(expires.Unix()+3600, 10)
	flipped := []byte(sig)
	flipped[3] ^= 1
	for _, c := range []struct {
		name         string
		verify       func() error
		field, cause string
	}{
		{"another file", func() error { return s.Verify(uuid.New(), exp, sig, now) }, "sig", "does not match"},
		{"a later exp", func() error { return s.Verify(id, laterExp, sig, now) }, "sig", "does not match"},
		{"a changed sig", func() error { return s.Verify(id, exp, string(flipped), now) }, "sig", ""},
		{"another key", func() error { return otherKey.Verify(id, exp, sig, now) }, "sig", "does not match"},
		{"no sig", func() error { return s.Verify(id, exp, "", now) }, "sig", "is not a signature"},
		{"exp not a number", func() error { return s.Verify(id, "soon", sig, now) }, "exp", "Unix seconds"},
		{"exp with a sign", func() error { return s.Verify(id, "+"+exp, sig, now) }, "exp", "Unix seconds"},
		{"expired", func() error { return s.Verify(id, exp, sig, expires) }, "exp", "expired"},
	} {
		var se *files.SignatureError
		err := c.verify()
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(se.Reason, c.cause) {
			t.Errorf("%s: %v; want a SignatureError on %s saying %q", c.name, err, c.field, c.cause)
		}
	}
}

// TestParseURLKey checks the encodings CONVO_FILE_URL_KEY takes and that
// a short or undecodable key is refused.
func TestParseURLKey(t *testing.T) {
	t.Parallel()
	raw := []byte("0123456789abcdef0123456789abcdef")
	if _, err := files.ParseURLKey("not a key at all, neither hex nor base64!"); err == nil || !strings.Contains(err.Error(), "neither hex nor base64") {
		t.Errorf("undecodable key: %v", err)
	}
	for _, in := range []string{
		"3031323334353637383961626364656630313233343536373839616263646566",
		"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY",
	} {
		key, err := files.ParseURLKey(in)
		if err != nil || string(key) != string(raw) {
			t.Errorf("%q: %q, %v", in, key, err)
		}
	}
	if _, err := files.ParseURLKey("00112233"); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a 4-byte key: %v; want refused for its length", err)
	}
	if _, err := files.NewSigner(raw[:31], 0); err == nil {
		t.Error("NewSigner took a 31-byte key")
	}
	if s := newSigner(t, string(raw), 0); s.TTL() != files.DefaultURLTTL {
		t.Errorf("default TTL = %v", s.TTL())
	}
}
