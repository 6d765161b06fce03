package auth

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"sync"
	"time"
)

// JWKS verifies RS256 tokens with the public keys an identity provider
// publishes as a JSON Web Key Set. Keys are fetched on first use and again
// when a token names a key id not yet known (at most once per
// minRefresh), so key rotation needs no restart.
type JWKS struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu          sync.Mutex
	keys        map[string]*rsa.PublicKey
	lastFetched time.Time
}

const minRefresh = 30 * time.Second

// NewJWKS returns a verifier that reads keys from url with client (nil:
// a client with a 10 s timeout).
func NewJWKS(url string, client *http.Client) *JWKS {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &JWKS{url: url, client: client, now: time.Now}
}

// Verify implements Verifier. Only alg RS256 is accepted.
func (v *JWKS) Verify(ctx context.Context, token string) (string, error) {
	p, err := parse(token)
	if err != nil {
		return "", err
	}
	if p.header.Alg != "RS256" {
		return "", invalid("algorithm %q is not accepted (want RS256)", p.header.Alg)
	}
	key, err := v.key(ctx, p.header.Kid)
	if err != nil {
		return "", err
	}
	if err := verifyRS256(p, key); err != nil {
		return "", err
	}
	return p.claims.check(v.now())
}

func (v *JWKS) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.lookup(kid); ok {
		return k, nil
	}
	if v.keys != nil && v.now().Sub(v.lastFetched) < minRefresh {
		return nil, invalid("unknown key id %q", kid)
	}
	keys, err := v.fetch(ctx)
	v.lastFetched = v.now()
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", v.url, err)
	}
	v.keys = keys
	if k, ok := v.lookup(kid); ok {
		return k, nil
	}
	return nil, invalid("unknown key id %q", kid)
}

// lookup finds the key for kid; a token without kid may use the set's only
// key.
func (v *JWKS) lookup(kid string) (*rsa.PublicKey, bool) {
	if kid == "" && len(v.keys) == 1 {
		for _, k := range v.keys {
			return k, true
		}
	}
	k, ok := v.keys[kid]
	return k, ok
}

func (v *JWKS) fetch(ctx context.Context) (map[string]*rsa.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&set); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	keys := make(map[string]*rsa.PublicKey)
	for _, k := range set.Keys {
		if k.Kty != "RSA" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		n, errN := base64.RawURLEncoding.DecodeString(k.N)
		e, errE := base64.RawURLEncoding.DecodeString(k.E)
		if errN != nil || errE != nil || len(e) > 4 {
			continue
		}
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	return keys, nil
}
