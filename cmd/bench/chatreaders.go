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
	// Via is how each reader follows its conversation: "sse" or "connect".
	Via string `json:"via"`
	// IDs are the conversations, one reader and one message each.
	IDs []string `json:"ids"`
	// CapMS bounds every reply, from "go": a reply not completed by then
	// is unfinished.
	CapMS int64 `json:"cap_ms"`
}

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
	LagP99BySecond []float64      `json:"lag_p99_by_s"`
	Deltas         int64          `json:"deltas"`
	WallS          float64        `json:"wall_s"`
	Errors         map[string]int `json:"errors"`
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
	if err := json.Unmarshal(line, &job); err != nil || len(job.IDs) == 0 || (job.Via != "sse" && job.Via != "connect") {
		return fmt.Errorf("bad job %q: %v", line, err)
	}
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
	for i, id := range job.IDs {
		c := &chatReader{id: id, via: job.Via}
		readers[i] = c
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
			c.follow(ctx, body, sendClient, url, time.Duration(job.CapMS)*time.Millisecond)
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
	id, via string

	sent, first, done time.Time
	gaps, lags        []int64     // ns
	lagAt             []time.Time // when each of lags was received
	lastDelta         time.Time
	chars, deltas     int64

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
		}
	} else {
		body, _ := json.Marshal(map[string]string{"conversationId": c.id})
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
		if err := sendMessage(ctx, send, url, c.id); err != nil {
			c.fail("SendMessage: " + err.Error())
			cancel()
		}
	}()
	var err error
	if c.via == "sse" {
		err = c.readSSE(body)
	} else {
		err = c.readConnect(body)
	}
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

// sendMessage is SendMessage in the Connect protocol with JSON, as
// connect-web sends it.
func sendMessage(ctx context.Context, client *http.Client, url, id string) error {
	body, _ := json.Marshal(map[string]string{"conversationId": id, "text": "Explain streaming in detail"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+convov1connect.ConversationServiceSendMessageProcedure, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
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
		if c.event(kind, msg, tr.t) {
			return nil
		}
	}
}

// connectKinds are the event kinds the reader acts on, as their JSON
// keys; a key with its quotes cannot occur inside a JSON string.
var connectKinds = []string{"blockDelta", "promptCompleted", "promptFailed", "promptCancelled", "snapshot"}

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
		if i := bytes.Index(data, []byte(`"content":"`)); i >= 0 {
			c.chars += int64(jsonStringLen(data[i+len(`"content":"`):]))
		}
	case "promptCompleted":
		c.done = t
		return true
	case "promptFailed", "promptCancelled":
		msg, _ := jsonString(data, `"error":"`)
		c.fail(strings.TrimSpace(kind + " " + msg))
		return true
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
	var gaps, lags, firsts []int64
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
	return res
}

// msf is d in milliseconds, to a tenth of a millisecond.
func msf(d time.Duration) float64 { return round1(float64(d) / float64(time.Millisecond)) }

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
