package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

func TestHistory(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t)
	ctx := context.Background()

	// A rich reply: reasoning, a tool call with its result, then text.
	first := tb.Send(t, "local", uuid.Nil, "What is 6*7?")
	id := first.ConversationID
	tb.StartPrompt(t, first.PromptID)
	r := tb.StartBlock(t, first.PromptID, "reasoning", "{}")
	tb.AppendText(t, r, "Think", " twice.")
	tb.EndBlock(t, r)
	use := tb.StartBlock(t, first.PromptID, "tool_use", `{"name": "calc"}`)
	tb.AppendText(t, use, `{"e": `, `"6*7"}`)
	tb.ToolCall(t, use, "calc", `{"e": "6*7"}`, "", "evaluating ", "42")
	tb.EndBlock(t, use)
	result := tb.StartBlock(t, first.PromptID, "tool_result", "{}")
	tb.AppendText(t, result, "42")
	tb.EndBlock(t, result)
	text := tb.StartBlock(t, first.PromptID, "text", "{}")
	tb.AppendText(t, text, "6*7 ", "is ", "42.")
	tb.CompletePrompt(t, first.PromptID)
	// A text-only reply.
	second := tb.Send(t, "local", id, "Thanks!")
	tb.StartPrompt(t, second.PromptID)
	tb.AppendText(t, tb.StartBlock(t, second.PromptID, "text", "{}"), "You're ", "welcome.")
	tb.CompletePrompt(t, second.PromptID)
	st := tb.State(t, "local", id)

	resp, cancel := apitest.Do(t, "GET", fmt.Sprintf("%s/v1/conversations/%s/history", tb.URL, id), nil, nil)
	defer cancel()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// Every key is lowerCamelCase, as in the Connect API's JSON, except
	// inside the JSON that workers and users choose (block metadata, tool
	// input).
	if bad := snakeKeys(t, body); len(bad) > 0 {
		t.Errorf("history keys not lowerCamelCase: %q", bad)
	}
	var doc struct {
		ConversationID string `json:"conversationId"`
		Title          string `json:"title"`
		Seq            string `json:"seq"`
		ContentType    string `json:"contentType"`
		Content        []map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ConversationID != id.String() || doc.Seq != strconv.FormatInt(st.Seq, 10) || doc.Title != "What is 6*7?" ||
		doc.ContentType != "application/vnd.convo.events+json; coalesced=true" || len(doc.Content) != 4 {
		t.Fatalf("history: conversationId %s, seq %s, title %q, contentType %q, %d entries", doc.ConversationID, doc.Seq, doc.Title, doc.ContentType, len(doc.Content))
	}
	str := func(raw json.RawMessage) string {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	for i, want := range []struct{ id, role, text string }{
		{first.UserMessageID.String(), "user", "What is 6*7?"},
		{first.MessageID.String(), "assistant", "6*7 is 42."},
		{second.UserMessageID.String(), "user", "Thanks!"},
		{second.MessageID.String(), "assistant", "You're welcome."},
	} {
		e := doc.Content[i]
		if str(e["id"]) != want.id || str(e["role"]) != want.role || str(e["text"]) != want.text || str(e["status"]) != "completed" {
			t.Errorf("entry %d = %s %s %q, want %+v", i, e["id"], e["role"], e["text"], want)
		}
		// Text says everything about a text-only message: no events.
		if _, ok := e["events"]; ok != (i == 1) {
			t.Errorf("entry %d has events: %v", i, ok)
		}
	}

	var events []json.RawMessage
	if err := json.Unmarshal(doc.Content[1]["events"], &events); err != nil {
		t.Fatal(err)
	}
	// The log's own events of the reply, to compare with.
	logged, err := tb.Store.EventsAfter(ctx, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	firstDelta := map[string]int64{} // block → seq of its first delta
	for _, e := range logged {
		if e.Kind == "blockDelta" && e.BlockID.Valid {
			if _, ok := firstDelta[e.BlockID.UUID.String()]; !ok {
				firstDelta[e.BlockID.UUID.String()] = e.Seq
			}
		}
	}
	var got []string
	for _, raw := range events {
		ev := &convov1.Event{}
		if err := protojson.Unmarshal(raw, ev); err != nil {
			t.Fatalf("event %s: %v", raw, err)
		}
		m := ev.ProtoReflect()
		kind := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind")).JSONName()
		switch {
		case ev.GetBlockDelta() != nil:
			d := ev.GetBlockDelta()
			if d.BlockId != use.String() && ev.Seq != firstDelta[d.BlockId] {
				t.Errorf("merged delta of %s has seq %d, want its first delta's %d", d.BlockId, ev.Seq, firstDelta[d.BlockId])
			}
			kind += ":" + d.Content
		case ev.GetToolCallProgress() != nil:
			kind += ":" + ev.GetToolCallProgress().Output
		}
		got = append(got, kind)
	}
	want := []string{
		"promptQueued", "promptStarted",
		"blockStart", "blockDelta:Think twice.", "blockEnd",
		"blockStart", `blockDelta:{"e": `, `blockDelta:"6*7"}`, "toolCallStarted",
		"toolCallProgress:evaluating ", "toolCallProgress:42", "toolCallCompleted", "blockEnd",
		"blockStart", "blockDelta:42", "blockEnd",
		"blockStart", "blockDelta:6*7 is 42.", "blockEnd",
		"promptCompleted",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Streams and resumes serve the original events, uncoalesced.
	c := apitest.OpenSSE(t, "GET", tb.EventsURL(id)+"?after=0", nil, nil)
	deltas := 0
	for {
		ev := apitest.DecodeEvent(t, c.Next(t))
		if ev.GetBlockDelta().GetBlockId() == text.String() {
			deltas++
		}
		if ev.Seq == st.Seq {
			break
		}
	}
	if deltas != 3 {
		t.Errorf("the stream sent %d deltas of the text block, want the 3 written", deltas)
	}
}

// Compaction merges a finished reply's deltas; the exported history is
// byte for byte what it was.
func TestHistoryAfterCompaction(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t)
	first := tb.Send(t, "local", uuid.Nil, "Count")
	tb.StartPrompt(t, first.PromptID)
	r := tb.StartBlock(t, first.PromptID, "reasoning", "{}")
	tb.AppendText(t, r, "one ", "two ", "three")
	tb.EndBlock(t, r)
	text := tb.StartBlock(t, first.PromptID, "text", "{}")
	deltas := make([]string, 300)
	for i := range deltas {
		deltas[i] = strconv.Itoa(i) + "… "
	}
	tb.AppendText(t, text, deltas...)
	tb.CompletePrompt(t, first.PromptID)

	url := fmt.Sprintf("%s/v1/conversations/%s/history", tb.URL, first.ConversationID)
	read := func() string {
		resp, cancel := apitest.Do(t, "GET", url, nil, nil)
		defer cancel()
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v", resp.Status, err)
		}
		return string(body)
	}
	before := read()
	res, err := tb.Store.CompactEvents(context.Background(), 0, 10)
	if err != nil || res.EventsRemoved != 2+299 {
		t.Fatalf("compact = %+v, %v; want 301 events removed", res, err)
	}
	if after := read(); after != before {
		t.Errorf("history changed by compaction:\nbefore %s\n after %s", before, after)
	}
}

// snakeKeys returns the object keys in the JSON document body that hold
// an underscore, outside "metadata" and "input" values (JSON chosen by
// workers and users).
func snakeKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	var bad []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if strings.Contains(k, "_") {
					bad = append(bad, path+"."+k)
				}
				if k != "metadata" && k != "input" {
					walk(path+"."+k, child)
				}
			}
		case []any:
			for i, child := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), child)
			}
		}
	}
	walk("", v)
	return bad
}
