package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// chatReadersEnv, when set (to the server's URL), makes the bench binary
// the chat measurement's reader process: see runChatReaders.
const chatReadersEnv = "CONVO_BENCH_CHAT_READERS"

// chatReadersJob is what the chat measurement tells its reader process,
// as one JSON line on its stdin.
type chatReadersJob struct {
	// Via is how each reader follows its conversation: "sse", "connect" or
	// "openai".
	Via string `json:"via"`
	// IDs are the conversations, one reader and one message each.
	IDs []string `json:"ids"`
	// CapMS bounds every reply, from "go": a reply not completed by then
	// is unfinished.
	CapMS int64 `json:"cap_ms"`
	// Order is chatReadersFirst (empty too) or chatSendFirst.
	Order string `json:"order,omitempty"`
	// Tokens, when set, are the bearer tokens of each conversation's user,
	// in the order of IDs.
	Tokens []string `json:"tokens,omitempty"`
}

// The orders of a chat measurement's start. With chatReadersFirst every
// reader has its snapshot before any message is sent; with chatSendFirst a
// reader sends first and subscribes once SendMessage has answered (a late
// joiner, a tab reloaded, a reconnect storm), and resumes as a browser
// would when its stream ends before the reply: SSE with Last-Event-ID after
// the server's retry delay, as EventSource does; StreamConversation with
// afterSeq, its last seq.
const (
	chatReadersFirst = "readers-first"
	chatSendFirst    = "send-first"
)

// maxChatResumes bounds one reader's resumes: past them its reply fails.
const maxChatResumes = 20

// chatReadersResult is what the reader process measured: the reader
// fields of ChatResult.
type chatReadersResult struct {
	Replies       int     `json:"replies"`
	Finished      int     `json:"finished"`
	MeanReplyS    float64 `json:"mean_reply_s"`
	GapP50        float64 `json:"gap_p50_ms"`
	GapP99        float64 `json:"gap_p99_ms"`
	GapMax        float64 `json:"gap_max_ms"`
	LagP50        float64 `json:"lag_p50_ms"`
	LagP99        float64 `json:"lag_p99_ms"`
	CharsPerDelta float64 `json:"chars_per_delta"`
	FirstDeltaP50 float64 `json:"first_delta_p50_ms"`
	FirstDeltaP99 float64 `json:"first_delta_p99_ms"`
	// LagP99BySecond is the lag p99 (ms) of the deltas received in each
	// second of the run, from the first message sent: where the tail is.
	LagP99BySecond []float64 `json:"lag_p99_by_s"`
	// SendP50 and SendP99 are SendMessage's own latency: from sending it
	// to its answer.
	SendP50 float64 `json:"send_p50_ms"`
	SendP99 float64 `json:"send_p99_ms"`
	// Resumes counts the streams reopened after ending before their
	// reply's end (chatSendFirst only).
	Resumes int            `json:"resumes"`
	Deltas  int64          `json:"deltas"`
	WallS   float64        `json:"wall_s"`
	Errors  map[string]int `json:"errors"`
	// Timings are each reply's client-side times, which the parent
	// joins with the server's (the first-delta breakdown) and drops.
	Timings []readerTiming `json:"timings,omitempty"`
}

// readerTiming is one reply's client-side times, in Unix nanoseconds (0:
// did not happen).
type readerTiming struct {
	ID string `json:"id"`
	// Sent is when SendMessage was sent, Answered when its answer came,
	// First when the reply's first (not replayed) blockDelta was read.
	Sent     int64 `json:"sent"`
	Answered int64 `json:"answered,omitempty"`
	First    int64 `json:"first,omitempty"`
}

