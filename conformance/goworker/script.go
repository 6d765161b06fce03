package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/convo-dev/convo/worker"
)

// provider is the scripted model's name, the runner's default provider.
const provider = "conformance"

// script is a user's message to the scripted model: the rounds it plays,
// round n on its nth call for a prompt.
type script struct {
	Rounds [][]step `json:"rounds"`
}

// step is one step of a round; exactly one field is set.
type step struct {
	Text      *string       `json:"text,omitempty"`
	Reasoning *string       `json:"reasoning,omitempty"`
	JSON      *string       `json:"json,omitempty"`
	ToolCall  *toolCallStep `json:"toolCall,omitempty"`
	SleepMs   *int          `json:"sleepMs,omitempty"`
	Hang      *bool         `json:"hang,omitempty"`
	Error     *string       `json:"error,omitempty"`
	// Attachments streams, as text, one line per file of the user's
	// message, read from its bytes (acknowledgement).
	Attachments *bool `json:"attachments,omitempty"`
}

type toolCallStep struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// parseScript reads a script, refusing unknown fields and steps that are
// not exactly one of the known ones, naming where.
func parseScript(text string) (script, error) {
	var s script
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("the user's message is not a conformance script: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return s, errors.New("the user's message is not a conformance script: text after its JSON object")
	}
	if len(s.Rounds) == 0 {
		return s, errors.New("conformance script: rounds is empty")
	}
	for r, round := range s.Rounds {
		for i, st := range round {
			n := 0
			for _, set := range []bool{st.Text != nil, st.Reasoning != nil, st.JSON != nil, st.ToolCall != nil,
				st.SleepMs != nil, st.Hang != nil, st.Error != nil, st.Attachments != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				return s, fmt.Errorf("conformance script: rounds[%d][%d]: want exactly one of text, reasoning, json, toolCall, sleepMs, hang, error, attachments; got %d", r, i, n)
			}
			if tc := st.ToolCall; tc != nil && (tc.ID == "" || tc.Name == "" || !json.Valid(tc.Input)) {
				return s, fmt.Errorf("conformance script: rounds[%d][%d].toolCall: want an id, a name and an input object", r, i)
			}
			if st.Attachments != nil && !*st.Attachments {
				return s, fmt.Errorf("conformance script: rounds[%d][%d].attachments: want true", r, i)
			}
			if st.SleepMs != nil && *st.SleepMs < 0 {
				return s, fmt.Errorf("conformance script: rounds[%d][%d].sleepMs: want 0 or more, got %d", r, i, *st.SleepMs)
			}
		}
	}
	return s, nil
}

// scriptedModel plays the script in the last user message: the suite's
// model, the same in every runtime (conformance/README.md, "The scripted
// model").
type scriptedModel struct{}

// Stream implements worker.Model.
func (scriptedModel) Stream(ctx context.Context, req worker.Request) iter.Seq2[worker.Event, error] {
	return func(yield func(worker.Event, error) bool) {
		s, err := parseScript(req.LastUserText())
		if err != nil {
			yield(nil, err)
			return
		}
		round := roundOf(req)
		if round >= len(s.Rounds) {
			yield(nil, fmt.Errorf("conformance script: the model was called for round %d, the script has %d", round, len(s.Rounds)))
			return
		}
		p := &player{ctx: ctx, yield: yield, files: req.LastUserFiles()}
		for _, st := range s.Rounds[round] {
			if !p.play(st) {
				return
			}
		}
		reason := worker.FinishStop
		if p.toolCalls {
			reason = worker.FinishToolCalls
		}
		yield(worker.Finish{Reason: reason}, nil)
	}
}

// roundOf is the round a request asks for: the assistant's turns since
// the last user message (each round that called tools left one).
func roundOf(req worker.Request) int {
	n := 0
	for _, m := range slices.Backward(req.Messages) {
		if m.Role == worker.RoleUser {
			break
		}
		if m.Role == worker.RoleAssistant {
			n++
		}
	}
	return n
}

// player streams one round's steps as parts: consecutive pieces of one
// kind share an output item (a block); another kind, or a tool call,
// starts the next.
type player struct {
	ctx       context.Context
	yield     func(worker.Event, error) bool
	index     int
	kind      string // of the open item; "" when none is open
	toolCalls bool
	files     []worker.File // of the user's message
}

