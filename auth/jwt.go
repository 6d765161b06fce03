// Package auth verifies the bearer tokens that name a request's user: JWTs
// signed HS256 with a shared secret (CONVO_AUTH_SECRET), or RS256, ES256 or
// EdDSA with a key from an identity provider's JWKS (CONVO_AUTH_JWKS_URL).
// The token's sub claim is the user id. Parsing and signature checks are
// github.com/golang-jwt/jwt/v5's; the JWKS is fetched, cached by kid and
// refreshed by github.com/MicahParks/keyfunc/v3.
package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// Verifier checks a token and returns its subject (the user id).
type Verifier interface {
	Verify(ctx context.Context, token string) (subject string, err error)
}

// ErrInvalidToken is returned (wrapped, with the reason) for every token
// that must be refused: malformed, badly signed, signed with an algorithm
// or a key not accepted, expired, not yet valid, without an exp, of another
// issuer or audience, or without a usable subject.
var ErrInvalidToken = errors.New("invalid token")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, fmt.Sprintf(format, args...))
}

// leeway tolerates clock skew between the token's issuer and this server.
const leeway = 30 * time.Second

// maxSubject bounds the user id a token may carry.
const maxSubject = 200

// Option adds a check to a verifier.
type Option func(*settings)

type settings struct {
	issuer, audience string
	now              func() time.Time
}

// jwksRefetch bounds how often tokens naming a kid the JWKS lacks may make
// it be fetched again.
const jwksRefetch = 30 * time.Second

// jwksRefetchTimeout bounds a refetch for an unknown kid, the wait for it
// included.
const jwksRefetchTimeout = 5 * time.Second

// WithIssuer requires the iss claim to be issuer (CONVO_AUTH_ISSUER).
func WithIssuer(issuer string) Option { return func(s *settings) { s.issuer = issuer } }

// WithAudience requires the aud claim to hold audience (CONVO_AUTH_AUDIENCE).
func WithAudience(audience string) Option { return func(s *settings) { s.audience = audience } }

// withClock replaces time.Now (tests).
func withClock(now func() time.Time) Option { return func(s *settings) { s.now = now } }

// verifier checks tokens of the given algorithms with keys from key.
type verifier struct {
	parser *jwt.Parser
	key    jwt.Keyfunc
	// noKeys, when set, reports that no key could be had at all (the
	// JWKS is unreachable): the token is not to blame.
	noKeys func(ctx context.Context) bool
}

func newVerifier(methods []string, key jwt.Keyfunc, opts []Option) (*verifier, *settings) {
	s := &settings{now: time.Now}
	for _, o := range opts {
		o(s)
	}
	parserOpts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return s.now() }),
	}
	if s.issuer != "" {
		parserOpts = append(parserOpts, jwt.WithIssuer(s.issuer))
	}
	if s.audience != "" {
		parserOpts = append(parserOpts, jwt.WithAudience(s.audience))
	}
	return &verifier{parser: jwt.NewParser(parserOpts...), key: key}, s
}

// maxToken bounds a token's length: far above what an identity provider
// issues, far below what would cost anything to refuse.
const maxToken = 8 << 10

// registeredClaims are the claims of RFC 7519 §4.1, which the JWT library
// reads into jwt.RegisteredClaims.
var registeredClaims = []string{"exp", "nbf", "iat", "iss", "aud", "sub", "jti"}

// checkStrict refuses what the JWT library lets through: a token longer
// than maxToken, a "crit" header (RFC 7515 §4.1.11: a recipient that does
// not understand a listed extension must refuse the token, and convo
// understands none), time claims that are not JSON numbers (RFC 7519
// §4.1.4: NumericDate; the library also takes a numeric string), and
// claims whose names differ from a registered claim's only in case (see
// checkClaimNames).
func checkStrict(token string) error {
	if len(token) > maxToken {
		return invalid("token is longer than %d bytes", maxToken)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil // the parser says how it is malformed
	}
	var header, claims map[string]json.RawMessage
	if decodeSegment(parts[0], &header) != nil || decodeSegment(parts[1], &claims) != nil {
		return nil // likewise
	}
	if _, ok := header["crit"]; ok {
		return invalid("crit header: no extension is understood, so the token is refused (RFC 7515)")
	}
	if err := checkClaimNames(claims); err != nil {
		return err
	}
	for _, name := range []string{"exp", "nbf", "iat"} {
		raw, ok := claims[name]
		if !ok {
			continue
		}
		if b := bytes.TrimSpace(raw); len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
			return invalid("%s claim must be a number (seconds since 1970), got %s", name, b)
		}
	}
	return nil
}