// runChatReaders is the reader process of the chat measurement. It reads a
// chatReadersJob from in, opens one reader per conversation (each on its
// own HTTP/1.1 connection, as a browser tab: SSE, or StreamConversation in
// the Connect protocol with JSON), and once every reader has its snapshot
// writes "ready". At "go" it sends one message into each conversation at
// once (SendMessage, each on a new connection), follows every reply until
// its promptCompleted or the cap, and writes one JSON line: a
// chatReadersResult. Receive times are taken once per socket read, before
// parsing. A failure is written as "error <message>".
func runChatReaders(ctx context.Context, url string, in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read the job: %w", err)
	}
	var job chatReadersJob
	if err := json.Unmarshal(line, &job); err != nil || len(job.IDs) == 0 || !slices.Contains(chatVias, job.Via) ||
		(job.Order != "" && job.Order != chatReadersFirst && job.Order != chatSendFirst) || (job.Tokens != nil && len(job.Tokens) != len(job.IDs)) {
		return fmt.Errorf("bad job %q: %v", line, err)
	}
	sendFirst := job.Order == chatSendFirst
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// A tab's stream holds its own connection (HTTP/1.1 carries one
	// response at a time); a send opens a new one, as the peer's client.
	readTransport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: -1,
		DisableCompression:  true,
		Protocols:           http1Only(),
	}
	defer readTransport.CloseIdleConnections()
	sendClient := &http.Client{Transport: &http.Transport{
		DialContext:       (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		DisableKeepAlives: true,
		Protocols:         http1Only(),
	}, Timeout: time.Duration(job.CapMS) * time.Millisecond}
	readClient := &http.Client{Transport: readTransport}

	readers := make([]*chatReader, len(job.IDs))
	var ready, running sync.WaitGroup
	var openErr error
	var errMu sync.Mutex
	start := make(chan struct{})
	dial := make(chan struct{}, 64) // bounded parallel opens, as tabs opening
	limit := time.Duration(job.CapMS) * time.Millisecond
	for i, id := range job.IDs {
		c := &chatReader{id: id, via: job.Via}
		if job.Tokens != nil {
			c.token = job.Tokens[i]
		}
		readers[i] = c
		if sendFirst || c.via == "openai" {
			running.Go(func() {
				select {
				case <-start:
				case <-ctx.Done():
					return
				}
				if c.via == "openai" {
					c.respond(ctx, readClient, url, limit)
				} else {
					c.sendThenFollow(ctx, readClient, sendClient, url, limit)
				}
			})
			continue
		}
		ready.Add(1)
		running.Go(func() {
			dial <- struct{}{}
			body, err := c.open(ctx, readClient, url)
			<-dial
			ready.Done()
			if err != nil {
				errMu.Lock()
				openErr = errors.Join(openErr, err)
				errMu.Unlock()
				return
			}
			defer body.Close()
			select {
			case <-start:
			case <-ctx.Done():
				return
			}
			c.follow(ctx, body, sendClient, url, limit)
		})
	}
	ready.Wait()
	if openErr != nil {
		cancel()
		running.Wait()
		fmt.Fprintf(out, "error %s\n", strings.ReplaceAll(openErr.Error(), "\n", "; "))
		return openErr
	}
	fmt.Fprintln(out, "ready")
	cmd, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(cmd) != "go" {
		return fmt.Errorf("want go, got %q (%v)", cmd, err)
	}
	t0 := time.Now()
	close(start)
	running.Wait()
	res := summarizeChat(readers, time.Since(t0))
	b, _ := json.Marshal(res)
	fmt.Fprintln(out, string(b))
	return nil
}

// chatReader is one tab: its stream, its message, what it received.
type chatReader struct {
	id, via, token string

	sent, answered time.Time
	first, done    time.Time
	gaps, lags     []int64     // ns
	lagAt          []time.Time // when each of lags was received
	lastDelta      time.Time
	chars, deltas  int64
	// lastID is the SSE id of the last event read (where a resume
	// starts), lastSeq the last seq read on StreamConversation (-1: none
	// yet), retry the server's reconnection delay for EventSource.
	lastID  string
	lastSeq int64
	retry   time.Duration
	resumes int

	mu  sync.Mutex // err: the sender and the reader both may fail it
	err string
}

