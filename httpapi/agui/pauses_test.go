package agui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
	"github.com/convo-dev/convo/internal/pgtest"
)

// TestAGUIPauses pauses a run for each kind of input request: a client
// tool ends the run with its tool call left for the client (a frontend
// tool, outcome success with pendingToolCallIds), an approval or a
// question with an interrupt. The next RunAgentInput answers (a tool
// message, a resume entry) and streams the resumed run; a second answer
// is refused and changes nothing. AG-UI's schemas, verifyEvents and
// reducer judge every run.
func TestAGUIPauses(t *testing.T) {
	t.Parallel()
	apitest.NeedNode(t, "@ag-ui/client")
	dir := t.TempDir()
	type pauseCase struct {
		kind, request, outcome string
		answer                 func(in map[string]any, callID string)
	}
	cases := []pauseCase{
		{"client_tool", `{}`, "success", func(in map[string]any, callID string) {
			in["messages"] = append(in["messages"].([]any), map[string]any{"id": uuid.NewString(), "role": "tool",
				"toolCallId": callID, "content": `{"city": "Lisbon"}`})
		}},
		{"approval", `{"message": "Send it?"}`, "interrupt", func(in map[string]any, callID string) {
			in["resume"] = []any{map[string]any{"interruptId": callID, "status": "resolved",
				"payload": map[string]any{"approved": false, "reason": "not to that address"}}}
		}},
		{"question", `{"question": "Which file?"}`, "interrupt", func(in map[string]any, callID string) {
			in["resume"] = []any{map[string]any{"interruptId": callID, "status": "resolved", "payload": "todo.txt"}}
		}},
	}
	t.Run("Record", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.kind, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				tb := apitest.Setup(t) // no workers: the test plays the worker
				thread := uuid.NewString()
				first := runInput(thread, "run-1", "send a mail")
				post := openAGUI(t, "POST", tb.URL+"/v1/agui", nil, first)
				post.Next(t)
				follower := openAGUI(t, "GET", tb.URL+"/v1/conversations/"+thread+"/agui", nil, nil)
				prompt, call, err := pgtest.PauseForInput(ctx, tb.Pool, "w1", c.kind, c.request)
				if err != nil {
					t.Fatal(err)
				}
				events := post.Until(t, "RUN_FINISHED", "RUN_ERROR")
				post.C.Ended(t)
				post.save(t, dir, c.kind+"-1-paused")
				types := strings.Join(typeList(events), " ")
				if !strings.HasSuffix(types, "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED") {
					t.Fatalf("paused run: %s", types)
				}
				outcome := events[len(events)-1]["outcome"].(map[string]any)
				if outcome["type"] != c.outcome {
					t.Fatalf("outcome %v, want %s", outcome, c.outcome)
				}
				if c.outcome == "success" && !reflect.DeepEqual(outcome["pendingToolCallIds"], []any{call}) {
					t.Errorf("pendingToolCallIds %v, want [%s]", outcome["pendingToolCallIds"], call)
				}
				if c.outcome == "interrupt" {
					it := outcome["interrupts"].([]any)[0].(map[string]any)
					if it["id"] != call || it["toolCallId"] != call || it["reason"] != c.kind || it["message"] == "" {
						t.Errorf("interrupt %v", it)
					}
				}

				second := runInput(thread, "run-2")
				second["messages"] = []any{first["messages"].([]map[string]any)[0]}
				c.answer(second, call)
				resumed := openAGUI(t, "POST", tb.URL+"/v1/agui", nil, second)
				st := tb.State(t, "local", uuid.MustParse(thread))
				if len(st.PendingInputs) != 1 || string(st.PendingInputs[0].Status) != "answered" {
					t.Fatalf("after the answer: %+v", st.PendingInputs)
				}
				// A second answer is refused and changes nothing.
				raw, _ := json.Marshal(second)
				again, cancel := apitest.Do(t, "POST", tb.URL+"/v1/agui", http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(raw))
				msg, _ := io.ReadAll(again.Body)
				cancel()
				if again.StatusCode != http.StatusConflict || !strings.Contains(string(msg), "already answered") {
					t.Errorf("second answer: %s %s", again.Status, msg)
				}
				if st2 := tb.State(t, "local", uuid.MustParse(thread)); st2.Seq != st.Seq {
					t.Errorf("the refused answer changed the thread: %+v", st2.PendingInputs)
				}

				// The worker resumes.
				if _, err := tb.Pool.Exec(ctx, `SELECT prompt_id FROM convo.claim_prompt('w1', 30)`); err != nil {
					t.Fatal(err)
				}
				tb.StartPrompt(t, uuid.MustParse(prompt))
				if _, err := tb.Pool.Exec(ctx, `SELECT convo.complete_tool_call($1, $2)`, call, "done"); err != nil {
					t.Fatal(err)
				}
				text := tb.StartBlock(t, uuid.MustParse(prompt), "text", "{}")
				tb.AppendText(t, text, "All set.")
				tb.EndBlock(t, text)
				tb.CompletePrompt(t, uuid.MustParse(prompt))
				rest := resumed.Until(t, "RUN_FINISHED", "RUN_ERROR")
				resumed.C.Ended(t)
				resumed.save(t, dir, c.kind+"-2-resumed")
				// A follower sees the paused run, then the resumed one.
				followed := follower.Until(t, "RUN_FINISHED")
				followed = append(followed, follower.Until(t, "RUN_FINISHED")...)
				follower.save(t, dir, c.kind+"-3-follower")
				if n := strings.Count(strings.Join(typeList(followed), " "), "RUN_STARTED"); n != 2 {
					t.Errorf("the follower saw %d runs: %v", n, typeList(followed))
				}
				got := strings.Join(typeList(rest), " ")
				if !strings.HasPrefix(got, "RUN_STARTED MESSAGES_SNAPSHOT") || !strings.Contains(got, "TOOL_CALL_RESULT TEXT_MESSAGE_START") ||
					rest[0]["runId"] != "run-2" || rest[len(rest)-1]["outcome"].(map[string]any)["type"] != "success" {
					t.Fatalf("resumed run: %s %v", got, rest[len(rest)-1])
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	var report verifierReport
	apitest.RunVerifier(t, "agui-verify/verify.mjs", "@ag-ui/client", &report, "AGUI_RECORDINGS="+dir)
	if len(report.Recordings) != 3*len(cases) {
		t.Fatalf("the verifier read %d recordings, want %d", len(report.Recordings), 3*len(cases))
	}
	for _, rec := range report.Recordings {
		name := strings.TrimSuffix(filepath.Base(rec.File), ".jsonl")
		if len(rec.SchemaErrors) > 0 || rec.VerifyError != nil || rec.ApplyError != nil {
			t.Errorf("%s: schema %v; verify %s; apply %s", name, rec.SchemaErrors, apitest.Deref(rec.VerifyError), apitest.Deref(rec.ApplyError))
		}
	}
}

// TestAGUIDemoClientTool runs the demo worker's client tool (a message
// starting with /client-tool) as an AG-UI frontend tool: the run ends
// with the tool call pending, and the next run's tool message resumes it.
func TestAGUIDemoClientTool(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Workers: true})
	thread := uuid.NewString()
	first := runInput(thread, "run-1", "/client-tool what browser is this?")
	events := openAGUI(t, "POST", tb.URL+"/v1/agui", nil, first).Until(t, "RUN_FINISHED", "RUN_ERROR")
	outcome, _ := events[len(events)-1]["outcome"].(map[string]any)
	pending, _ := outcome["pendingToolCallIds"].([]any)
	if outcome["type"] != "success" || len(pending) != 1 {
		t.Fatalf("run ends with %v", events[len(events)-1])
	}
	second := runInput(thread, "run-2")
	second["messages"] = []any{first["messages"].([]map[string]any)[0],
		map[string]any{"id": uuid.NewString(), "role": "tool", "toolCallId": pending[0], "content": `{"userAgent": "test"}`}}
	rest := openAGUI(t, "POST", tb.URL+"/v1/agui", nil, second).Until(t, "RUN_FINISHED", "RUN_ERROR")
	last := rest[len(rest)-1]
	if last["type"] != "RUN_FINISHED" || last["runId"] != "run-2" || last["outcome"].(map[string]any)["type"] != "success" ||
		!strings.Contains(strings.Join(typeList(rest), " "), "TOOL_CALL_RESULT") {
		t.Fatalf("resumed run: %v %v", typeList(rest), last)
	}
	if st := tb.State(t, "local", uuid.MustParse(thread)); string(st.Messages[1].Status) != "completed" {
		t.Errorf("the reply: %s", st.Messages[1].Status)
	}
}