// checkClaimNames refuses a claim named like a registered claim but for
// case ("EXP", "Sub", or "ſub" with U+017F, which folds to s). Claim names
// are case-sensitive (RFC 7519 §4), while the library decodes claims with
// encoding/json, which matches names case-insensitively: it would read
// "EXP" as the expiry when there is no "exp" (passing none of the checks
// above), and the later of "exp" and "EXP" when there are both. claims
// holds the names exactly as sent (a map is decoded exactly).
func checkClaimNames(claims map[string]json.RawMessage) error {
	names := make([]string, 0, len(claims))
	for name := range claims {
		names = append(names, name)
	}
	slices.Sort(names) // the same token, the same refusal
	for _, name := range names {
		for _, r := range registeredClaims {
			if name != r && strings.EqualFold(name, r) {
				return invalid("claim %q is not the registered claim %q: claim names are case-sensitive (RFC 7519), and a case variant of a registered one is refused", name, r)
			}
		}
	}
	return nil
}

// decodeSegment decodes a base64url JSON object of a token.
func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Verify implements Verifier.
func (v *verifier) Verify(ctx context.Context, token string) (string, error) {
	if err := checkStrict(token); err != nil {
		return "", err
	}
	var claims jwt.RegisteredClaims
	if _, err := v.parser.ParseWithClaims(token, &claims, v.key); err != nil {
		if v.noKeys != nil && errors.Is(err, jwt.ErrTokenUnverifiable) && v.noKeys(ctx) {
			return "", fmt.Errorf("no signing key available from the JWKS: %w", err)
		}
		return "", invalid("%v", err)
	}
	return subject(claims.Subject)
}

// subject checks the user id a valid token names.
func subject(sub string) (string, error) {
	switch {
	case sub == "":
		return "", invalid("sub claim is required")
	case len(sub) > maxSubject:
		return "", invalid("sub claim is longer than %d bytes", maxSubject)
	case strings.IndexFunc(sub, unicode.IsControl) >= 0:
		return "", invalid("sub claim holds a control character")
	}
	return sub, nil
}

// NewHS256 returns a verifier of tokens signed HMAC-SHA256 with secret.
// Only HS256 is accepted: "none", RS256 and every other algorithm are
// refused, so a token cannot choose how it is checked.
func NewHS256(secret string, opts ...Option) Verifier {
	key := []byte(secret)
	v, _ := newVerifier([]string{"HS256"}, func(*jwt.Token) (any, error) { return key, nil }, opts)
	return v
}

// jwksMethods are the algorithms accepted from a JWKS: RSA, ECDSA and
// Ed25519 signatures, never HMAC (a public key is not a secret).
var jwksMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// NewJWKS returns a verifier of tokens signed with a key of the JWK Set at
// url, with an algorithm in jwksMethods. The set is fetched at once (a
// failure is only logged: it is fetched again when a token needs it),
// refreshed every hour until ctx ends, and fetched again when a token names
// a kid the set lacks, at most once per 30 s however many such tokens come.
// A token refused because no key could be fetched at all yields an error
// that is not ErrInvalidToken (the server answers Unavailable).
func NewJWKS(ctx context.Context, url string, opts ...Option) (Verifier, error) {
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{url}, keyfunc.Override{
		RefreshUnknownKID: rate.NewLimiter(rate.Every(jwksRefetch), 1),
		// jwkset bounds both the wait for the limiter and the refetch
		// itself with this: it must leave time for the HTTP request (a
		// millisecond failed every refetch from a real provider). A token
		// whose kid is unknown while the next allowed fetch is further
		// away than this is still refused at once: the limiter's Wait
		// gives up without waiting when its deadline comes first.
		RateLimitWaitMax: jwksRefetchTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", url, err)
	}
	v, _ := newVerifier(jwksMethods, kf.KeyfuncCtx(ctx), opts)
	v.noKeys = func(ctx context.Context) bool {
		keys, err := kf.Storage().KeyReadAll(ctx)
		return err != nil || len(keys) == 0
	}
	return v, nil
}
