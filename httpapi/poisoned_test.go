package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
	"github.com/convo-dev/convo/internal/jsonlimit"
	"github.com/convo-dev/convo/internal/pgtest"
)

// readUntil reads c's events until their data, together, holds every one
// of wants, and returns it, one event a line; the test fails when the
// stream ends or stalls first.
func readUntil(t testing.TB, what string, c *apitest.SSEClient, wants ...string) string {
	t.Helper()
	var all strings.Builder
	for {
		missing := ""
		for _, w := range wants {
			if !strings.Contains(all.String(), w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return all.String()
		}
		ev := c.Next(t)
		all.WriteString(ev.Data + "\n")
		if ev.Name == "error" || strings.Contains(ev.Data, `"RUN_ERROR"`) {
			t.Fatalf("%s: an error event before %q: %s", what, missing, ev.Data)
		}
	}
}

// get answers GET url, which must be 200, with its body.
func get(t testing.TB, url string) string {
	t.Helper()
	resp, cancel := apitest.Do(t, http.MethodGet, url, nil, nil)
	defer cancel()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

// requireEvent fails unless a line of data (readUntil's) that holds kind
// also holds want.
func requireEvent(t testing.TB, what, data, kind, want string) {
	t.Helper()
	for _, line := range strings.Split(data, "\n") {
		if strings.Contains(line, kind) && strings.Contains(line, want) {
			return
		}
	}
	t.Errorf("%s: no %s event shows %q", what, kind, want)
}

// requireAll fails unless body shows every one of wants.
func requireAll(t testing.TB, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s does not show %q", what, w)
		}
	}
}

// TestReadersShowPoisonedValues: a conversation whose stored JSON breaks
// convo's rule (written before the SQL functions applied it: 1e400 in a
// block's metadata and in a tool call's input, metadata nested 12,000
// deep; pgtest.WritePoisonedReply) reads through every HTTP route, 200,
// every message there, the values as the marked placeholders: the SSE
// stream (its snapshot and a live event carrying such a value), the AG-UI
// follow (likewise), /history, the AI SDK's /messages and its resumed
// stream of a reply being written. AG-UI and the AI SDK show no block
// metadata, so only the tool call's placeholder.
func TestReadersShowPoisonedValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t)
	first := tb.Send(t, "local", uuid.Nil, "before")
	writeText(t, tb, first.PromptID, "the first reply")
	id := first.ConversationID
	poisoned := tb.Send(t, "local", id, "poison")
	if _, err := pgtest.WritePoisonedReply(ctx, tb.Pool, poisoned.PromptID.String()); err != nil {
		t.Fatal(err)
	}
	last := tb.Send(t, "local", id, "after")
	writeText(t, tb, last.PromptID, "the last reply")

	texts := []string{"the first reply", pgtest.PoisonedText, pgtest.PoisonedDeep, "the last reply"}
	every := append([]string{jsonlimit.PlaceholderNumber, jsonlimit.PlaceholderDeep}, texts...)
	tool := append([]string{jsonlimit.PlaceholderNumber}, texts...)

	events := apitest.OpenSSE(t, http.MethodGet, tb.EventsURL(id), nil, nil)
	requireAll(t, "the SSE snapshot", events.Next(t).Data, every...)
	// The follow shows a run when one starts (below).
	follow := apitest.OpenSSE(t, http.MethodGet, fmt.Sprintf("%s/v1/conversations/%s/agui", tb.URL, id),
		http.Header{"Accept": {"text/event-stream"}}, nil)
	requireAll(t, "/history", get(t, fmt.Sprintf("%s/v1/conversations/%s/history", tb.URL, id)), every...)
	requireAll(t, "the AI SDK's /messages", get(t, fmt.Sprintf("%s/v1/ai-sdk/chat/%s/messages", tb.URL, id)), tool...)

	// Live: a reply starts a tool call whose input is poisoned.
	live := tb.Send(t, "local", id, "live")
	tb.StartPrompt(t, live.PromptID)
	if _, err := pgtest.StartPoisonedToolCall(ctx, tb.Pool, live.PromptID.String()); err != nil {
		t.Fatal(err)
	}
	data := readUntil(t, "the SSE stream, live", events, `"toolCallStarted"`)
	requireEvent(t, "the SSE stream, live", data, `"toolCallStarted"`, jsonlimit.PlaceholderNumber)
	data = readUntil(t, "the AG-UI follow", follow, append([]string{`"MESSAGES_SNAPSHOT"`, `"TOOL_CALL_ARGS"`}, tool...)...)
	requireEvent(t, "the AG-UI follow, live", data, `"TOOL_CALL_ARGS"`, jsonlimit.PlaceholderNumber)
	resumed := apitest.OpenSSE(t, http.MethodGet, fmt.Sprintf("%s/v1/ai-sdk/chat/%s/stream", tb.URL, id), nil, nil)
	data = readUntil(t, "the AI SDK's resumed stream", resumed, `"tool-input-available"`)
	requireEvent(t, "the AI SDK's resumed stream", data, `"tool-input-available"`, jsonlimit.PlaceholderNumber)

	// The streams go on after the poisoned event.
	tb.CompletePrompt(t, live.PromptID)
	readUntil(t, "the SSE stream", events, `"promptCompleted"`)
	readUntil(t, "the AG-UI follow", follow, `"RUN_FINISHED"`)
	readUntil(t, "the AI SDK's resumed stream", resumed, `"finish"`)
}

// writeText plays a worker that writes the prompt's reply: one text block,
// completed.
func writeText(t testing.TB, tb *apitest.Bundle, prompt uuid.UUID, text string) {
	t.Helper()
	tb.StartPrompt(t, prompt)
	block := tb.StartBlock(t, prompt, "text", "{}")
	tb.AppendText(t, block, text)
	tb.EndBlock(t, block)
	tb.CompletePrompt(t, prompt)
}
