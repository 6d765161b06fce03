package main

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

func TestParseCORSOrigins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "", want: nil},
		{in: " , ", want: nil},
		{in: "*", want: []string{"*"}},
		{in: "http://localhost:5173, https://App.Example.com/", want: []string{"http://localhost:5173", "https://app.example.com"}},
		{in: "https://*.example.com", want: []string{"https://*.example.com"}},
		{in: "*,http://localhost:5173", err: "mixes * with origins"},
		{in: "localhost:5173", err: `"localhost:5173" is not an origin`},
		{in: "https://app.example.com/chat", err: "is not an origin"},
		{in: "ftp://app.example.com", err: "is not an origin"},
		{in: "https://user@app.example.com", err: "is not an origin"},
		{in: "https://app.*.com", err: "is not an origin"},
	} {
		got, err := parseCORSOrigins(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "CONVO_CORS_ORIGINS") {
				t.Errorf("parseCORSOrigins(%q) error = %v, want one naming CONVO_CORS_ORIGINS and %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseCORSOrigins(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCORSFlag(t *testing.T) {
	t.Parallel()
	m := NewMain()
	err := m.ParseFlags([]string{"--cors-origins", "http://a.test:1,http://b.test"}, func(k string) string {
		return map[string]string{"CONVO_CORS_ORIGINS": "http://env.test"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://a.test:1", "http://b.test"}; !slices.Equal(m.Config.CORSOrigins, want) {
		t.Errorf("CORSOrigins = %q, want the flag's %q", m.Config.CORSOrigins, want)
	}
	if err := NewMain().ParseFlags([]string{"--cors-origins", "a.test"}, func(string) string { return "" }); err == nil {
		t.Error("an origin without a scheme was accepted")
	}
}

// TestCORS checks the policy of CONVO_CORS_ORIGINS on every kind of route:
// preflights are answered and cached for an allowed origin, actual
// responses let its scripts read what they need, and any other origin (or
// a server without the setting) gets no CORS headers at all, so the
// browser blocks it.
func TestCORS(t *testing.T) {
	t.Parallel()
	const allowed = "http://app.example.test:5173"
	m := startMain(t, map[string]string{"CONVO_CORS_ORIGINS": allowed + ",https://other.example.test", "CONVO_WORKERS": "0"})
	plain := startMain(t, map[string]string{"CONVO_WORKERS": "0"})

	sent, err := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL()).
		SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{Text: "cors"}))
	if err != nil {
		t.Fatal(err)
	}
	id := sent.Msg.ConversationId

	preflights := []struct {
		name, method, path, headers string
	}{
		{"ConnectUnary", "POST", "/convo.v1.ConversationService/SendMessage", "content-type,connect-protocol-version,authorization"},
		{"ConnectStream", "POST", "/convo.v1.ConversationService/StreamConversation", "content-type,connect-protocol-version,connect-timeout-ms"},
		{"GRPCWeb", "POST", "/convo.v1.ConversationService/GetConversation", "content-type,x-grpc-web,x-user-agent,grpc-timeout"},
		{"SSE", "GET", "/v1/conversations/" + id + "/events", "authorization,last-event-id"},
		{"AGUIFollow", "GET", "/v1/conversations/" + id + "/agui", "authorization"},
		{"AGUIRun", "POST", "/v1/agui", "content-type,authorization"},
		{"History", "GET", "/v1/conversations/" + id + "/history", "authorization"},
		{"AISDKChat", "POST", "/v1/ai-sdk/chat", "content-type,authorization"},
		{"AISDKResume", "GET", "/v1/ai-sdk/chat/" + id + "/stream", "authorization"},
		{"AISDKStop", "POST", "/v1/ai-sdk/chat/" + id + "/stop", "authorization"},
		// What OpenAI's JavaScript SDK sends from a browser.
		{"OpenAIResponses", "POST", "/v1/responses", "authorization,content-type,x-stainless-lang,x-stainless-package-version," +
			"x-stainless-os,x-stainless-arch,x-stainless-runtime,x-stainless-runtime-version,x-stainless-retry-count,x-stainless-timeout"},
		{"OpenAIDeleteResponse", "DELETE", "/v1/responses/resp_x", "authorization,x-stainless-retry-count"},
		{"OpenAIDeleteConversation", "DELETE", "/v1/conversations/" + id, "authorization,openai-organization,openai-project"},
	}
	for _, p := range preflights {
		t.Run("Preflight"+p.name, func(t *testing.T) {
			res := preflight(t, m.URL()+p.path, allowed, p.method, p.headers)
			if got := res.Header.Get("Access-Control-Allow-Origin"); got != allowed {
				t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, allowed)
			}
			if got := res.Header.Get("Access-Control-Max-Age"); got != "7200" {
				t.Errorf("Access-Control-Max-Age = %q, want 7200 (preflights cached)", got)
			}
			if got := res.Header.Get("Access-Control-Allow-Credentials"); got != "" {
				t.Errorf("Access-Control-Allow-Credentials = %q, want none", got)
			}
			allowHeaders := strings.ToLower(res.Header.Get("Access-Control-Allow-Headers"))
			for _, h := range strings.Split(p.headers, ",") {
				if !strings.Contains(allowHeaders, h) {
					t.Errorf("Access-Control-Allow-Headers = %q lacks %q", allowHeaders, h)
				}
			}
			if !strings.Contains(res.Header.Get("Access-Control-Allow-Methods"), p.method) {
				t.Errorf("Access-Control-Allow-Methods = %q lacks %s", res.Header.Get("Access-Control-Allow-Methods"), p.method)
			}
		})
		t.Run("PreflightRefused"+p.name, func(t *testing.T) {
			for base, origin := range map[string]string{m.URL(): "http://evil.example.test", plain.URL(): allowed} {
				res := preflight(t, base+p.path, origin, p.method, p.headers)
				for k := range res.Header {
					if strings.HasPrefix(k, "Access-Control-Allow-") {
						t.Errorf("origin %s got %s: %q", origin, k, res.Header.Get(k))
					}
				}
			}
		})
	}

	t.Run("ActualResponsesExposeHeaders", func(t *testing.T) {
		grpcWeb := []byte{0, 0, 0, 0, 0}
		for name, req := range map[string]*http.Request{
			"Connect": newRequest(t, "POST", m.URL()+"/convo.v1.ConversationService/GetConversation", "application/json", []byte(`{"conversationId":"`+id+`"}`)),
			"GRPCWeb": newRequest(t, "POST", m.URL()+"/convo.v1.ConversationService/ListConversations", "application/grpc-web+proto", grpcWeb),
			"History": newRequest(t, "GET", m.URL()+"/v1/conversations/"+id+"/history", "", nil),
		} {
			req.Header.Set("Origin", allowed)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("%s: status %d", name, res.StatusCode)
			}
			if got := res.Header.Get("Access-Control-Allow-Origin"); got != allowed {
				t.Errorf("%s: Access-Control-Allow-Origin = %q, want %q", name, got, allowed)
			}
			exposed := strings.ToLower(res.Header.Get("Access-Control-Expose-Headers"))
			for _, h := range []string{"grpc-status", "grpc-message", "grpc-status-details-bin", "retry-after"} {
				if !strings.Contains(exposed, h) {
					t.Errorf("%s: Access-Control-Expose-Headers = %q lacks %s", name, exposed, h)
				}
			}
		}
	})

	t.Run("StreamFromAllowedOrigin", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req := newRequest(t, "GET", m.URL()+"/v1/conversations/"+id+"/events", "", nil).WithContext(ctx)
		req.Header.Set("Origin", allowed)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != allowed {
			t.Errorf("SSE: status %d, Access-Control-Allow-Origin %q", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
		}
	})
}

func preflight(t *testing.T, url, origin, method, headers string) *http.Response {
	t.Helper()
	req := newRequest(t, http.MethodOptions, url, "", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	// Browsers send the names lowercased and sorted, which rs/cors expects.
	names := strings.Split(headers, ",")
	slices.Sort(names)
	req.Header.Set("Access-Control-Request-Headers", strings.Join(names, ","))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

func newRequest(t *testing.T, method, url, contentType string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}
