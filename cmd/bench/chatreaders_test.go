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
