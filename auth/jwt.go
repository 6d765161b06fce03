// Package auth verifies the bearer tokens that name a request's user: JWTs
// signed HS256 with a shared secret (CONVO_AUTH_SECRET) or RS256 with a key
// from an identity provider's JWKS (CONVO_AUTH_JWKS_URL). The token's sub
// claim is the user id.
package auth

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Verifier checks a token and returns its subject (the user id).
type Verifier interface {
	Verify(ctx context.Context, token string) (subject string, err error)
}

// ErrInvalidToken is returned (wrapped, with the reason) for every token
// that must be refused: malformed, badly signed, wrong algorithm, expired,
// not yet valid, or without a subject.
var ErrInvalidToken = errors.New("invalid token")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, fmt.Sprintf(format, args...))
}

// leeway tolerates clock skew between the token's issuer and this server.
const leeway = 30 * time.Second

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

type claims struct {
	Sub string   `json:"sub"`
	Exp *float64 `json:"exp"`
	Nbf *float64 `json:"nbf"`
}

// parsed is a JWT split into its parts, with the signature checked by the
// caller.
type parsed struct {
	header       header
	claims       claims
	signingInput []byte
	signature    []byte
}

func parse(token string) (parsed, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return parsed{}, invalid("not a JWT (want three dot-separated parts)")
	}
	var p parsed
	if err := decodeSegment(parts[0], &p.header); err != nil {
		return parsed{}, invalid("header: %v", err)
	}
	if err := decodeSegment(parts[1], &p.claims); err != nil {
		return parsed{}, invalid("claims: %v", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return parsed{}, invalid("signature is not base64url")
	}
	p.signingInput = []byte(parts[0] + "." + parts[1])
	p.signature = sig
	return p, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return errors.New("not base64url")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.New("not a JSON object")
	}
	return nil
}

// checkClaims validates the time claims and returns the subject. exp is
// required: a token that never expires is refused.
func (c claims) check(now time.Time) (string, error) {
	if c.Exp == nil {
		return "", invalid("exp claim is required")
	}
	if now.After(time.Unix(int64(*c.Exp), 0).Add(leeway)) {
		return "", invalid("token expired")
	}
	if c.Nbf != nil && now.Add(leeway).Before(time.Unix(int64(*c.Nbf), 0)) {
		return "", invalid("token not valid yet")
	}
	if c.Sub == "" {
		return "", invalid("sub claim is required")
	}
	if len(c.Sub) > 200 {
		return "", invalid("sub claim is too long")
	}
	return c.Sub, nil
}

// HS256 verifies tokens signed with HMAC-SHA256 and a shared secret.
type HS256 struct {
	secret []byte
	now    func() time.Time
}

// NewHS256 returns a verifier for tokens signed with secret.
func NewHS256(secret string) *HS256 { return &HS256{secret: []byte(secret), now: time.Now} }

// Verify implements Verifier. Only alg HS256 is accepted: "none", RS256
// and everything else are refused, so a token cannot choose how it is
// checked.
func (v *HS256) Verify(_ context.Context, token string) (string, error) {
	p, err := parse(token)
	if err != nil {
		return "", err
	}
	if p.header.Alg != "HS256" {
		return "", invalid("algorithm %q is not accepted (want HS256)", p.header.Alg)
	}
	mac := hmac.New(sha256.New, v.secret)
	mac.Write(p.signingInput)
	if !hmac.Equal(mac.Sum(nil), p.signature) {
		return "", invalid("bad signature")
	}
	return p.claims.check(v.now())
}

// verifyRS256 checks an RS256 signature with key.
func verifyRS256(p parsed, key *rsa.PublicKey) error {
	sum := sha256.Sum256(p.signingInput)
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], p.signature); err != nil {
		return invalid("bad signature")
	}
	return nil
}
