package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signHeader signs claims HS256 with one more header field.
func signHeader(t *testing.T, key []byte, claims jwt.MapClaims, name string, value any) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header[name] = value
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func valid(sub string) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for kk, vv := range c {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func expectInvalid(t *testing.T, v Verifier, name, token, reason string) {
	t.Helper()
	_, err := v.Verify(context.Background(), token)
	if !errors.Is(err, ErrInvalidToken) {
		t.Errorf("%s: err = %v, want ErrInvalidToken", name, err)
		return
	}
	if reason != "" && !strings.Contains(err.Error(), reason) {
		t.Errorf("%s: err = %v, want it to say %q", name, err, reason)
	}
}

func TestHS256(t *testing.T) {
	t.Parallel()
	secret := "a-secret-of-at-least-32-bytes-long!!"
	v := NewHS256(secret, WithIssuer("https://id.example"), WithAudience("convo"))
	ok := with(with(valid("alice"), "iss", "https://id.example"), "aud", "convo")
	if sub, err := v.Verify(context.Background(), sign(t, jwt.SigningMethodHS256, []byte(secret), "", ok)); err != nil || sub != "alice" {
		t.Fatalf("valid token: %q, %v", sub, err)
	}
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, ok).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for name, c := range map[string]struct{ token, reason string }{
		"AlgNone":       {none, "signing method"},
		"RS256":         {sign(t, jwt.SigningMethodRS256, rsaKey, "", ok), "signing method"},
		"WrongSecret":   {sign(t, jwt.SigningMethodHS256, []byte("another secret of 32 bytes long!!!"), "", ok), "signature"},
		"NoExp":         {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "exp", nil)), "exp"},
		"Expired":       {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "exp", time.Now().Add(-time.Hour).Unix())), "expired"},
		"NotYetValid":   {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "nbf", time.Now().Add(time.Hour).Unix())), "not valid yet"},
		"WrongIssuer":   {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "iss", "https://evil.example")), "iss"},
		"WrongAudience": {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "aud", "other")), "aud"},
		"NoSubject":     {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "sub", nil)), "sub claim is required"},
		"NULInSubject":  {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "sub", "ali\x00ce")), "control character"},
		"NewlineInSub":  {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "sub", "alice\nbob")), "control character"},
		"LongSubject":   {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "sub", strings.Repeat("x", 201))), "longer than 200"},
		"NotAJWT":       {"not-a-jwt", "malformed"},
		"ExpAsString":   {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "exp", fmt.Sprint(time.Now().Add(time.Hour).Unix()))), "exp claim must be a number"},
		"NbfAsString":   {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "nbf", "0")), "nbf claim must be a number"},
		"UnknownCrit":   {signHeader(t, []byte(secret), ok, "crit", []string{"exp"}), "crit header"},
		"TooLong":       {sign(t, jwt.SigningMethodHS256, []byte(secret), "", with(ok, "pad", strings.Repeat("x", 40<<10))), "longer than 8192 bytes"},
	} {
		expectInvalid(t, v, name, c.token, c.reason)
	}
}

// jwksServer serves a JWK Set whose keys the test can change, counting
// fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	keys    []map[string]any
	fetches atomic.Int64
	// delay is how long each answer takes (nanoseconds).
	delay atomic.Int64
}

