package agui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// TestAGUIBranches follows a thread through an edit (POST /v1/agui whose
// last user message is one of the thread's with a new text), a
// regeneration and a switch back to the first version, and has AG-UI's
// own packages judge the follower's stream and the edit's run: every
// event passes @ag-ui/core's schemas and verifyEvents, and the client's
// reducer ends with the thread's active path, message for message. The
// edit's run and the regeneration's start with a MESSAGES_SNAPSHOT of
// the new path; the switch, which queues no prompt, is a run of its own
// holding that snapshot. A rerun of a message with its own text is still
// refused.
func TestAGUIBranches(t *testing.T) {
	t.Parallel()
	apitest.NeedNode(t, "@ag-ui/client")
	ctx := context.Background()
	dir := t.TempDir()
	tb := apitest.Setup(t) // no workers: the test plays the worker
	// reply writes a reply with reasoning and text, as the demo model does.
	reply := func(prompt uuid.UUID, text string) {
		tb.StartPrompt(t, prompt)
		r := tb.StartBlock(t, prompt, "reasoning", "{}")
		tb.AppendText(t, r, "Thinking about "+text+".")
		tb.EndBlock(t, r)
		b := tb.StartBlock(t, prompt, "text", "{}")
		tb.AppendText(t, b, text)
		tb.EndBlock(t, b)
		tb.CompletePrompt(t, prompt)
	}
	first := tb.Send(t, "local", uuid.Nil, "What is 6*7?")
	thread := first.ConversationID
	reply(first.PromptID, "42")
	second := tb.Send(t, "local", thread, "And 7*8?")
	reply(second.PromptID, "56")
	follow := openAGUI(t, "GET", fmt.Sprintf("%s/v1/conversations/%s/agui", tb.URL, thread), nil, nil)

	// A rerun of the last user message with its own text is refused.
	rerun := runInput(thread.String(), "run-0")
	rerun["messages"] = []any{map[string]any{"id": second.UserMessageID.String(), "role": "user", "content": "And 7*8?"}}
	postAGUIRefused(t, tb, rerun, 409, "failed_precondition", "already in the conversation with this text")

	// The edit: the thread as the client holds it, its last user message
	// with a new text.
	edit := runInput(thread.String(), "run-edit")
	edit["messages"] = []any{
		map[string]any{"id": first.UserMessageID.String(), "role": "user", "content": "What is 6*7?"},
		map[string]any{"id": second.UserMessageID.String(), "role": "user", "content": "And 8*9?"},
	}
	post := openAGUI(t, "POST", tb.URL+"/v1/agui", nil, edit)
	head := post.Until(t, "MESSAGES_SNAPSHOT")
	st := tb.State(t, "local", thread)
	if len(st.Messages) != 4 || st.Messages[2].Blocks[0].Content != "And 8*9?" || st.Messages[2].SiblingCount != 2 {
		t.Fatalf("after the edit: the path %+v", st.Messages)
	}
	edited := st.Messages[3]
	if head[0]["type"] != "RUN_STARTED" || head[0]["runId"] != "run-edit" || convoField(head[0], "messageId") != edited.ID.String() {
		t.Fatalf("the edit's run starts %v", head)
	}
	if got, want := snapshotIDs(head[1]), pathIDs(st); !reflect.DeepEqual(got, want) {
		t.Errorf("the edit's run's snapshot %v; want the new path %v", got, want)
	}
	reply(edited.PromptID.UUID, "72")
	post.Until(t, "RUN_FINISHED")
	post.C.Ended(t)
	post.save(t, dir, "edit-run")
	pathAfterEdit := tb.State(t, "local", thread)

	// A regeneration (another client's RegenerateReply): its run.
	re, err := tb.Store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "local", ConversationID: thread})
	if err != nil {
		t.Fatal(err)
	}
	reply(re.PromptID, "Seventy-two")

	// A switch back to the second turn's first version: a run of its own.
	if _, err := tb.Store.SwitchBranch(ctx, "local", thread, second.UserMessageID); err != nil {
		t.Fatal(err)
	}
	runs := [][]map[string]any{follow.Until(t, "RUN_FINISHED"), follow.Until(t, "RUN_FINISHED"), follow.Until(t, "RUN_FINISHED")}
	follow.save(t, dir, "follower")
	final := tb.State(t, "local", thread)
	if len(final.Messages) != 4 || final.Messages[2].ID != second.UserMessageID || final.Messages[3].ID != second.MessageID {
		t.Fatalf("after the switch: the path %+v", final.Messages)
	}
	if runs[0][0]["runId"] != edited.PromptID.UUID.String() || runs[1][0]["runId"] != re.PromptID.String() {
		t.Errorf("the follower's runs %v, %v; want the edit's prompt's and the regeneration's", runs[0][0], runs[1][0])
	}
	if got := strings.Join(typeList(runs[2]), " "); got != "RUN_STARTED MESSAGES_SNAPSHOT RUN_FINISHED" ||
		!strings.HasPrefix(runs[2][0]["runId"].(string), "branch-") || convoField(runs[2][0], "leafMessageId") != second.MessageID.String() ||
		convoField(runs[2][0], "forkMessageId") != first.MessageID.String() {
		t.Errorf("the switch's run: %v", runs[2])
	}
	if got, want := snapshotIDs(runs[2][1]), pathIDs(final); !reflect.DeepEqual(got, want) {
		t.Errorf("the switch's snapshot %v; want the path %v", got, want)
	}

	var report verifierReport
	apitest.RunVerifier(t, "agui-verify/verify.mjs", "@ag-ui/client", &report, "AGUI_RECORDINGS="+dir)
	if len(report.Recordings) != 2 {
		t.Fatalf("the verifier read %d recordings, want 2", len(report.Recordings))
	}
	for _, rec := range report.Recordings {
		name := strings.TrimSuffix(filepath.Base(rec.File), ".jsonl")
		if len(rec.SchemaErrors) > 0 || rec.VerifyError != nil || rec.ApplyError != nil {
			t.Errorf("%s (%d events): schema %v; verifyEvents %v; reducer %v", name, rec.Events, rec.SchemaErrors,
				apitest.Deref(rec.VerifyError), apitest.Deref(rec.ApplyError))
			continue
		}
		want := pathAfterEdit
		if name == "follower" {
			want = final
		}
		var got []string
		for _, m := range rec.Messages {
			got = append(got, fmt.Sprint(m["role"], ":", m["id"], ":", m["content"]))
		}
		if w := pathMessages(want); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: the client's reducer ends with\n%q\nthe thread's path is\n%q", name, got, w)
		}
	}
}