// open starts the reader's stream and reads up to its snapshot.
func (c *chatReader) open(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	var req *http.Request
	var err error
	if c.via == "sse" {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/conversations/"+c.id+"/events", nil)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
			if c.lastID != "" {
				req.Header.Set("Last-Event-ID", c.lastID)
			}
		}
	} else {
		msg := map[string]any{"conversationId": c.id}
		if c.resumes > 0 && c.lastSeq >= 0 {
			msg["afterSeq"] = strconv.FormatInt(c.lastSeq, 10)
		}
		body, _ := json.Marshal(msg)
		frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, url+convov1connect.ConversationServiceStreamConversationProcedure,
			bytes.NewReader(append(frame, body...)))
		if err == nil {
			req.Header.Set("Content-Type", "application/connect+json")
			req.Header.Set("Connect-Protocol-Version", "1")
		}
	}
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("open %s stream: %w", c.via, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		res.Body.Close()
		return nil, fmt.Errorf("open %s stream: HTTP %s: %s", c.via, res.Status, bytes.TrimSpace(b))
	}
	return res.Body, nil
}

// follow sends the reader's message and reads its stream until the
// prompt completes, fails, or the cap passes.
func (c *chatReader) follow(ctx context.Context, body io.ReadCloser, send *http.Client, url string, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { body.Close() })
	defer stop()
	c.sent = time.Now()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		if err := sendMessage(ctx, send, url, c.id, c.token); err != nil {
			c.fail("SendMessage: " + err.Error())
			cancel()
			return
		}
		c.mu.Lock()
		c.answered = time.Now()
		c.mu.Unlock()
	}()
	err := c.read(body)
	if c.done.IsZero() && c.failed() == "" {
		switch {
		case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
			c.fail("no promptCompleted within the cap")
		case err != nil:
			c.fail("read: " + err.Error())
		default:
			c.fail("stream ended before promptCompleted")
		}
	}
	cancel()
	<-sent
}

// read reads the stream body until the reply ends or the stream does.
func (c *chatReader) read(body io.Reader) error {
	if c.via == "sse" {
		return c.readSSE(body)
	}
	return c.readConnect(body)
}

// sendThenFollow sends the reader's message, then, once SendMessage has
// answered, opens its stream and reads it until the prompt completes,
// fails, or the cap passes, resuming (at most maxChatResumes times) when
// the stream ends before.
func (c *chatReader) sendThenFollow(ctx context.Context, read, send *http.Client, url string, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	c.lastSeq = -1
	c.sent = time.Now()
	if err := sendMessage(ctx, send, url, c.id, c.token); err != nil {
		c.fail("SendMessage: " + err.Error())
		return
	}
	c.answered = time.Now()
	for {
		body, err := c.open(ctx, read, url)
		if err != nil {
			if ctx.Err() != nil {
				c.fail("no promptCompleted within the cap")
			} else {
				c.fail(err.Error())
			}
			return
		}
		stop := context.AfterFunc(ctx, func() { body.Close() })
		err = c.read(body)
		stop()
		body.Close()
		if !c.done.IsZero() || c.failed() != "" {
			return
		}
		switch {
		case ctx.Err() != nil:
			c.fail("no promptCompleted within the cap")
			return
		case c.resumes >= maxChatResumes:
			c.fail(fmt.Sprintf("stream ended %d times before promptCompleted (last: %v)", c.resumes+1, err))
			return
		}
		c.resumes++
		select {
		case <-ctx.Done():
		case <-time.After(c.retry):
		}
	}
}