func newJWKSServer(t *testing.T) *jwksServer {
	s := &jwksServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		time.Sleep(time.Duration(s.delay.Load()))
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": s.keys}) //nolint:errcheck
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) add(jwk map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, jwk)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PrivateKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PrivateKey) map[string]any {
	pub, _ := k.PublicKey.ECDH()
	raw := pub.Bytes() // 0x04 || X || Y
	return map[string]any{"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:])}
}

func edJWK(kid string, k ed25519.PrivateKey) map[string]any {
	return map[string]any{"kty": "OKP", "kid": kid, "use": "sig", "alg": "EdDSA", "crv": "Ed25519", "x": b64(k.Public().(ed25519.PublicKey))}
}

// TestJWKS checks tokens signed with keys of an identity provider's JWK
// Set: RS256, ES256 and EdDSA accepted; HMAC and unknown keys refused; a
// new key published by the provider accepted after one refetch; a flood of
// tokens naming unknown kids costs a bounded number of fetches; and an
// unreachable JWKS is not the token's fault.
func TestJWKS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newJWKSServer(t)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	srv.add(rsaJWK("rsa", rsaKey))
	srv.add(ecJWK("ec", ecKey))
	srv.add(edJWK("ed", edKey))
	v, err := NewJWKS(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for name, token := range map[string]string{
		"RS256": sign(t, jwt.SigningMethodRS256, rsaKey, "rsa", valid("carol")),
		"ES256": sign(t, jwt.SigningMethodES256, ecKey, "ec", valid("carol")),
		"EdDSA": sign(t, jwt.SigningMethodEdDSA, edKey, "ed", valid("carol")),
	} {
		if sub, err := v.Verify(ctx, token); err != nil || sub != "carol" {
			t.Errorf("%s: %q, %v", name, sub, err)
		}
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	expectInvalid(t, v, "SignedByAnotherKey", sign(t, jwt.SigningMethodRS256, other, "rsa", valid("carol")), "")
	expectInvalid(t, v, "HS256", sign(t, jwt.SigningMethodHS256, []byte("a public key is not a secret......"), "rsa", valid("carol")), "signing method")
	expectInvalid(t, v, "NoExp", sign(t, jwt.SigningMethodRS256, rsaKey, "rsa", with(valid("carol"), "exp", nil)), "exp")

	// Rotation: the provider publishes a new key; a token signed with it
	// is accepted at once (one refetch), even from a provider that takes
	// its time to answer, as real ones do.
	rotated, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srv.add(ecJWK("ec-2", rotated))
	srv.delay.Store(int64(200 * time.Millisecond))
	if sub, err := v.Verify(ctx, sign(t, jwt.SigningMethodES256, rotated, "ec-2", valid("dave"))); err != nil || sub != "dave" {
		t.Fatalf("token signed with a rotated-in key: %q, %v", sub, err)
	}

	// A flood of unknown kids: refused, at most one fetch per 30 s.
	srv.delay.Store(0)
	before := srv.fetches.Load()
	for i := range 50 {
		kid := "unknown-" + string(rune('a'+i%26)) + time.Now().Format("150405.000000000")
		expectInvalid(t, v, "UnknownKid", sign(t, jwt.SigningMethodRS256, rsaKey, kid, valid("eve")), "")
	}
	if n := srv.fetches.Load() - before; n > 1 {
		t.Errorf("50 tokens with unknown kids fetched the JWKS %d times, want at most 1", n)
	}

	// An unreachable JWKS: the server cannot verify anything, and says so
	// rather than calling the token invalid.
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	dv, err := NewJWKS(t.Context(), down.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dv.Verify(ctx, sign(t, jwt.SigningMethodRS256, rsaKey, "rsa", valid("carol")))
	if err == nil || errors.Is(err, ErrInvalidToken) {
		t.Errorf("with the JWKS unreachable: err = %v, want an error that is not ErrInvalidToken", err)
	}
}

// TestClaimCaseVariants signs, with HS256 and through a JWKS, tokens that
// name a registered claim but for case, which the JWT library would read
// as the claim (encoding/json matches names case-insensitively): a
// string expiry under "EXP" and no "exp", a past "exp" beside a future
// "EXP", a subject under "SUB" or "ſub" (U+017F folds to s), an issuer
// and an audience under "ISS" and "Aud". Each is refused naming the
// claim; an ordinary token, and one with unregistered claims of any
// case, still pass.
func TestClaimCaseVariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret := "a-secret-of-at-least-32-bytes-long!!"
	hs := NewHS256(secret)
	srv := newJWKSServer(t)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	srv.add(rsaJWK("rsa", rsaKey))
	jwks, err := NewJWKS(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	type signer func(jwt.MapClaims) string
	verifiers := map[string]struct {
		v    Verifier
		sign signer
	}{
		"HS256": {hs, func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, []byte(secret), "", c) }},
		"JWKS":  {jwks, func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodRS256, rsaKey, "rsa", c) }},
	}
	future, past := time.Now().Add(time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
	for vname, vs := range verifiers {
		for name, c := range map[string]struct {
			claims jwt.MapClaims
			reason string
		}{
			"StringEXPNoExp":   {jwt.MapClaims{"sub": "alice", "EXP": fmt.Sprint(future)}, `claim "EXP" is not the registered claim "exp"`},
			"PastExpFutureEXP": {jwt.MapClaims{"sub": "alice", "exp": past, "EXP": future}, `claim "EXP"`},
			"FutureExpPastExp": {jwt.MapClaims{"sub": "alice", "exp": future, "Exp": past}, `claim "Exp"`},
			"NbfVariant":       {with(valid("alice"), "NBF", future), `claim "NBF"`},
			"SubVariant":       {with(valid("alice"), "SUB", "bob"), `claim "SUB"`},
			"SubOnlyVariant":   {with(with(valid("alice"), "sub", nil), "Sub", "bob"), `claim "Sub"`},
			"SubLongS":         {with(with(valid("alice"), "sub", nil), "\u017fub", "bob"), `is not the registered claim "sub"`},
			"IssVariant":       {with(valid("alice"), "ISS", "https://id.example"), `claim "ISS"`},
			"AudVariant":       {with(valid("alice"), "Aud", "convo"), `claim "Aud"`},
			"IatVariant":       {with(valid("alice"), "IAT", "0"), `claim "IAT"`},
			"JtiVariant":       {with(valid("alice"), "JTI", "x"), `claim "JTI"`},
		} {
			expectInvalid(t, vs.v, vname+"/"+name, vs.sign(c.claims), c.reason)
		}
		for name, claims := range map[string]jwt.MapClaims{
			"Ordinary":      valid("alice"),
			"AllRegistered": with(with(with(with(valid("alice"), "nbf", past), "iat", past), "jti", "t-1"), "aud", []string{"convo"}),
			"OtherClaims":   with(with(valid("alice"), "Email", "a@example.com"), "ROLE", "admin"),
		} {
			if sub, err := vs.v.Verify(ctx, vs.sign(claims)); err != nil || sub != "alice" {
				t.Errorf("%s/%s: %q, %v; want alice", vname, name, sub, err)
			}
		}
	}
}