// pathIDs is the AG-UI message ids of a conversation's active path: a
// user message's own, each reasoning and text block's.
func pathIDs(st conversation.State) []string {
	var out []string
	for _, m := range pathMessages(st) {
		out = append(out, strings.SplitN(m, ":", 3)[1])
	}
	return out
}

// pathMessages is a conversation's active path as AG-UI messages,
// "role:id:content" (replies of reasoning and text blocks only).
func pathMessages(st conversation.State) []string {
	var out []string
	for _, m := range st.Messages {
		for _, b := range m.Blocks {
			switch {
			case m.Role == conversation.RoleUser:
				out = append(out, "user:"+m.ID.String()+":"+b.Content)
			case b.Type == "reasoning":
				out = append(out, "reasoning:"+b.ID.String()+":"+b.Content)
			case b.Type == "text":
				out = append(out, "assistant:"+b.ID.String()+":"+b.Content)
			}
		}
	}
	return out
}

// snapshotIDs is the message ids of a MESSAGES_SNAPSHOT.
func snapshotIDs(ev map[string]any) []string {
	var out []string
	for _, m := range ev["messages"].([]any) {
		out = append(out, m.(map[string]any)["id"].(string))
	}
	return out
}

// postAGUIRefused posts a RunAgentInput and checks the refusal.
func postAGUIRefused(t *testing.T, tb *apitest.Bundle, in any, status int, code, message string) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	resp, cancel := apitest.Do(t, "POST", tb.URL+"/v1/agui", http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(body))
	defer cancel()
	gotCode, gotMessage := apitest.ErrorBody(t, resp)
	if resp.StatusCode != status || gotCode != code || !strings.Contains(gotMessage, message) {
		t.Fatalf("%d %s %q; want %d %s containing %q", resp.StatusCode, gotCode, gotMessage, status, code, message)
	}
}

