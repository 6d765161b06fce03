package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/convo-dev/convo/httpapi/agui"
	"github.com/convo-dev/convo/httpapi/aisdk"
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

// TestBodyOverLimitIs413: a POST body larger than its endpoint takes is
// answered 413 Payload Too Large, with a message that names the limit, on
// every endpoint that takes a body, whether its Content-Length says so
// (refused unread) or it comes chunked (refused once the limit is passed);
// nothing is written.
func TestBodyOverLimitIs413(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t)
	count := func() int {
		var n int
		if err := tb.Pool.QueryRow(context.Background(), `SELECT count(*) FROM convo.messages`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		path  string
		limit int64
		says  string
	}{
		{"/v1/agui", agui.MaxRunInputBytes, "4194304 bytes (4 MiB)"},
		{"/v1/ai-sdk/chat", aisdk.MaxChatRequestBytes, "8388608 bytes (8 MiB)"},
		{"/v1/ai-sdk/chat/6f1c1f9e-6a39-4e5c-a7c1-1d6f4f0e2b11/stop", aisdk.MaxStopBytes, "1024 bytes (1 KiB)"},
	} {
		// A JSON object with one long string: valid JSON, one byte over.
		over := `{"x":"` + strings.Repeat("a", int(c.limit)-7) + `"}`
		if int64(len(over)) != c.limit+1 {
			t.Fatalf("body of %d bytes; want %d", len(over), c.limit+1)
		}
		for _, chunked := range []bool{false, true} {
			name := strings.TrimPrefix(c.path, "/v1/") + "/ContentLength"
			if chunked {
				name = strings.TrimPrefix(c.path, "/v1/") + "/Chunked"
			}
			t.Run(name, func(t *testing.T) {
				before := count()
				var body io.Reader = strings.NewReader(over)
				if chunked {
					body = io.MultiReader(body) // no length known: sent chunked
				}
				req, err := http.NewRequest(http.MethodPost, tb.URL+c.path, body)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusRequestEntityTooLarge {
					t.Errorf("status %s; want 413", resp.Status)
				}
				code, msg := apitest.ErrorBody(t, resp)
				if code != "invalid_argument" || !strings.Contains(msg, "body: is larger than "+c.says) {
					t.Errorf("error %s %q; want invalid_argument naming the limit, %s", code, msg, c.says)
				}
				if after := count(); after != before {
					t.Errorf("a refused request wrote %d messages", after-before)
				}
			})
		}
	}
}