// respond is the reader of the OpenAI Responses API: one POST
// /v1/responses (background, streamed) into the reader's conversation,
// whose answer is the reply's event stream, read until the response ends
// or the cap passes. Its send is answered when the stream's headers come;
// its events carry no commit time, so it measures no lag.
func (c *chatReader) respond(ctx context.Context, client *http.Client, url string, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"model": "demo", "input": chatPrompt, "conversation": c.id, "background": true, "stream": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/responses", bytes.NewReader(body))
	if err != nil {
		c.fail(err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	c.sent = time.Now()
	res, err := client.Do(req)
	if err != nil {
		c.fail("POST /v1/responses: " + err.Error())
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		c.fail(fmt.Sprintf("POST /v1/responses: HTTP %s: %s", res.Status, bytes.TrimSpace(b)))
		return
	}
	c.mu.Lock()
	c.answered = time.Now()
	c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { res.Body.Close() })
	defer stop()
	err = c.readSSE(res.Body)
	if c.done.IsZero() && c.failed() == "" {
		switch {
		case ctx.Err() != nil:
			c.fail("no response.completed within the cap")
		case err != nil:
			c.fail("read: " + err.Error())
		default:
			c.fail("stream ended before response.completed")
		}
	}
}

func (c *chatReader) fail(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == "" {
		c.err = msg
	}
}

func (c *chatReader) failed() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// chatPrompt is every reader's message.
const chatPrompt = "Explain streaming in detail"

// sendMessage is SendMessage in the Connect protocol with JSON, as
// connect-web sends it.
func sendMessage(ctx context.Context, client *http.Client, url, id, token string) error {
	body, _ := json.Marshal(map[string]string{"conversationId": id, "text": chatPrompt})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+convov1connect.ConversationServiceSendMessageProcedure, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		var e struct{ Code, Message string }
		if json.Unmarshal(b, &e) == nil && e.Code != "" {
			return fmt.Errorf("%s: %s", e.Code, e.Message)
		}
		return fmt.Errorf("HTTP %s", res.Status)
	}
	return nil
}

// timedReader records when each read of the socket returned.
type timedReader struct {
	r io.Reader
	t time.Time
}

func (t *timedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.t = time.Now()
	return n, err
}

// readSSE reads the stream's events until the reply ends: the snapshot
// first (which open left unread), then the live events.
func (c *chatReader) readSSE(body io.Reader) error {
	buf := make([]byte, 0, 16<<10)
	chunk := make([]byte, 16<<10)
	for {
		n, err := body.Read(chunk)
		now := time.Now()
		buf = append(buf, chunk[:n]...)
		for {
			i := bytes.Index(buf, []byte("\n\n"))
			if i < 0 {
				break
			}
			ev := buf[:i]
			var kind, data []byte
			for line := range bytes.SplitSeq(ev, []byte("\n")) {
				if v, ok := bytes.CutPrefix(line, []byte("event: ")); ok {
					kind = v
				} else if v, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
					data = v
				} else if v, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
					c.lastID = string(v)
				} else if v, ok := bytes.CutPrefix(line, []byte("retry: ")); ok {
					if ms, err := strconv.Atoi(string(v)); err == nil && ms >= 0 {
						c.retry = time.Duration(ms) * time.Millisecond
					}
				}
			}
			if c.event(string(kind), data, now) {
				return nil
			}
			buf = buf[:copy(buf, buf[i+2:])]
		}
		if err != nil {
			return err
		}
	}
}

// readConnect reads the StreamConversation envelopes until the reply
// ends.
func (c *chatReader) readConnect(body io.Reader) error {
	tr := &timedReader{r: body}
	r := bufio.NewReaderSize(tr, 16<<10)
	var prefix [5]byte
	var msg []byte
	for {
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(prefix[1:])
		if cap(msg) < int(n) {
			msg = make([]byte, n)
		}
		msg = msg[:n]
		if _, err := io.ReadFull(r, msg); err != nil {
			return err
		}
		if prefix[0]&2 != 0 { // the end of the stream: trailers or an error
			if m, ok := jsonString(msg, `"message":"`); ok {
				return fmt.Errorf("stream ended: %s", m)
			}
			return errors.New("stream ended")
		}
		kind := connectKind(msg)
		if kind == "snapshot" {
			msg = snapshotBody(msg)
		} else if seq, ok := jsonString(msg, `"seq":"`); ok {
			if n, err := strconv.ParseInt(seq, 10, 64); err == nil {
				c.lastSeq = n
			}
		}
		if c.event(kind, msg, tr.t) {
			return nil
		}
	}
}