// TestAGUIEditOlderThanSnapshot posts an edit (and a rerun) of a user
// message that a bounded snapshot leaves out (CONVO_SNAPSHOT_BYTES): it is
// still one of the thread's, so the rerun is refused and the edit makes a
// new version of its turn, instead of either being sent as a new message.
func TestAGUIEditOlderThanSnapshot(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{SnapshotBytes: 1}) // a snapshot holds the newest message only
	reply := func(prompt uuid.UUID, text string) { textReply(t, tb, prompt, text) }
	first := tb.Send(t, "local", uuid.Nil, "What is 6*7?")
	thread := first.ConversationID
	reply(first.PromptID, "42")
	second := tb.Send(t, "local", thread, "And 7*8?")
	reply(second.PromptID, "56")
	if st, err := tb.Store.RecentState(context.Background(), "local", thread, 1); err != nil || len(st.Messages) != 1 || !st.Older {
		t.Fatalf("the bounded snapshot holds %d messages (older %v, %v); want the newest only", len(st.Messages), st.Older, err)
	}
	held := []any{
		map[string]any{"id": first.UserMessageID.String(), "role": "user", "content": "What is 6*7?"},
		map[string]any{"id": second.UserMessageID.String(), "role": "user", "content": "And 7*8?"},
	}

	rerun := runInput(thread.String(), "run-0")
	rerun["messages"] = held
	postAGUIRefused(t, tb, rerun, 409, "failed_precondition", "already in the conversation with this text")
	if st := tb.State(t, "local", thread); len(st.Messages) != 4 {
		t.Fatalf("after the refused rerun: %d messages on the path; want the 4 before", len(st.Messages))
	}

	edit := runInput(thread.String(), "run-edit")
	held[1] = map[string]any{"id": second.UserMessageID.String(), "role": "user", "content": "And 8*9?"}
	edit["messages"] = held
	post := openAGUI(t, "POST", tb.URL+"/v1/agui", nil, edit)
	post.Until(t, "MESSAGES_SNAPSHOT")
	st := tb.State(t, "local", thread)
	if got := pathText(st); got != "What is 6*7? | 42 | And 8*9? ‹2/2› | (pending)" {
		t.Fatalf("after the edit the path is %q; want the second turn's new version", got)
	}
}

// pathText is a path as its messages' texts, "‹i/n›" after a message with
// versions and "(status)" for one without text.
func pathText(st conversation.State) string {
	var out []string
	for _, m := range st.Messages {
		var text strings.Builder
		for _, b := range m.Blocks {
			text.WriteString(b.Content)
		}
		s := text.String()
		if s == "" {
			s = "(" + string(m.Status) + ")"
		}
		if m.SiblingCount > 1 {
			s += fmt.Sprintf(" ‹%d/%d›", m.SiblingIndex+1, m.SiblingCount)
		}
		out = append(out, s)
	}
	return strings.Join(out, " | ")
}

// TestAGUILargeSwitch: a switch to a branch larger than a snapshot is a
// run whose MESSAGES_SNAPSHOT holds the latest messages of the new path
// that fit, as a bounded first snapshot does, not the follower's messages
// up to the fork and the whole branch after it.
func TestAGUILargeSwitch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := apitest.Setup(t, apitest.Options{SnapshotBytes: 4096})
	reply := func(prompt uuid.UUID, text string) { textReply(t, tb, prompt, text) }
	first := tb.Send(t, "local", uuid.Nil, "What is 6*7?")
	thread := first.ConversationID
	reply(first.PromptID, "42")
	second := tb.Send(t, "local", thread, "And 7*8?")
	reply(second.PromptID, "56")
	for i := range 8 {
		s := tb.Send(t, "local", thread, fmt.Sprintf("Tell me more, part %d.", i))
		reply(s.PromptID, strings.Repeat("More. ", 150))
	}
	ed, err := tb.Store.EditMessage(ctx, conversation.EditParams{OwnerID: "local", ConversationID: thread, MessageID: second.UserMessageID, Text: "And 8*9?"})
	if err != nil {
		t.Fatal(err)
	}
	reply(ed.PromptID, "72")
	// Subscribed once it answers 200: it holds the path of the edit.
	follow := openAGUI(t, "GET", fmt.Sprintf("%s/v1/conversations/%s/agui", tb.URL, thread), nil, nil)

	if _, err := tb.Store.SwitchBranch(ctx, "local", thread, second.UserMessageID); err != nil {
		t.Fatal(err)
	}
	run := follow.Until(t, "RUN_FINISHED")
	var snapshot map[string]any
	for _, ev := range run {
		if ev["type"] == "MESSAGES_SNAPSHOT" {
			snapshot = ev
		}
	}
	if snapshot == nil {
		t.Fatalf("the switch's run %v has no MESSAGES_SNAPSHOT", typeList(run))
	}
	path := pathIDs(tb.State(t, "local", thread))
	got := snapshotIDs(snapshot)
	if len(got) == 0 || len(got) >= len(path)-2 || !reflect.DeepEqual(got, path[len(path)-len(got):]) {
		t.Errorf("the switch's snapshot holds %v; want the latest few of the path %v", got, path)
	}
}

// textReply has the test play the worker: prompt's reply is one text
// block of text, completed.
func textReply(t *testing.T, tb *apitest.Bundle, prompt uuid.UUID, text string) {
	t.Helper()
	tb.StartPrompt(t, prompt)
	b := tb.StartBlock(t, prompt, "text", "{}")
	tb.AppendText(t, b, text)
	tb.EndBlock(t, b)
	tb.CompletePrompt(t, prompt)
}
