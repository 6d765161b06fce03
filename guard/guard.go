// Package guard is the HTTP middleware in front of every public route. It
// refuses requests addressed to a host the server does not serve (a DNS
// rebinding page reaches the server under its own name), refuses
// cross-site requests while the server trusts whoever reaches it
// (single-user mode), and sets Strict-Transport-Security on responses
// served over TLS.
package guard

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Options configures Handler.
type Options struct {
	// CheckHost refuses requests whose Host is neither a loopback name
	// (localhost, *.localhost, 127.0.0.0/8, ::1, any port) nor one of
	// AllowedHosts, with 403.
	CheckHost bool
	// AllowedHosts are host names (or IP addresses) served besides the
	// loopback names, without a port, lowercase; "*.example.com" matches
	// every subdomain of example.com.
	AllowedHosts []string
	// RefuseCrossSite refuses, with 403, requests a page of another site
	// makes: Sec-Fetch-Site cross-site (except the navigation of a tab to
	// the app), or an Origin that is neither the request's own host nor
	// one OriginAllowed accepts.
	RefuseCrossSite bool
	// OriginAllowed reports whether the CORS policy accepts the request's
	// Origin; nil accepts none.
	OriginAllowed func(*http.Request) bool
	// ExemptPaths are served without the host and cross-site checks (a
	// load balancer's health check names the server by its address).
	ExemptPaths []string
}

// hstsValue keeps browsers on HTTPS for a year once they saw the site over
// it. Subdomains are left out: they may be other services.
const hstsValue = "max-age=31536000"

// Handler wraps next in the checks of opts.
func Handler(opts Options, next http.Handler) http.Handler {
	exempt := make(map[string]bool, len(opts.ExemptPaths))
	for _, p := range opts.ExemptPaths {
		exempt[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Browsers ignore the header over plain HTTP, so a forged
		// X-Forwarded-Proto achieves nothing; behind a TLS-terminating
		// proxy it is how the server learns that the page came over TLS.
		if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
			w.Header().Set("Strict-Transport-Security", hstsValue)
		}
		if !exempt[r.URL.Path] {
			if opts.CheckHost && !hostAllowed(r.Host, opts.AllowedHosts) {
				refuse(w, "host "+quote(r.Host)+" is not served here: this server answers to loopback names (localhost, 127.0.0.1, [::1]) and the hosts in CONVO_ALLOWED_HOSTS")
				return
			}
			if opts.RefuseCrossSite {
				if why := crossSite(r, opts.OriginAllowed); why != "" {
					refuse(w, why)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// crossSite says why r comes from a page of another site, or "".
func crossSite(r *http.Request, originAllowed func(*http.Request) bool) string {
	origin := r.Header.Get("Origin")
	allowed := origin != "" && originAllowed != nil && originAllowed(r)
	if origin != "" && !allowed && !sameOrigin(origin, r.Host) {
		return "cross-origin request refused: origin " + quote(origin) + " is not allowed (CONVO_CORS_ORIGINS) and this server has no authentication"
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" && !allowed {
		// Following a link to the app is fine: a navigation carries no
		// script of the other site, and only reads the page.
		if r.Header.Get("Sec-Fetch-Mode") == "navigate" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			return ""
		}
		return "cross-site request refused: this server has no authentication, so only its own pages (and the origins in CONVO_CORS_ORIGINS) may call it"
	}
	return ""
}

// sameOrigin reports whether origin (scheme://host[:port]) names host, the
// request's Host header, with the same port. The scheme is not compared: a
// TLS-terminating proxy in front sees https origins on plain HTTP.
func sameOrigin(origin, host string) bool {
	_, rest, ok := strings.Cut(origin, "://")
	return ok && strings.EqualFold(rest, host)
}

// hostAllowed reports whether the Host header names a loopback host or one
// of allowed.
func hostAllowed(hostport string, allowed []string) bool {
	host := strings.ToLower(hostport)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(host, "]"), "["), ".")
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return true
	}
	for _, a := range allowed {
		if a == host || (strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:])) {
			return true
		}
	}
	return false
}

// refuse answers 403 with the JSON error body of the HTTP API.
func refuse(w http.ResponseWriter, message string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{"permission_denied", message})
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// ParseHosts reads a comma-separated list of host names for AllowedHosts:
// lowercased, without ports; "*.example.com" for every subdomain.
func ParseHosts(s string) ([]string, error) {
	var hosts []string
	for _, h := range strings.Split(s, ",") {
		h = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(h), "."))
		if h == "" {
			continue
		}
		name := strings.TrimPrefix(h, "*.")
		if strings.ContainsAny(name, "/:*@ ") && !isIPv6(name) {
			return nil, &hostError{h}
		}
		hosts = append(hosts, strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	}
	return hosts, nil
}

func isIPv6(s string) bool {
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return err == nil && ip.Is6()
}

type hostError struct{ host string }

func (e *hostError) Error() string {
	return quote(e.host) + " is not a host name such as convo.example.com or *.example.com (no scheme, no port)"
}
