package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestOpenProtocols checks that the server mounts the open protocols (SSE,
// AG-UI, history export) under /v1/ with the production wiring: an AG-UI
// run answered by the in-process demo worker, then the same conversation
// over SSE and as history.
func TestOpenProtocols(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_DEMO_TOKENS_PER_SECOND": "-1"})
	thread := uuid.NewString()
	body := `{"threadId":"` + thread + `","runId":"r1","messages":[{"id":"m1","role":"user","content":"What is 6 times 7?"}]}`
	resp, err := http.Post(m.URL()+"/v1/agui", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("POST /v1/agui: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var types []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() { // the response ends with the run
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev struct{ Type string }
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			types = append(types, ev.Type)
		}
	}
	if len(types) < 3 || types[0] != "RUN_STARTED" || types[len(types)-1] != "RUN_FINISHED" {
		t.Fatalf("AG-UI run: %v", types)
	}

	hist, err := http.Get(m.URL() + "/v1/conversations/" + thread + "/history")
	if err != nil {
		t.Fatal(err)
	}
	defer hist.Body.Close()
	var doc struct {
		Content []struct{ Role, Text string }
	}
	if err := json.NewDecoder(hist.Body).Decode(&doc); err != nil || len(doc.Content) != 2 || !strings.Contains(doc.Content[1].Text, "42") {
		t.Fatalf("history: %+v (%v)", doc, err)
	}

	events, err := http.Get(m.URL() + "/v1/conversations/" + thread + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer events.Body.Close()
	sc = bufio.NewScanner(events.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "event: ") {
	}
	if sc.Text() != "event: snapshot" {
		t.Fatalf("SSE starts with %q", sc.Text())
	}
}

// TestOpenProtocolsNeedTokens checks that /v1/ authenticates as the
// Connect API does.
func TestOpenProtocolsNeedTokens(t *testing.T) {
	t.Parallel()
	m := startMain(t, map[string]string{"CONVO_AUTH_SECRET": "a-secret", "CONVO_WORKERS": "0"})
	resp, err := http.Get(m.URL() + "/v1/conversations/" + uuid.NewString() + "/history")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %s", resp.Status)
	}
}
