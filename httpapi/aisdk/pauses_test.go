package aisdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
	"github.com/convo-dev/convo/internal/pgtest"
)

// TestAISDKPauses pauses a reply for each kind of input request, answers
// it as useChat does (addToolApprovalResponse, addToolOutput: a POST whose
// last message is the assistant's), and checks with the ai package that
// the paused stream, /messages while paused and the resumed stream are
// what the AI SDK expects; a second answer is refused and changes nothing.
func TestAISDKPauses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	type pauseCase struct {
		kind, request string
		waitChunk     string // the chunk that asks the client
		answer        func(part map[string]any)
		resumedTool   string // the tool part's last chunk in the resumed stream
		wantState     string // the folded tool part's state at the end
	}
	cases := []pauseCase{
		{"approval", `{"message": "Send it?"}`, "tool-approval-request", func(p map[string]any) {
			p["state"] = "approval-responded"
			p["approval"].(map[string]any)["approved"] = false
			p["approval"].(map[string]any)["reason"] = "not to that address"
		}, "tool-output-denied", "output-denied"},
		{"client_tool", `{}`, "tool-input-available", func(p map[string]any) {
			p["state"], p["output"] = "output-available", map[string]any{"city": "Lisbon"}
		}, "tool-output-available", "output-available"},
		{"question", `{"question": "Which file?"}`, "tool-input-available", func(p map[string]any) {
			p["state"], p["output"] = "output-available", "todo.txt"
		}, "tool-output-available", "output-available"},
	}
	t.Run("Record", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.kind, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				tb := apitest.Setup(t) // no workers: the test plays the worker
				chat := uuid.New()
				post := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, chatBody(chat.String(), "submit-message", "send a mail"))
				post.Next(t)
				prompt, call, err := pgtest.PauseForInput(ctx, tb.Pool, "w1", c.kind, c.request)
				if err != nil {
					t.Fatal(err)
				}
				chunks := post.rest(t)
				want := "start-step tool-input-start tool-input-available " + c.waitChunk + " finish-step finish [DONE]"
				if got := chunkTypes(chunks); got != want {
					t.Fatalf("paused stream:\n%s\nwant\n%s", got, want)
				}
				if f := chunks[len(chunks)-2]; f["finishReason"] != "tool-calls" {
					t.Errorf("finish %v", f)
				}
				if c.kind == "approval" && (chunks[3]["approvalId"] != call || chunks[3]["reason"] != "Send it?") {
					t.Errorf("approval request %v", chunks[3])
				}
				post.save(t, dir, c.kind+"-1-paused")

				// The prompt waits: resume has nothing to stream; /messages
				// shows the request, as the stream folded it (checked below).
				resp, cancel := apitest.Do(t, "GET", fmt.Sprintf("%s/v1/ai-sdk/chat/%s/stream", tb.URL, chat), nil, nil)
				resp.Body.Close()
				cancel()
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("resume while waiting: %s", resp.Status)
				}
				loaded := uiMessagesOf(t, tb.URL, nil, chat.String())
				reply := loaded[len(loaded)-1]
				writeJSON(t, filepath.Join(dir, c.kind+"-1-paused.loaded.json"), reply)
				writeJSON(t, filepath.Join(dir, c.kind+"-2-resumed.message.json"), reply)

				// Answer as useChat does.
				answered := normalized(t, loaded).([]any)
				parts := answered[len(answered)-1].(map[string]any)["parts"].([]any)
				c.answer(parts[len(parts)-1].(map[string]any))
				body := map[string]any{"id": chat.String(), "trigger": "submit-message", "messageId": reply["id"], "messages": answered}
				resumed := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, body)
				if start := resumed.Next(t); start["type"] != "start" || start["messageId"] != reply["id"] {
					t.Fatalf("resumed stream starts %v", start)
				}
				st := tb.State(t, "local", chat)
				if len(st.PendingInputs) != 1 || string(st.PendingInputs[0].Status) != "answered" {
					t.Fatalf("after the answer: %+v", st.PendingInputs)
				}
				// A second answer is refused and changes nothing.
				raw, _ := json.Marshal(body)
				again, cancel2 := apitest.Do(t, "POST", tb.URL+"/v1/ai-sdk/chat", http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(raw))
				msg, _ := io.ReadAll(again.Body)
				cancel2()
				if again.StatusCode != http.StatusConflict || !strings.Contains(string(msg), "already answered") {
					t.Errorf("second answer: %s %s", again.Status, msg)
				}
				if st2 := tb.State(t, "local", chat); !reflect.DeepEqual(st2.PendingInputs, st.PendingInputs) || st2.Seq != st.Seq {
					t.Errorf("the refused answer changed the chat: %+v", st2.PendingInputs)
				}

				// The worker resumes the reply: it ends the tool call with the
				// answer and writes the rest.
				if _, err := tb.Pool.Exec(ctx, `SELECT prompt_id FROM convo.claim_prompt('w1', 30)`); err != nil {
					t.Fatal(err)
				}
				tb.StartPrompt(t, uuid.MustParse(prompt))
				if c.kind == "approval" {
					_, err = tb.Pool.Exec(ctx, `SELECT convo.fail_tool_call($1, 'denied: not to that address')`, call)
				} else {
					_, err = tb.Pool.Exec(ctx, `SELECT convo.complete_tool_call($1, $2)`, call, "done")
				}
				if err != nil {
					t.Fatal(err)
				}
				text := tb.StartBlock(t, uuid.MustParse(prompt), "text", "{}")
				tb.AppendText(t, text, "All set.")
				tb.EndBlock(t, text)
				tb.CompletePrompt(t, uuid.MustParse(prompt))
				rest := resumed.rest(t)
				if got, want := chunkTypes(rest), c.resumedTool+" finish-step start-step text-start text-delta text-end finish-step finish [DONE]"; !strings.HasSuffix(got, want) {
					t.Fatalf("resumed stream:\n%s\nwant it to end\n%s", got, want)
				}
				resumed.save(t, dir, c.kind+"-2-resumed")
			})
		}
	})
	if t.Failed() {
		return
	}

	var report verifierReport
	apitest.RunVerifier(t, "aisdk-verify/verify.mjs", "ai", &report, "AISDK_RECORDINGS="+dir)
	if len(report.Recordings) != 2*len(cases) {
		t.Fatalf("the verifier read %d recordings, want %d", len(report.Recordings), 2*len(cases))
	}
	for _, rec := range report.Recordings {
		name := strings.TrimSuffix(filepath.Base(rec.File), ".sse")
		if len(rec.SchemaErrors) > 0 || rec.ReadError != nil || len(rec.StreamErrors) > 0 || rec.Message == nil {
			t.Errorf("%s (%d chunks): schema %v; read %v; stream errors %q", name, rec.Chunks, rec.SchemaErrors,
				apitest.Deref(rec.ReadError), rec.StreamErrors)
			continue
		}
		parts, _ := rec.Message["parts"].([]any)
		var tool map[string]any
		for _, p := range parts {
			if m := p.(map[string]any); m["type"] == "dynamic-tool" {
				tool = m
			}
		}
		var c pauseCase
		for _, cc := range cases {
			if strings.HasPrefix(name, cc.kind+"-") {
				c = cc
			}
		}
		if strings.HasSuffix(name, "-1-paused") {
			wantState := map[string]string{"approval": "approval-requested"}[c.kind]
			if wantState == "" {
				wantState = "input-available"
			}
			if tool["state"] != wantState || (c.kind != "approval" && tool["providerExecuted"] != false) {
				t.Errorf("%s: the paused tool part %v, want %s", name, tool, wantState)
			}
			// What useChat loads while the prompt waits is what it folded.
			var loaded any
			b, err := os.ReadFile(filepath.Join(dir, name+".loaded.json"))
			if err != nil || json.Unmarshal(b, &loaded) != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got, want := normalized(t, loaded), normalized(t, rec.Message); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: /messages serves\n%v\nthe stream folded into\n%v", name, got, want)
			}
			continue
		}
		if tool["state"] != c.wantState || len(parts) < 2 || parts[len(parts)-1].(map[string]any)["text"] != "All set." {
			t.Errorf("%s: the resumed message %v", name, rec.Message)
		}
	}
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAISDKDemoApproval runs the demo worker's approval (a message
// starting with /approve) through useChat's requests: the reply's stream
// ends at the approval request, and approving it in the next POST streams
// the tool's run and the rest of the reply.
func TestAISDKDemoApproval(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Workers: true})
	chat := uuid.New()
	post := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, chatBody(chat.String(), "submit-message", "/approve publish the note"))
	chunks := post.rest(t)
	types := chunkTypes(chunks)
	if !strings.Contains(types, "tool-approval-request") || !strings.HasSuffix(types, "finish [DONE]") ||
		chunks[len(chunks)-2]["finishReason"] != "tool-calls" {
		t.Fatalf("paused stream: %s", types)
	}
	loaded := normalized(t, uiMessagesOf(t, tb.URL, nil, chat.String())).([]any)
	reply := loaded[len(loaded)-1].(map[string]any)
	var approval string
	for _, p := range reply["parts"].([]any) {
		if part := p.(map[string]any); part["state"] == "approval-requested" {
			part["state"] = "approval-responded"
			a := part["approval"].(map[string]any)
			a["approved"], approval = true, a["id"].(string)
		}
	}
	if approval == "" {
		t.Fatalf("no approval-requested part in %v", reply)
	}
	body := map[string]any{"id": chat.String(), "trigger": "submit-message", "messageId": reply["id"], "messages": loaded}
	rest := openUI(t, "POST", tb.URL+"/v1/ai-sdk/chat", nil, body).rest(t)
	if got := chunkTypes(rest); !strings.HasPrefix(got, "start tool-approval-response tool-output-available") ||
		!strings.HasSuffix(got, "finish [DONE]") || rest[len(rest)-2]["finishReason"] != "stop" {
		t.Fatalf("resumed stream: %s", got)
	}
	if st := tb.State(t, "local", chat); string(st.Messages[1].Status) != "completed" {
		t.Errorf("the reply: %s", st.Messages[1].Status)
	}
}
