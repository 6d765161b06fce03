package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// runTool runs one tool call the model made, streaming its progress as the
// call's output, completes or fails the call, writes its tool_result
// block, and returns what the model is told. A failing tool (bad
// arguments, unknown tool, an error, a panic, a timeout) fails the call and
// tells the model the error; only a failed write or a stop ends the
// prompt.
func (r *run) runTool(c *pendingCall) (string, error) {
	meta := map[string]any{"toolCallId": c.toolCallID.String(), "callId": c.id, "tool": c.name}
	if c.inputKind != "" {
		meta["inputKind"] = c.inputKind
	}
	span := r.round.startTool(c)
	if c.badArgs != "" {
		// Already failed when the arguments were flushed.
		span.end(c.badArgs)
		meta["isError"] = true
		return r.writeResult(meta, "error: "+c.badArgs)
	}

	started := time.Now()
	result, toolErr := r.callTool(c)
	if toolErr != nil {
		span.end(toolErr.Error())
	} else {
		span.end("")
	}
	meta["durationMs"] = time.Since(started).Milliseconds()
	if r.ctx.Err() != nil {
		return "", context.Cause(r.ctx)
	}

	if toolErr != nil {
		return r.endCall(c, meta, "", fmt.Sprintf("tool %s failed: %v", c.name, toolErr))
	}
	return r.endCall(c, meta, result, "")
}

// endCall completes the call with output (cut to MaxToolOutput), or fails
// it when errText is not empty, writes its tool_result block, and returns
// what the model is told: the output, or "error: " and errText.
func (r *run) endCall(c *pendingCall, meta map[string]any, output, errText string) (string, error) {
	if errText != "" {
		if err := r.w.endToolCall(c.toolCallID, "", errText); err != nil {
			return "", err
		}
		meta["isError"] = true
		return r.writeResult(meta, "error: "+errText)
	}
	shown, total := truncate(output, r.p.cfg.MaxToolOutput)
	meta["outputBytes"] = total
	if len(shown) < total {
		meta["truncated"] = true
		shown += fmt.Sprintf("\n… [truncated: %d of %d bytes shown]", len(shown), total)
	}
	if err := r.w.endToolCall(c.toolCallID, shown, ""); err != nil {
		return "", err
	}
	return r.writeResult(meta, shown)
}

// writeResult writes a tool_result block holding text and returns text.
func (r *run) writeResult(meta map[string]any, text string) (string, error) {
	id, err := r.w.startBlock("tool_result", meta)
	if err != nil {
		return "", err
	}
	if err := r.w.appendText(target{id: id}, text); err != nil {
		return "", err
	}
	if err := r.w.endBlock(id, nil); err != nil {
		return "", err
	}
	return text, nil
}

// callTool checks the arguments and runs the tool in its own goroutine,
// bounded by the tool timeout.
func (r *run) callTool(c *pendingCall) (string, error) {
	tool, ok := r.tools.lookup(c.name)
	if !ok {
		return "", fmt.Errorf("there is no tool called %q", c.name)
	}
	if err := validateArgs(r.ctx, tool.schema, c.input); err != nil {
		return "", fmt.Errorf("invalid arguments: %w", err)
	}
	if tool.Run == nil {
		// A client tool (or ask_user) whose call did not wait: it cannot
		// run here.
		return "", fmt.Errorf("%s is run by the client, not by the worker", c.name)
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.p.cfg.ToolTimeout)
	defer cancel()
	progress := &progressWriter{w: r.w, t: target{toolCall: true, id: c.toolCallID}, limit: r.p.cfg.MaxToolOutput}
	type outcome struct {
		result string
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				r.log.Error("tool panicked", "tool", c.name, "panic", v, "stack", string(debug.Stack()))
				done <- outcome{err: fmt.Errorf("the tool crashed: %v", v)}
			}
		}()
		res, err := tool.Run(ctx, c.input, progress)
		done <- outcome{res, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		// The tool may still be running: from now on its progress goes
		// nowhere, so it cannot write to the call once it has ended.
		progress.close()
		if r.ctx.Err() != nil {
			return "", context.Cause(r.ctx)
		}
		return "", fmt.Errorf("no result within %s", r.p.cfg.ToolTimeout)
	}
	if note := progress.close(); note != "" {
		if err := r.w.appendText(progress.t, note); err != nil {
			return "", err
		}
	}
	if o.err == nil && ctx.Err() != nil {
		o.err = fmt.Errorf("no result within %s", r.p.cfg.ToolTimeout)
	}
	return o.result, o.err
}

// progressWriter streams a tool's progress output to its tool call, up to
// limit bytes; it counts the rest.
type progressWriter struct {
	w     *writer
	t     target
	limit int

	mu      sync.Mutex
	shown   int  // bytes streamed
	total   int  // bytes written by the tool
	cut     bool // the limit was reached
	closed  bool
	partial []byte // an incomplete UTF-8 sequence at the end of the last write
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.closed {
		return 0, errors.New("tool output written after the tool returned")
	}
	pw.total += len(b)
	if pw.cut {
		return len(b), nil
	}
	// Never split a character between two deltas: hold back an
	// incomplete one until the rest arrives.
	data := append(pw.partial, b...)
	end := completeUTF8(data)
	pw.partial = append([]byte(nil), data[end:]...)
	text, n := truncate(string(data[:end]), pw.limit-pw.shown)
	if len(text) < n {
		pw.cut = true
	}
	pw.shown += len(text)
	if err := pw.w.appendText(pw.t, strings.ToValidUTF8(text, "\uFFFD")); err != nil {
		return 0, err
	}
	return len(b), nil
}

// close stops the writer; it returns what is left to stream: an invalid
// trailing sequence, and a note saying how much output was cut.
func (pw *progressWriter) close() string {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.closed = true
	if pw.cut {
		return fmt.Sprintf("\n… [output truncated: %d of %d bytes shown]\n", pw.shown, pw.total)
	}
	return strings.ToValidUTF8(string(pw.partial), "\uFFFD")
}

// completeUTF8 returns the length of data without an incomplete UTF-8
// sequence at its end.
func completeUTF8(data []byte) int {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				return i
			}
			break
		}
	}
	return len(data)
}

// truncate cuts s to at most n bytes without splitting a character, and
// returns the cut string and len(s).
func truncate(s string, n int) (string, int) {
	if len(s) <= n {
		return s, len(s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], len(s)
}
