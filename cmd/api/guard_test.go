package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestSingleUserGuard checks the host, cross-site, content-type and method
// checks of a server without authentication, and what changes with it.
func TestSingleUserGuard(t *testing.T) {
	t.Parallel()
	do := func(t *testing.T, m *Main, method, path, host string, header map[string]string, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, m.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	const send = "/convo.v1.ConversationService/SendMessage"
	jsonHeader := map[string]string{"Content-Type": "application/json"}

	t.Run("SingleUser", func(t *testing.T) {
		t.Parallel()
		m := startMain(t, map[string]string{"CONVO_WORKERS": "0", "CONVO_CORS_ORIGINS": "http://app.example:5173",
			"CONVO_ALLOWED_HOSTS": "convo.lan"})
		for _, c := range []struct {
			name, method, path, host string
			header                   map[string]string
			status                   int
		}{
			{"LoopbackHost", "POST", send, "", jsonHeader, 200},
			{"LocalhostName", "POST", send, "localhost:8080", jsonHeader, 200},
			{"ConfiguredHost", "POST", send, "convo.lan:8080", jsonHeader, 200},
			{"RebindingHost", "POST", send, "evil.example:8080", jsonHeader, 403},
			{"RebindingHostReadsTheApp", "GET", "/", "evil.example", nil, 403},
			{"RebindingHostReadsHistory", "GET", "/v1/conversations/6f1c1f9e-6a39-4e5c-a7c1-1d6f4f0e2b11/history", "evil.example", nil, 403},
			{"HealthCheckByAddress", "GET", "/healthz", "10.1.2.3:8080", nil, 200},
			{"CrossSiteOrigin", "POST", send, "", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, 403},
			{"CrossSiteFetch", "POST", send, "", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403},
			{"CORSOrigin", "POST", send, "", map[string]string{"Content-Type": "application/json", "Origin": "http://app.example:5173", "Sec-Fetch-Site": "cross-site"}, 200},
			{"AGUITextPlain", "POST", "/v1/agui", "", map[string]string{"Content-Type": "text/plain"}, 415},
			{"ConnectTextPlain", "POST", send, "", map[string]string{"Content-Type": "text/plain"}, 415},
			{"AGUIGet", "GET", "/v1/agui", "", nil, 405},
		} {
			t.Run(c.name, func(t *testing.T) {
				body := `{"text":"hi"}`
				if strings.HasPrefix(c.path, "/v1/agui") {
					body = `{"messages":[{"id":"u1","role":"user","content":"hi"}]}`
				}
				if resp := do(t, m, c.method, c.path, c.host, c.header, body); resp.StatusCode != c.status {
					t.Errorf("%s %s (Host %q): %s; want %d", c.method, c.path, c.host, resp.Status, c.status)
				}
			})
		}
	})

	t.Run("WithAuthAnyHostByDefault", func(t *testing.T) {
		t.Parallel()
		m := startMain(t, map[string]string{"CONVO_WORKERS": "0", "CONVO_AUTH_SECRET": limitsSecret})
		// A deploy behind its own domain needs no configuration; a page of
		// another site has no token, so cross-site requests go on to
		// authentication.
		if resp := do(t, m, "GET", "/", "convo.example.com", nil, ""); resp.StatusCode != 200 {
			t.Errorf("GET / on a domain: %s", resp.Status)
		}
		h := map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example", "Authorization": "Bearer " + limitsToken("alice")}
		if resp := do(t, m, "POST", send, "convo.example.com", h, `{"text":"hi"}`); resp.StatusCode != 200 {
			t.Errorf("an authenticated call from another origin: %s", resp.Status)
		}
	})

	t.Run("WithAuthAndAllowedHosts", func(t *testing.T) {
		t.Parallel()
		m := startMain(t, map[string]string{"CONVO_WORKERS": "0", "CONVO_AUTH_SECRET": limitsSecret, "CONVO_ALLOWED_HOSTS": "convo.example.com"})
		if resp := do(t, m, "GET", "/", "convo.example.com", nil, ""); resp.StatusCode != 200 {
			t.Errorf("GET / on the allowed host: %s", resp.Status)
		}
		if resp := do(t, m, "GET", "/", "other.example", nil, ""); resp.StatusCode != 403 {
			t.Errorf("GET / on another host: %s; want 403", resp.Status)
		}
	})
}
