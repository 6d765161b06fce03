package guard

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("served")) }) //nolint:errcheck

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// requireRefused asserts a 403 JSON error whose message names what.
func requireRefused(t *testing.T, w *httptest.ResponseRecorder, what string) {
	t.Helper()
	var body struct{ Code, Message string }
	if w.Code != http.StatusForbidden || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Code != "permission_denied" {
		t.Fatalf("got %d %s; want 403 permission_denied", w.Code, w.Body)
	}
	if !strings.Contains(body.Message, what) {
		t.Errorf("message %q does not name %q", body.Message, what)
	}
}

func TestHost(t *testing.T) {
	t.Parallel()
	h := Handler(Options{CheckHost: true, AllowedHosts: []string{"convo.example.com", "*.corp.example"}, ExemptPaths: []string{"/healthz"}}, ok)
	for _, host := range []string{
		"localhost", "localhost:8080", "LOCALHOST:1", "app.localhost:5173", "127.0.0.1", "127.0.0.1:8080", "127.1.2.3:9",
		"[::1]", "[::1]:8080", "convo.example.com", "Convo.Example.Com:443", "a.corp.example", "b.a.corp.example:8443", "localhost.",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = host
		if w := serve(h, r); w.Code != http.StatusOK {
			t.Errorf("Host %q refused: %d %s", host, w.Code, w.Body)
		}
	}
	for _, host := range []string{
		"", "evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io", "192.168.1.5:8080",
		"[::2]:8080", "corp.example", "convo.example.com.evil.example", "0.0.0.0:8080",
	} {
		r := httptest.NewRequest(http.MethodPost, "/convo.v1.ConversationService/SendMessage", nil)
		r.Host = host
		requireRefused(t, serve(h, r), "is not served here")
	}
	// The health check is served whatever the Host.
	r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	r.Host = "10.0.0.7:8080"
	if w := serve(h, r); w.Code != http.StatusOK {
		t.Errorf("/healthz by address refused: %d", w.Code)
	}
	// Off, every host is served.
	r = httptest.NewRequest(http.MethodGet, "/", nil)
	r.Host = "evil.example"
	if w := serve(Handler(Options{}, ok), r); w.Code != http.StatusOK {
		t.Errorf("CheckHost off refused %d", w.Code)
	}
}

func TestCrossSite(t *testing.T) {
	t.Parallel()
	allowed := func(r *http.Request) bool { return r.Header.Get("Origin") == "https://app.example" }
	h := Handler(Options{RefuseCrossSite: true, OriginAllowed: allowed}, ok)
	req := func(method, origin, site, mode string) *http.Request {
		r := httptest.NewRequest(method, "/v1/agui", nil)
		r.Host = "localhost:8080"
		for k, v := range map[string]string{"Origin": origin, "Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		return r
	}
	for name, r := range map[string]*http.Request{
		"NoBrowserHeaders":       req(http.MethodPost, "", "", ""),
		"SameOrigin":             req(http.MethodPost, "http://localhost:8080", "same-origin", "cors"),
		"SameOriginOverTLSProxy": req(http.MethodPost, "https://localhost:8080", "same-origin", "cors"),
		"AllowedByCORS":          req(http.MethodPost, "https://app.example", "cross-site", "cors"),
		"NavigationFromALink":    req(http.MethodGet, "", "cross-site", "navigate"),
		"TypedURL":               req(http.MethodGet, "", "none", "navigate"),
	} {
		if w := serve(h, r); w.Code != http.StatusOK {
			t.Errorf("%s refused: %d %s", name, w.Code, w.Body)
		}
	}
	for name, c := range map[string]struct {
		r    *http.Request
		what string
	}{
		"OtherOrigin":             {req(http.MethodPost, "https://evil.example", "cross-site", "no-cors"), "origin \"https://evil.example\" is not allowed"},
		"OtherPortSameSite":       {req(http.MethodPost, "http://localhost:5173", "same-site", "cors"), "is not allowed"},
		"NullOrigin":              {req(http.MethodPost, "null", "cross-site", "no-cors"), "is not allowed"},
		"CrossSiteWithoutOrigin":  {req(http.MethodGet, "", "cross-site", "no-cors"), "cross-site request refused"},
		"CrossSiteFormNavigation": {req(http.MethodPost, "", "cross-site", "navigate"), "cross-site request refused"},
	} {
		t.Run(name, func(t *testing.T) { requireRefused(t, serve(h, c.r), c.what) })
	}
}

func TestHSTS(t *testing.T) {
	t.Parallel()
	h := Handler(Options{}, ok)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if got := serve(h, r).Header().Get("Strict-Transport-Security"); got != "" {
		t.Errorf("HSTS over plain HTTP: %q", got)
	}
	r.TLS = &tls.ConnectionState{}
	if got := serve(h, r).Header().Get("Strict-Transport-Security"); got != hstsValue {
		t.Errorf("HSTS over TLS = %q", got)
	}
	r = httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Forwarded-Proto", "https")
	if got := serve(h, r).Header().Get("Strict-Transport-Security"); got != hstsValue {
		t.Errorf("HSTS behind a TLS proxy = %q", got)
	}
}

func TestParseHosts(t *testing.T) {
	t.Parallel()
	hosts, err := ParseHosts(" Convo.Example.com, *.corp.example ,, 10.0.0.5, [fd00::1] ")
	if err != nil || strings.Join(hosts, " ") != "convo.example.com *.corp.example 10.0.0.5 fd00::1" {
		t.Errorf("ParseHosts = %q, %v", hosts, err)
	}
	for _, bad := range []string{"https://convo.example.com", "convo.example.com:8080", "a*b.example", "user@host"} {
		if _, err := ParseHosts(bad); err == nil {
			t.Errorf("ParseHosts(%q) accepted", bad)
		}
	}
}