// connectKinds are the event kinds the reader acts on, as their JSON
// keys; a key with its quotes cannot occur inside a JSON string.
var connectKinds = []string{"blockDelta", "promptCompleted", "promptFailed", "promptCancelled", "snapshot"}

// snapshotBody is the Snapshot inside a StreamConversation message (the
// message itself when it holds none).
func snapshotBody(msg []byte) []byte {
	var m struct {
		Snapshot json.RawMessage `json:"snapshot"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Snapshot == nil {
		return msg
	}
	return m.Snapshot
}

func connectKind(msg []byte) string {
	for _, k := range connectKinds {
		if bytes.Contains(msg, []byte(`"`+k+`":`)) {
			return k
		}
	}
	return ""
}

// event takes one event of kind received at t, and reports whether the
// reply is over.
func (c *chatReader) event(kind string, data []byte, t time.Time) bool {
	switch kind {
	case "blockDelta":
		if bytes.Contains(data, []byte(`"replay":true`)) {
			return false // text from before the message: none when all goes well
		}
		c.delta(data, t, `"content":"`)
	case "response.output_text.delta", "response.reasoning_text.delta":
		// Every block's deltas, as blockDelta counts them (the demo's
		// reply starts with reasoning).
		c.delta(data, t, `"delta":"`)
	case "response.completed":
		c.done = t
		return true
	case "response.failed", "response.incomplete", "error":
		msg, _ := jsonString(data, `"message":"`)
		c.fail(strings.TrimSpace(kind + " " + msg))
		return true
	case "promptCompleted":
		c.done = t
		return true
	case "promptFailed", "promptCancelled":
		msg, _ := jsonString(data, `"error":"`)
		c.fail(strings.TrimSpace(kind + " " + msg))
		return true
	case "snapshot":
		return c.snapshot(data, t)
	}
	return false
}

// delta takes one delta received at t, whose text follows key in data.
func (c *chatReader) delta(data []byte, t time.Time, key string) {
	c.deltas++
	if c.first.IsZero() {
		c.first = t
	} else {
		c.gaps = append(c.gaps, int64(t.Sub(c.lastDelta)))
	}
	c.lastDelta = t
	if s, ok := jsonString(data, `"createdAt":"`); ok {
		if at, err := time.Parse(time.RFC3339Nano, s); err == nil {
			c.lags = append(c.lags, int64(t.Sub(at)))
			c.lagAt = append(c.lagAt, t)
		}
	}
	if i := bytes.Index(data, []byte(key)); i >= 0 {
		c.chars += int64(jsonStringLen(data[i+len(key):]))
	}
}

// snapshot takes a snapshot's body (a Snapshot in proto3 JSON) received
// at t: where a StreamConversation resume starts, and the reply's end when
// it ended before the reader subscribed.
func (c *chatReader) snapshot(data []byte, t time.Time) bool {
	var s struct {
		Seq      json.Number `json:"seq"`
		Messages []struct {
			Role, Status, Error string
		} `json:"messages"`
	}
	if json.Unmarshal(data, &s) != nil {
		return false
	}
	if n, err := strconv.ParseInt(strings.Trim(string(s.Seq), `"`), 10, 64); err == nil {
		c.lastSeq = n
	} else if s.Seq == "" {
		c.lastSeq = 0
	}
	for _, m := range s.Messages {
		if m.Role != "assistant" {
			continue
		}
		switch m.Status {
		case "completed":
			c.done = t
			return true
		case "failed", "cancelled":
			c.fail(strings.TrimSpace("message " + m.Status + " " + m.Error))
			return true
		}
	}
	return false
}

