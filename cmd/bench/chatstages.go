package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/google/uuid"
)

// The first delta's way, stage by stage: the chat measurement enables the
// server's first-delta timing (package firstdelta, on the admin address)
// before the messages are sent, reads it after the replies, and joins it
// per prompt with the reader's send, SendMessage answer and first receive
// times (one clock: everything runs on this machine).

// chatStage is one stage of the breakdown: from one point to the next.
type chatStage struct {
	Name, From, To, Means string
}

// chatStages are the breakdown's stages. The points are the server's
// (firstdelta.Stage names) and the reader's: sent, answered, received.
var chatStages = []chatStage{
	{"send", "sent", "answered", "SendMessage's own latency (its transaction's commit is inside)"},
	{"claim", "sent", "claimed", "send to the worker's claim returning the prompt: the send's commit, the queued notification, the claim loop's wake-up and claim_prompts"},
	{"start", "claimed", "started", "the worker's batch with start_prompt written (the model runs meanwhile)"},
	{"model", "claimed", "produced", "reading the conversation and the model's first text reaching the writer (while the start is written)"},
	{"worker", "claimed", "inserted", "the claim to the first text's insert: the start, the reads, the model and the batches of both"},
	{"batch", "produced", "inserted", "the first text waiting for its write_batch, until its event's insert (created_at)"},
	{"notify", "inserted", "notified", "the rest of the write_batch, its commit and the notification heard by the hub"},
	{"hub read", "notified", "read", "the hub's wake-up and its read of the log"},
	{"to stream", "read", "dequeued", "fan-out to the subscription until its stream takes the event"},
	{"write", "dequeued", "received", "encoding, the flush, the socket and the reader's read"},
	{"total", "sent", "received", "send to the first delta received (the first delta column)"},
}

// ChatStageFigure is one stage's figures at one size: its p50 and p99 in
// ms over the N replies that have both of its points.
type ChatStageFigure struct {
	Stage string  `json:"stage"`
	N     int     `json:"n"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
}

// firstDeltaDump is the admin address's /debug/first-delta answer.
type firstDeltaDump struct {
	Enabled bool  `json:"enabled"`
	Dropped int64 `json:"dropped"`
	Prompts []struct {
		PromptID uuid.UUID        `json:"prompt_id"`
		Stages   map[string]int64 `json:"stages"`
	} `json:"prompts"`
}

// firstDeltaTiming calls the server's /debug/first-delta with method
// (POST: enable afresh; GET: read).
func firstDeltaTiming(ctx context.Context, adminURL, method string) (firstDeltaDump, error) {
	var d firstDeltaDump
	req, err := http.NewRequestWithContext(ctx, method, adminURL+"/debug/first-delta", nil)
	if err != nil {
		return d, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return d, fmt.Errorf("first-delta timing: %w", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return d, fmt.Errorf("first-delta timing: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return d, fmt.Errorf("first-delta timing: HTTP %s: %s", res.Status, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("first-delta timing: %w", err)
	}
	return d, nil
}

// chatPromptsSQL maps the measured conversations' prompts to them.
const chatPromptsSQL = `SELECT id, conversation_id FROM convo.prompts WHERE conversation_id = ANY($1::uuid[])`

// stageBreakdown joins the server's stages (by prompt) with the readers'
// times (by conversation, through conversationOf) and summarizes each of
// chatStages.
func stageBreakdown(dump firstDeltaDump, conversationOf map[uuid.UUID]string, timings []readerTiming) []ChatStageFigure {
	points := map[string]map[string]int64{} // conversation → point → Unix ns
	for _, t := range timings {
		p := map[string]int64{"sent": t.Sent, "answered": t.Answered, "received": t.First}
		points[t.ID] = p
	}
	for _, pr := range dump.Prompts {
		p, ok := points[conversationOf[pr.PromptID]]
		if !ok {
			continue
		}
		for name, ns := range pr.Stages {
			p[name] = ns
		}
	}
	figures := make([]ChatStageFigure, 0, len(chatStages))
	for _, s := range chatStages {
		var d []int64
		for _, p := range points {
			if from, to := p[s.From], p[s.To]; from != 0 && to != 0 {
				d = append(d, to-from)
			}
		}
		st := summarize(d)
		figures = append(figures, ChatStageFigure{Stage: s.Name, N: len(d), P50: msf(st.P50), P99: msf(st.P99)})
	}
	return figures
}

// chatBreakdown reads the server's first-delta timing and the prompts of
// ids, and returns the breakdown of the readers' timings.
func (m *Main) chatBreakdown(ctx context.Context, adminURL string, ids []string, timings []readerTiming) ([]ChatStageFigure, int64, error) {
	dump, err := firstDeltaTiming(ctx, adminURL, http.MethodGet)
	if err != nil {
		return nil, 0, err
	}
	if !dump.Enabled {
		return nil, 0, fmt.Errorf("first-delta timing: the server's is off")
	}
	rows, err := m.pool.Query(ctx, chatPromptsSQL, ids)
	if err != nil {
		return nil, 0, fmt.Errorf("read the prompts: %w", err)
	}
	defer rows.Close()
	conversationOf := map[uuid.UUID]string{}
	for rows.Next() {
		var prompt, conv uuid.UUID
		if err := rows.Scan(&prompt, &conv); err != nil {
			return nil, 0, err
		}
		conversationOf[prompt] = conv.String()
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read the prompts: %w", err)
	}
	return stageBreakdown(dump, conversationOf, timings), dump.Dropped, nil
}

// printChatStages writes the breakdown of every chat line that has one:
// a row per stage, a column per line.
func printChatStages(w io.Writer, rs []ChatResult) {
	var with []ChatResult
	for _, r := range rs {
		if len(r.FirstDeltaStages) == len(chatStages) {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Chat: where the first delta's time goes (p50 / p99 ms, replies measured)\n\n")
	fmt.Fprintf(w, "The server's first-delta timing (its admin address's /debug/first-delta, enabled for the run) per prompt, joined with the reader's send, SendMessage answer and first receive times; one clock, one machine. ")
	fmt.Fprintf(w, "Each stage's percentiles are its own (they do not add up); a stage counts the replies that have both of its points (a reply whose first delta came in its snapshot, or through the logical feed, has no notification).\n\n")
	fmt.Fprint(w, "| stage | from → to | what it holds |")
	for _, r := range with {
		fmt.Fprintf(w, " %s %s %s %s %d |", r.Feed, r.Via, orDash(r.Order), orDash(r.Users), r.Replies)
	}
	fmt.Fprint(w, "\n|---|---|---|")
	for range with {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for i, s := range chatStages {
		fmt.Fprintf(w, "| %s | %s → %s | %s |", s.Name, s.From, s.To, s.Means)
		for _, r := range with {
			f := r.FirstDeltaStages[i]
			fmt.Fprintf(w, " %s / %s (%d) |", num(f.P50), num(f.P99), f.N)
		}
		fmt.Fprintln(w)
	}
}

// freeAddr returns a loopback address free a moment ago (for a server's
// admin address).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
