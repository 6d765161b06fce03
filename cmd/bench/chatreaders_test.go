package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// TestChatReaderResumes runs a reader that sends first against a server
// whose first stream ends after one delta: the reader resumes where it
// was (SSE: Last-Event-ID after the server's retry delay; Connect:
// afterSeq, the last seq), with its token, and finishes at promptCompleted.
func TestChatReaderResumes(t *testing.T) {
	t.Parallel()
	for _, via := range chatVias {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var opens []string // the resume point of each open
			var auth []string
			mux := http.NewServeMux()
			mux.HandleFunc(convov1connect.ConversationServiceSendMessageProcedure, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				auth = append(auth, r.Header.Get("Authorization"))
				mu.Unlock()
				w.Write([]byte(`{}`))
			})
			created := time.Now().UTC().Format(time.RFC3339Nano)
			mux.HandleFunc("GET /v1/conversations/c1/events", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				opens = append(opens, r.Header.Get("Last-Event-ID"))
				n := len(opens)
				mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				if n == 1 {
					fmt.Fprintf(w, "retry: 20\n\nid: 3\nevent: snapshot\ndata: {\"seq\":\"3\"}\n\nid: 4\nevent: blockDelta\ndata: {\"seq\":\"4\",\"createdAt\":%q,\"blockDelta\":{\"content\":\"ab\"}}\n\n", created)
					return // ended early
				}
				fmt.Fprintf(w, "retry: 20\n\nid: 5\nevent: blockDelta\ndata: {\"seq\":\"5\",\"createdAt\":%q,\"blockDelta\":{\"content\":\"c\"}}\n\nid: 6\nevent: promptCompleted\ndata: {\"seq\":\"6\",\"promptCompleted\":{}}\n\n", created)
			})
			mux.HandleFunc(convov1connect.ConversationServiceStreamConversationProcedure, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var req struct {
					AfterSeq string `json:"afterSeq"`
				}
				if len(b) > 5 {
					json.Unmarshal(b[5:], &req) //nolint:errcheck // an empty resume point shows
				}
				mu.Lock()
				opens = append(opens, req.AfterSeq)
				n := len(opens)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/connect+json")
				env := func(flags byte, s string) {
					w.Write(binary.BigEndian.AppendUint32([]byte{flags}, uint32(len(s))))
					io.WriteString(w, s)
				}
				if n == 1 {
					env(0, `{"snapshot":{"seq":"3","messages":[{"role":"user","status":"completed"}]}}`)
					env(0, fmt.Sprintf(`{"event":{"seq":"4","createdAt":%q,"blockDelta":{"content":"ab"}}}`, created))
					env(2, `{"error":{"code":"unavailable","message":"fell behind"}}`)
					return
				}
				env(0, fmt.Sprintf(`{"event":{"seq":"5","createdAt":%q,"blockDelta":{"content":"c"}}}`, created))
				env(0, `{"event":{"seq":"6","promptCompleted":{}}}`)
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()

			c := &chatReader{id: "c1", via: via, token: "tok"}
			c.sendThenFollow(t.Context(), srv.Client(), srv.Client(), srv.URL, 10*time.Second)
			if msg := c.failed(); msg != "" || c.done.IsZero() {
				t.Fatalf("reader failed: %q (done %v)", msg, c.done)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []string{"", "4"} // no resume point on the first open
			if fmt.Sprint(opens) != fmt.Sprint(want) || c.resumes != 1 {
				t.Errorf("opens resumed from %q (%d resumes), want %q", opens, c.resumes, want)
			}
			if fmt.Sprint(auth) != "[Bearer tok]" {
				t.Errorf("SendMessage authorization %q", auth)
			}
			if c.deltas != 2 || c.chars != 3 || c.answered.IsZero() || c.first.Before(c.answered) {
				t.Errorf("deltas %d, chars %d, answered %v, first %v", c.deltas, c.chars, c.answered, c.first)
			}
			if via == "sse" && c.retry != 20*time.Millisecond {
				t.Errorf("retry %v, want the server's 20ms", c.retry)
			}
		})
	}
}

// TestChatReaderSnapshotEnds: a reader that subscribes after its reply
// ended learns it from the snapshot (completed, or failed with its
// error), and takes the snapshot's seq as its resume point.
func TestChatReaderSnapshotEnds(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := &chatReader{lastSeq: -1}
	if c.snapshot([]byte(`{"seq":"9","messages":[{"role":"user","status":"completed"},{"role":"assistant","status":"processing"}]}`), now) || c.lastSeq != 9 {
		t.Errorf("a reply in progress ended the reader, or seq %d", c.lastSeq)
	}
	if !c.snapshot([]byte(`{"seq":"12","messages":[{"role":"assistant","status":"completed"}]}`), now) || !c.done.Equal(now) || c.lastSeq != 12 {
		t.Errorf("a completed reply: done %v, seq %d", c.done, c.lastSeq)
	}
	f := &chatReader{}
	if !f.snapshot([]byte(`{"messages":[{"role":"assistant","status":"failed","error":"boom"}]}`), now) || f.failed() != "message failed boom" || f.lastSeq != 0 {
		t.Errorf("a failed reply: %q, seq %d", f.failed(), f.lastSeq)
	}
}