// play runs one step; false once the stream must end.
func (p *player) play(st step) bool {
	switch {
	case st.Text != nil:
		return p.piece("text", worker.MessageChunk(*st.Text))
	case st.Reasoning != nil:
		return p.piece("reasoning", worker.ReasoningChunk(*st.Reasoning))
	case st.JSON != nil:
		return p.piece("json", worker.StructuredChunk(*st.JSON))
	case st.ToolCall != nil:
		if !p.close() {
			return false
		}
		tc := st.ToolCall
		p.toolCalls = true
		var args bytes.Buffer
		_ = json.Compact(&args, tc.Input) // valid: parseScript checked it
		ok := p.yield(worker.Part{Index: p.index, Chunk: worker.ToolCallStart{ID: tc.ID, Name: tc.Name}}, nil) &&
			p.yield(worker.Part{Index: p.index, Chunk: worker.ToolCallArgs(args.String())}, nil) &&
			p.yield(worker.Flush{Index: p.index}, nil)
		p.index++
		return ok
	case st.SleepMs != nil:
		t := time.NewTimer(time.Duration(*st.SleepMs) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-p.ctx.Done():
			p.yield(worker.Finish{Reason: worker.FinishCancelled}, nil)
			return false
		}
	case st.Hang != nil:
		<-p.ctx.Done()
		p.yield(worker.Finish{Reason: worker.FinishCancelled}, nil)
		return false
	case st.Error != nil:
		p.yield(nil, errors.New(*st.Error))
		return false
	case st.Attachments != nil:
		text, err := acknowledge(p.ctx, p.files)
		if err != nil {
			p.yield(nil, err)
			return false
		}
		return p.piece("text", worker.MessageChunk(text))
	}
	return true
}

// acknowledge is the attachments step's text: for each file, in order,
// "You attached <filename> (<media type without parameters>, <size>
// bytes)", then for a text/* file `; its first line: "<line>"` (its
// bytes up to the first newline, within the first 64 KiB), then ".";
// the lines joined by newlines.
func acknowledge(ctx context.Context, files []worker.File) (string, error) {
	var lines []string
	for _, f := range files {
		base, _, _ := strings.Cut(f.MediaType, ";")
		base = strings.TrimSpace(base)
		line := fmt.Sprintf("You attached %s (%s, %d bytes)", f.Filename, base, f.Size)
		if strings.HasPrefix(base, "text/") {
			data, _, err := f.Read(ctx, 64<<10)
			if err != nil {
				return "", err
			}
			first, _, _ := bytes.Cut(data, []byte("\n"))
			line += `; its first line: "` + strings.TrimSuffix(string(first), "\r") + `"`
		}
		lines = append(lines, line+".")
	}
	return strings.Join(lines, "\n"), nil
}

// piece streams a chunk of kind, opening an item for it unless the open
// one is of that kind.
func (p *player) piece(kind string, c worker.Chunk) bool {
	if p.kind != kind {
		if !p.close() {
			return false
		}
		p.kind = kind
	}
	return p.yield(worker.Part{Index: p.index, Chunk: c}, nil)
}

// close flushes the open item, if any.
func (p *player) close() bool {
	if p.kind == "" {
		return true
	}
	ok := p.yield(worker.Flush{Index: p.index}, nil)
	p.index++
	p.kind = ""
	return ok
}

// echoParameters is the input schema of echo and guarded_echo.
var echoParameters = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)

// echo returns its input's text.
func echo(_ context.Context, in struct {
	Text string `json:"text"`
}, _ io.Writer) (string, error) {
	return in.Text, nil
}

// echoTool is the suite's tool that needs nobody: it returns its input's
// text.
func echoTool() worker.Tool {
	return worker.NewTool("echo", "Returns its input's text.", echoParameters, echo)
}

// guardedEchoTool is echo behind the user's approval: every call pauses
// the prompt until the user approves or denies it (conformance/README.md,
// Pauses), and runs only once approved.
func guardedEchoTool() worker.Tool {
	t := worker.NewTool("guarded_echo", "Returns its input's text, once the user approves the call.", echoParameters, echo)
	t.NeedsApproval = true
	return t
}
