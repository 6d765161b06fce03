package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// TestStateChangingRoutesNeedJSON checks that the POST routes refuse
// bodies a page of any site could send without a preflight, and invalid
// UTF-8, changing nothing; and that wrong methods get 405.
func TestStateChangingRoutesNeedJSON(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t)
	run := `{"messages":[{"id":"u1","role":"user","content":"hello"}]}`
	chat := `{"id":"6f1c1f9e-6a39-4e5c-a7c1-1d6f4f0e2b11","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hello"}]}]}`
	count := func() int {
		var n int
		if err := tb.Pool.QueryRow(context.Background(), `SELECT count(*) FROM convo.conversations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	post := func(path, contentType, body string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, tb.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, path := range []string{"/v1/agui", "/v1/ai-sdk/chat"} {
		body := run
		if path == "/v1/ai-sdk/chat" {
			body = chat
		}
		for _, c := range []struct {
			name, contentType, body string
			status                  int
			names                   string
		}{
			{"TextPlain", "text/plain", body, http.StatusUnsupportedMediaType, "Content-Type"},
			{"TextPlainUTF8", "text/plain;charset=UTF-8", body, http.StatusUnsupportedMediaType, "Content-Type"},
			{"Form", "application/x-www-form-urlencoded", body, http.StatusUnsupportedMediaType, "Content-Type"},
			{"Multipart", "multipart/form-data; boundary=x", body, http.StatusUnsupportedMediaType, "Content-Type"},
			{"None", "", body, http.StatusUnsupportedMediaType, "got none"},
			{"Latin1", "application/json; charset=iso-8859-1", body, http.StatusUnsupportedMediaType, "UTF-8"},
			{"InvalidUTF8", "application/json", strings.Replace(body, "hello", "hel\xff\xfelo", 1), http.StatusBadRequest, "not valid UTF-8"},
		} {
			t.Run(strings.TrimPrefix(path, "/v1/")+"/"+c.name, func(t *testing.T) {
				before := count()
				resp := post(path, c.contentType, c.body)
				if resp.StatusCode != c.status {
					t.Errorf("status %s; want %d", resp.Status, c.status)
				}
				code, msg := apitest.ErrorBody(t, resp)
				if code != "invalid_argument" || !strings.Contains(msg, c.names) {
					t.Errorf("error %s %q; want invalid_argument naming %q", code, msg, c.names)
				}
				if after := count(); after != before {
					t.Errorf("a refused request created %d conversations", after-before)
				}
			})
		}
	}

	t.Run("JSONWithCharsetIsServed", func(t *testing.T) {
		resp := post("/v1/agui", "application/json; charset=utf-8", run)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %s", resp.Status)
		}
	})
	t.Run("StopWithoutBody", func(t *testing.T) {
		resp := post("/v1/ai-sdk/chat/6f1c1f9e-6a39-4e5c-a7c1-1d6f4f0e2b11/stop", "", "")
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnsupportedMediaType || resp.StatusCode >= 500 {
			t.Errorf("a bodyless stop: %s", resp.Status)
		}
		resp = post("/v1/ai-sdk/chat/6f1c1f9e-6a39-4e5c-a7c1-1d6f4f0e2b11/stop", "text/plain", "x")
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("a text/plain stop: %s", resp.Status)
		}
	})
	t.Run("WrongMethodsGet405", func(t *testing.T) {
		for _, c := range []struct{ method, path string }{
			{http.MethodGet, "/v1/agui"}, {http.MethodPut, "/v1/agui"}, {http.MethodGet, "/v1/ai-sdk/chat"},
			{http.MethodDelete, "/v1/conversations/6f1c1f9e-6a39-4e5c-a7c1-1d6f4f0e2b11/events"},
			{http.MethodPost, "/v1/conversations/6f1c1f9e-6a39-4e5c-a7c1-1d6f4f0e2b11/history"},
		} {
			req, _ := http.NewRequest(c.method, tb.URL+c.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") == "" {
				t.Errorf("%s %s: %s, Allow %q; want 405 with Allow", c.method, c.path, resp.Status, resp.Header.Get("Allow"))
			}
		}
	})
}
