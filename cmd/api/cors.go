package main

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	connectcors "connectrpc.com/cors"
	"github.com/rs/cors"
)

// corsMaxAge is how long a browser may cache a preflight answer, in
// seconds: two hours, the most Chromium honours.
const corsMaxAge = 2 * 60 * 60

// parseCORSOrigins reads CONVO_CORS_ORIGINS: a comma-separated list of
// origins (scheme://host[:port], optionally with one leading "*." in the
// host for every subdomain), or "*" alone for any origin. Empty input
// means no CORS at all. The origins come back lowercased, without a
// trailing slash, as browsers send them.
func parseCORSOrigins(s string) ([]string, error) {
	var origins []string
	for _, o := range strings.Split(s, ",") {
		o = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(o), "/"))
		if o == "" {
			continue
		}
		if o != "*" {
			if err := checkOrigin(o); err != nil {
				return nil, fmt.Errorf("CONVO_CORS_ORIGINS: %w", err)
			}
		}
		origins = append(origins, o)
	}
	if len(origins) > 1 {
		for _, o := range origins {
			if o == "*" {
				return nil, fmt.Errorf("CONVO_CORS_ORIGINS: %q mixes * with origins: use * alone (any origin) or list the origins", s)
			}
		}
	}
	return origins, nil
}

// checkOrigin accepts what a browser sends in Origin: a scheme, a host and
// an optional port, nothing else.
func checkOrigin(o string) error {
	u, err := url.Parse(strings.Replace(o, "://*.", "://wildcard.", 1))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.Contains(u.Host, "*") {
		return fmt.Errorf("%q is not an origin such as https://app.example.com or http://localhost:5173", o)
	}
	return nil
}

// openAISDKHeaders are the headers OpenAI's JavaScript SDK sends from a
// browser (dangerouslyAllowBrowser) besides Authorization and
// Content-Type: its platform and retry headers, and the beta, organization
// and project headers when set. Without them a preflight for the
// Responses and Conversations routes fails.
var openAISDKHeaders = []string{
	"X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-OS", "X-Stainless-Arch",
	"X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Retry-Count", "X-Stainless-Timeout",
	"X-Stainless-Helper-Method", "X-Stainless-Poll-Helper", "X-Stainless-Custom-Poll-Interval",
	"OpenAI-Beta", "OpenAI-Organization", "OpenAI-Project",
}

// newCORS returns the CORS policy for origins, or nil for none (every
// cross-origin call is then blocked by the browser, as without CORS).
//
// The lists of headers come from connectrpc.com/cors, so the Connect,
// gRPC-Web and plain HTTP routes all work from another origin: requests
// may carry Authorization (bearer tokens), Last-Event-ID (SSE resume) and
// what OpenAI's SDK adds, DELETE is allowed (the OpenAI routes delete
// responses, conversations and items), and scripts may read the gRPC-Web status headers and Retry-After.
// Credentials (cookies) are never allowed: convo authenticates with the
// Authorization header, which needs none, and "*" would forbid them anyway.
func newCORS(origins []string) *cors.Cors {
	if len(origins) == 0 {
		return nil
	}
	return cors.New(cors.Options{
		AllowedOrigins:   origins,
		AllowedMethods:   append(connectcors.AllowedMethods(), http.MethodDelete),
		AllowedHeaders:   slices.Concat(connectcors.AllowedHeaders(), []string{"Authorization", "Last-Event-ID"}, openAISDKHeaders),
		ExposedHeaders:   append(connectcors.ExposedHeaders(), "Retry-After"),
		MaxAge:           corsMaxAge,
		AllowCredentials: false,
	})
}

// withCORS wraps h in the policy c; a nil policy leaves h as it is.
func withCORS(c *cors.Cors, h http.Handler) http.Handler {
	if c == nil {
		return h
	}
	return c.Handler(h)
}