// jsonString returns the raw (still escaped) JSON string after key.
func jsonString(data []byte, key string) (string, bool) {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return "", false
	}
	rest := data[i+len(key):]
	for j := 0; j < len(rest); j++ {
		switch rest[j] {
		case '\\':
			j++
		case '"':
			return string(rest[:j]), true
		}
	}
	return "", false
}

// jsonStringLen counts the characters of a JSON string's body up to its
// closing quote: a UTF-8 sequence or an escape is one (a surrogate pair
// written as two \u escapes is two, as JavaScript counts it).
func jsonStringLen(b []byte) int {
	n := 0
	for j := 0; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return n
		case c == '\\':
			if j+1 < len(b) && b[j+1] == 'u' {
				j += 5
			} else {
				j++
			}
			n++
		case c&0xC0 != 0x80:
			n++
		}
	}
	return n
}

// summarizeChat merges the readers' records.
func summarizeChat(readers []*chatReader, wall time.Duration) chatReadersResult {
	res := chatReadersResult{Replies: len(readers), Errors: map[string]int{}, WallS: round2(wall.Seconds())}
	var gaps, lags, firsts, sends []int64
	var replyTotal time.Duration
	var chars int64
	for _, c := range readers {
		gaps = append(gaps, c.gaps...)
		lags = append(lags, c.lags...)
		chars += c.chars
		res.Deltas += c.deltas
		if !c.first.IsZero() && !c.sent.IsZero() {
			firsts = append(firsts, int64(c.first.Sub(c.sent)))
		}
		c.mu.Lock()
		answered := c.answered
		c.mu.Unlock()
		if !answered.IsZero() {
			sends = append(sends, int64(answered.Sub(c.sent)))
		}
		res.Resumes += c.resumes
		if !c.sent.IsZero() {
			res.Timings = append(res.Timings, readerTiming{ID: c.id, Sent: c.sent.UnixNano(), Answered: unixNano(answered), First: unixNano(c.first)})
		}
		if msg := c.failed(); msg != "" {
			res.Errors[msg]++
			continue
		}
		res.Finished++
		replyTotal += c.done.Sub(c.sent)
	}
	if res.Finished > 0 {
		res.MeanReplyS = round2((replyTotal / time.Duration(res.Finished)).Seconds())
	}
	if res.Deltas > 0 {
		res.CharsPerDelta = round1(float64(chars) / float64(res.Deltas))
	}
	var start time.Time
	for _, c := range readers {
		if !c.sent.IsZero() && (start.IsZero() || c.sent.Before(start)) {
			start = c.sent
		}
	}
	var bySecond [][]int64
	for _, c := range readers {
		for i, at := range c.lagAt {
			sec := max(int(at.Sub(start)/time.Second), 0)
			for len(bySecond) <= sec {
				bySecond = append(bySecond, nil)
			}
			bySecond[sec] = append(bySecond[sec], c.lags[i])
		}
	}
	for _, sec := range bySecond {
		res.LagP99BySecond = append(res.LagP99BySecond, msf(summarize(sec).P99))
	}
	g, l, f := summarize(gaps), summarize(lags), summarize(firsts)
	res.GapP50, res.GapP99, res.GapMax = msf(g.P50), msf(g.P99), msf(g.Max)
	res.LagP50, res.LagP99 = msf(l.P50), msf(l.P99)
	res.FirstDeltaP50, res.FirstDeltaP99 = msf(f.P50), msf(f.P99)
	sd := summarize(sends)
	res.SendP50, res.SendP99 = msf(sd.P50), msf(sd.P99)
	return res
}

// unixNano is t in Unix nanoseconds, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// msf is d in milliseconds, to a tenth of a millisecond.
func msf(d time.Duration) float64 { return round1(float64(d) / float64(time.Millisecond)) }

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