// TestReadPeerChatResults: the peer's lines are found by reply count and
// reader (none: post), a later line winning, log lines skipped.
func TestReadPeerChatResults(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/peer.jsonl"
	lines := "peer: starting\n" +
		`{"replies":100,"finished":1,"first_delta_p99_ms":5}` + "\n" +
		`{"replies":100,"finished":100,"first_delta_p99_ms":7,"reader":"post"}` + "\n" +
		`{"replies":100,"finished":99,"first_delta_p50_ms":3,"reader":"resume"}` + "\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	peer, err := readPeerChatResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if p := peer[peerChatKey{100, "post"}]; p.Finished != 100 || p.FirstP99 != 7 {
		t.Errorf("post: %+v", p)
	}
	if p := peer[peerChatKey{100, peerReaders[chatSendFirst]}]; p.Finished != 99 || p.FirstP50 != 3 {
		t.Errorf("resume: %+v", p)
	}
	if len(peer) != 2 {
		t.Errorf("%d lines kept, want 2", len(peer))
	}
	if err := os.WriteFile(path, []byte("no JSON here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readPeerChatResults(path); err == nil {
		t.Error("a file without lines read")
	}
}

// TestChatTokens: the bench's tokens pass cmd/api's HS256 verifier, as
// one user for all replies or a user each.
func TestChatTokens(t *testing.T) {
	t.Parallel()
	v := auth.NewHS256("a-secret")
	for users, want := range map[string][]string{chatOneUser: {"bench", "bench", "bench"}, chatUserPerReply: {"bench-0", "bench-1", "bench-2"}} {
		tokens, err := chatTokens("a-secret", 3, users)
		if err != nil {
			t.Fatal(err)
		}
		var subs []string
		for _, tok := range tokens {
			sub, err := v.Verify(t.Context(), tok)
			if err != nil {
				t.Fatalf("%s: %v", users, err)
			}
			subs = append(subs, sub)
		}
		if fmt.Sprint(subs) != fmt.Sprint(want) {
			t.Errorf("%s: users %v, want %v", users, subs, want)
		}
	}
	if tokens, _ := chatTokens("another", 1, chatOneUser); tokens != nil {
		if _, err := v.Verify(t.Context(), tokens[0]); err == nil {
			t.Error("a token of another secret verified")
		}
	}
}

// TestStageBreakdown: the server's stages (by prompt) join the readers'
// times (by conversation); a stage counts only the replies with both of
// its points; a prompt of a conversation not measured is left out.
func TestStageBreakdown(t *testing.T) {
	t.Parallel()
	p1, p2, other := uuid.New(), uuid.New(), uuid.New()
	ms := func(v int64) int64 { return 1_000_000_000_000 + v*int64(time.Millisecond) }
	var dump firstDeltaDump
	if err := json.Unmarshal([]byte(fmt.Sprintf(`{"enabled":true,"prompts":[
		{"prompt_id":%q,"stages":{"claimed":%d,"started":%d,"produced":%d,"inserted":%d,"notified":%d,"read":%d,"dequeued":%d}},
		{"prompt_id":%q,"stages":{"claimed":%d,"started":%d}},
		{"prompt_id":%q,"stages":{"claimed":%d}}]}`,
		p1, ms(10), ms(20), ms(25), ms(40), ms(42), ms(45), ms(46),
		p2, ms(30), ms(50),
		other, ms(1))), &dump); err != nil {
		t.Fatal(err)
	}
	of := map[uuid.UUID]string{p1: "c1", p2: "c2", other: "elsewhere"}
	timings := []readerTiming{
		{ID: "c1", Sent: ms(0), Answered: ms(8), First: ms(50)},
		{ID: "c2", Sent: ms(0), Answered: ms(12)}, // no first delta
	}
	got := map[string]ChatStageFigure{}
	for _, f := range stageBreakdown(dump, of, timings) {
		got[f.Stage] = f
	}
	for stage, want := range map[string]ChatStageFigure{
		"send":      {N: 2, P50: 8, P99: 12},
		"claim":     {N: 2, P50: 10, P99: 30},
		"start":     {N: 2, P50: 10, P99: 20},
		"model":     {N: 1, P50: 15, P99: 15}, // from the claim: the model runs while the start is written
		"worker":    {N: 1, P50: 30, P99: 30},
		"batch":     {N: 1, P50: 15, P99: 15},
		"notify":    {N: 1, P50: 2, P99: 2},
		"hub read":  {N: 1, P50: 3, P99: 3},
		"to stream": {N: 1, P50: 1, P99: 1},
		"write":     {N: 1, P50: 4, P99: 4},
		"total":     {N: 1, P50: 50, P99: 50},
	} {
		want.Stage = stage
		if got[stage] != want {
			t.Errorf("%s: %+v, want %+v", stage, got[stage], want)
		}
	}
	if len(got) != len(chatStages) {
		t.Errorf("%d stages, want %d", len(got), len(chatStages))
	}
}
