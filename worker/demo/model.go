package demo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"iter"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/convo-dev/convo/worker"
)

// Options configure the demo model.
type Options struct {
	// TokensPerSecond is the pace of its output. Default 40; negative: as
	// fast as it can.
	TokensPerSecond float64
}

// NewModel returns the built-in demo model, which needs no network.
// For each user message it reasons briefly (a reasoning block), calls a
// tool (calculator when the message holds arithmetic, text_stats
// otherwise), and answers in a few hundred tokens of markdown built from
// the message and the tool's result, at a human reading pace. The model
// name and temperature of the prompt's configuration choose its wording
// (and it signs its answer with them), so two configurations answer one
// message differently while one configuration always answers it the same
// way. The user's text is escaped in its markdown. With a responseFormat
// in its configuration it answers with a structured (JSON) block instead.
// It honours maxTokens (finishing with "length"). It acknowledges each file
// of the user's message first, from the file's bytes: "You attached
// notes.txt (text/plain, 1.2 KB); its first line: "…"", an image's size in
// pixels (PNG, JPEG, GIF); an error reading a file fails the reply. It
// reports the usage of its own tokens (demoTokenRE, not a real
// tokenizer's): the input tokens of the request's messages' text and tool
// calls' arguments, the output tokens it streamed, those of its
// reasoning among them; never cached tokens.
func NewModel(opts Options) worker.Model {
	if opts.TokensPerSecond == 0 {
		opts.TokensPerSecond = 40
	}
	return &demoModel{tps: opts.TokensPerSecond}
}

type demoModel struct {
	tps float64
}

// Stream implements Model.
func (d *demoModel) Stream(ctx context.Context, req worker.Request) iter.Seq2[worker.Event, error] {
	return func(yield func(worker.Event, error) bool) {
		e := &demoEmitter{ctx: ctx, yield: yield, tps: d.tps, start: time.Now(), maxTokens: -1}
		if req.Config.MaxTokens != nil {
			e.maxTokens = int(*req.Config.MaxTokens)
		}
		var ok bool
		if last := lastMessage(req); last.Role == worker.RoleTool {
			ok = d.answer(e, req)
		} else {
			ok = d.plan(e, req)
		}
		if ok {
			yield(worker.Finish{Reason: e.finishReason(), Usage: e.usage(req)}, nil)
		}
	}
}

// The commands that, starting a user's message, make the demo model call
// a tool that pauses the reply (see docs/workers.md, "Pauses"): "/approve"
// (publish_note, which needs approval), "/client-tool" (browser_info, run
// by the browser), "/ask" (ask_user). Commands, not words, so that no
// ordinary message pauses by chance.
var (
	approveRE    = regexp.MustCompile(`(?i)^\s*/approve\b`)
	clientToolRE = regexp.MustCompile(`(?i)^\s*/client-tool\b`)
	askRE        = regexp.MustCompile(`(?i)^\s*/ask\b`)
	// callRE is "/call <tool> <arguments JSON>": the demo model calls
	// the named tool (one the prompt's client declared, or any other it
	// is offered) with those arguments ({} when none are given), so that
	// a client's function tools can be tried without a model key.
	callRE = regexp.MustCompile(`(?is)^\s*/call\s+([a-zA-Z0-9_-]{1,64})\s*(.*?)\s*$`)
)

// callTrigger reads a "/call" message: the tool it names and the
// arguments it gives, ok false for another message.
func callTrigger(text string) (tool, args string, ok bool) {
	m := callRE.FindStringSubmatch(text)
	if m == nil {
		return "", "", false
	}
	if m[2] == "" {
		m[2] = "{}"
	}
	return m[1], m[2], true
}

// pauseTrigger is the tool that text asks for by a trigger word, or "".
func pauseTrigger(text string) string {
	switch {
	case approveRE.MatchString(text):
		return "publish_note"
	case clientToolRE.MatchString(text):
		return "browser_info"
	case askRE.MatchString(text):
		return worker.AskUserName
	}
	return ""
}

func lastMessage(req worker.Request) worker.Message {
	if len(req.Messages) == 0 {
		return worker.Message{}
	}
	return req.Messages[len(req.Messages)-1]
}

// plan reasons about the user's message and calls a tool (or, without
// tools, answers at once).
func (d *demoModel) plan(e *demoEmitter, req worker.Request) bool {
	text := req.LastUserText()
	expr := findExpression(text)
	stats := textStats(text)
	var tool string
	var args any
	pause := pauseTrigger(text)
	called, calledArgs, isCall := callTrigger(text)
	switch {
	case isCall:
		tool, args = called, json.RawMessage(calledArgs)
	case pause == "publish_note":
		tool, args = pause, map[string]string{"note": text}
	case pause == "browser_info":
		tool, args = pause, map[string]string{}
	case pause == worker.AskUserName:
		tool, args = pause, askArgs(text)
	case expr != "":
		tool, args = "calculator", map[string]string{"expression": expr}
	default:
		tool, args = "text_stats", map[string]string{"text": text}
	}
	available := false
	for _, t := range req.Tools {
		available = available || t.Name == tool
	}

	var r strings.Builder
	fmt.Fprintf(&r, "The user wrote %d %s", stats.Words, plural(stats.Words, "word", "words"))
	if stats.QuestionSentence {
		r.WriteString(" and asks a question")
	}
	r.WriteString(". ")
	switch {
	case isCall && !available:
		fmt.Fprintf(&r, "It asks me to call %s, but no tool of that name is offered to me, so I will answer from the message alone. ", tool)
	case !available:
		r.WriteString("No tool is available, so I will answer from the message alone. ")
	case isCall:
		fmt.Fprintf(&r, "It asks me to call %s with the arguments it gives; I will call it and say what it answers. ", tool)
	case pause == "publish_note":
		r.WriteString("It asks for something that needs approval: I will publish it as a note with publish_note, which waits for the user to approve. ")
	case pause == "browser_info":
		r.WriteString("It asks for a client tool: browser_info runs in the user's browser, and the reply waits for its result. ")
	case pause == worker.AskUserName:
		r.WriteString("It asks me to ask: I will put a question to the user with ask_user and wait for the answer. ")
	case expr != "":
		fmt.Fprintf(&r, "It contains the arithmetic `%s`; I should compute it with the calculator rather than guess. ", expr)
	default:
		r.WriteString("There is no arithmetic in it, so I will measure the text with text_stats and describe what I find. ")
	}
	if n := len(req.LastUserFiles()); n > 0 {
		fmt.Fprintf(&r, "It comes with %d %s, which I will read and acknowledge. ", n, plural(n, "attachment", "attachments"))
	}
	if turns := countRole(req, worker.RoleUser); turns > 1 {
		fmt.Fprintf(&r, "This is message %d of our conversation, so I can refer back to earlier turns. ", turns)
	}
	r.WriteString(newDemoVoice(req.Config).choose(0,
		"Then I will answer in markdown.",
		"After that I will write the answer in markdown.",
		"Then a short markdown answer, with the result up front."))
	if !e.stream(0, r.String(), func(s string) worker.Chunk { return worker.ReasoningChunk(s) }) {
		return false
	}
	sum := sha256.Sum256([]byte(r.String()))
	if !e.emit(worker.Flush{Index: 0, Metadata: map[string]any{"signature": "demo-" + hex.EncodeToString(sum[:8])}}) {
		return false
	}
	if e.cut {
		return true
	}
	if !available {
		return d.reply(e, req, 1, "", "", "", false) // item 0 was the reasoning
	}

	argJSON, err := json.Marshal(args)
	if err != nil {
		// "/call" arguments that are not JSON: the call carries them as
		// they are, and the runtime fails it (invalid arguments).
		argJSON = []byte(calledArgs)
	}
	callID := fmt.Sprintf("call_demo_%d", countRole(req, worker.RoleUser))
	if !e.emit(worker.Part{Index: 1, Chunk: worker.ToolCallStart{ID: callID}}) || !e.emit(worker.Part{Index: 1, Chunk: worker.ToolCallStart{Name: tool}}) {
		return false
	}
	// The arguments arrive in pieces, as they do from real providers.
	if !e.stream(1, string(argJSON), func(s string) worker.Chunk { return worker.ToolCallArgs(s) }) {
		return false
	}
	if !e.emit(worker.Flush{Index: 1}) {
		return false
	}
	e.reason = worker.FinishToolCalls
	return true
}

// answer writes the reply once the tool's result is in.
func (d *demoModel) answer(e *demoEmitter, req worker.Request) bool {
	var call worker.ToolCall
	var result string
	isError := false
	// The tool messages after the last assistant message are this turn's.
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == worker.RoleTool && result == "" {
			result = m.Text
			isError = strings.HasPrefix(m.Text, "error: ")
		}
		if m.Role == worker.RoleAssistant && len(m.ToolCalls) > 0 {
			call = m.ToolCalls[0]
			break
		}
	}
	return d.reply(e, req, 0, call.Name, call.Arguments, result, isError)
}

// reply streams the final answer: markdown text, or JSON when the
// configuration asks for structured output.
func (d *demoModel) reply(e *demoEmitter, req worker.Request, index int, tool, args, result string, isError bool) bool {
	text := req.LastUserText()
	attached, err := readAttachments(e.ctx, req.LastUserFiles())
	if err != nil {
		e.yield(nil, err)
		e.stopped = true
		return false
	}
	if len(req.Config.ResponseFormat) > 0 {
		out := map[string]any{"question": text, "tool": tool, "result": result, "isError": isError, "stats": textStats(text)}
		if tool == "" {
			delete(out, "tool")
			delete(out, "result")
		}
		if len(attached) > 0 {
			out["attachments"] = attached
		}
		b, _ := json.Marshal(out)
		if !e.stream(index, string(b), func(s string) worker.Chunk { return worker.StructuredChunk(s) }) {
			return false
		}
		return e.emit(worker.Flush{Index: index})
	}
	md := attachmentsMarkdown(attached) +
		demoAnswer(newDemoVoice(req.Config), text, tool, args, result, isError, countRole(req, worker.RoleUser))
	if !e.stream(index, md, func(s string) worker.Chunk { return worker.MessageChunk(s) }) {
		return false
	}
	return e.emit(worker.Flush{Index: index})
}

// demoVoice is how one model configuration makes the demo model write:
// the model name and temperature pick among phrasings, so that an A/B
// comparison of two configurations shows two different answers, and the
// same configuration always picks the same ones.
type demoVoice struct {
	seed uint64
	// signature names the configuration, in markdown.
	signature string
}

func newDemoVoice(c worker.ModelConfig) demoVoice {
	temp := "default"
	if c.Temperature != nil {
		temp = strconv.FormatFloat(*c.Temperature, 'g', -1, 64)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s", c.Model, temp)
	name := "demo"
	if c.Model != "" {
		name = c.Model
	}
	sig := "the demo model as **" + escapeMarkdown(name) + "**"
	if c.Temperature != nil {
		sig += " at temperature " + temp
	}
	return demoVoice{seed: h.Sum64(), signature: sig}
}

// choose picks one of options for the choice numbered slot.
func (v demoVoice) choose(slot uint64, options ...string) string {
	x := v.seed ^ (slot+1)*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return options[x%uint64(len(options))]
}

// markdownSpecial are the characters that could make text the user wrote
// into markup: emphasis, code, links, HTML, tables, headings, lists.
var markdownSpecial = regexp.MustCompile("[\\\\`*_\\[\\]<>|#~!&+-]")

// escapeMarkdown backslash-escapes text so that markdown renders it as it
// was written (CommonMark lets any ASCII punctuation be escaped).
func escapeMarkdown(text string) string {
	return markdownSpecial.ReplaceAllString(text, `\$0`)
}

// demoAnswer composes the markdown answer from the message and the tool's
// result, in voice.
func demoAnswer(voice demoVoice, text, tool, args, result string, isError bool, turn int) string {
	stats := textStats(text)
	var b strings.Builder
	quote := strings.Join(strings.Fields(text), " ")
	if len([]rune(quote)) > 160 {
		quote = string([]rune(quote)[:160]) + "…"
	}
	quote = escapeMarkdown(quote)

	var expr struct {
		Expression string `json:"expression"`
	}
	_ = json.Unmarshal([]byte(args), &expr)
	switch {
	case tool == "calculator" && !isError:
		fmt.Fprintf(&b, "## %s = %s\n\n", escapeMarkdown(expr.Expression), result)
		fmt.Fprintf(&b, "%s *%s*\n\n", voice.choose(1, "You asked:", "Your question:", "The question was:"), quote)
		fmt.Fprintf(&b, voice.choose(2,
			"I handed `%s` to the **calculator** tool instead of doing the arithmetic in my head, and it returned **%s**. ",
			"Rather than guess, I passed `%s` to the **calculator** tool; it answered **%s**. ",
			"The **calculator** tool evaluated `%s` for me and came back with **%s**. "), expr.Expression, result)
		b.WriteString(voice.choose(3,
			"The calculator follows the usual precedence rules: parentheses first, then powers, then multiplication and division, then addition and subtraction.\n\n",
			"It applies the usual order of operations: parentheses, then powers, then multiplication and division, and addition and subtraction last.\n\n",
			"Precedence is the familiar one: what is in parentheses comes first, then powers, then products and quotients, then sums and differences.\n\n"))
	case tool == "text_stats" && !isError:
		var st textStatistics
		_ = json.Unmarshal([]byte(result), &st)
		fmt.Fprintf(&b, "## %s\n\n", voice.choose(1, "About your message", "Your message, measured", "A look at your message"))
		fmt.Fprintf(&b, "You wrote: *%s*\n\n", quote)
		b.WriteString(voice.choose(2,
			"I ran the **text_stats** tool on it. Here is what it measured:\n\n",
			"The **text_stats** tool measured it:\n\n",
			"Here is what the **text_stats** tool found in it:\n\n"))
		fmt.Fprintf(&b, "| measure | value |\n|---|---|\n| words | %d |\n| sentences | %d |\n| characters | %d |\n| letters | %d |\n| longest word | %s |\n| reading time | about %d s |\n\n",
			st.Words, st.Sentences, st.Characters, st.Letters, orDash(st.LongestWord), st.ReadingSeconds)
		if len(st.MostFrequent) > 0 {
			words := make([]string, len(st.MostFrequent))
			for i, w := range st.MostFrequent {
				words[i] = "*" + escapeMarkdown(w) + "*"
			}
			fmt.Fprintf(&b, "%s most often: %s. ", plural(len(st.MostFrequent), "The word that comes back", "The words that come back"), strings.Join(words, ", "))
		} else if st.Words > 1 {
			b.WriteString("No word appears twice. ")
		}
		if st.QuestionSentence {
			b.WriteString("It ends with a question mark, so it reads as a question. ")
		}
		b.WriteString("\n\n")
	case isError && strings.HasPrefix(result, "error: denied"):
		fmt.Fprintf(&b, "## Not done: you did not approve it\n\nYou asked: *%s*\n\nThe **%s** tool needs your approval, and the answer was:\n\n```\n%s\n```\n\n", quote, tool, strings.TrimPrefix(result, "error: "))
		b.WriteString("So I did not run it. Ask again if you change your mind.\n\n")
	case (tool == "publish_note" || tool == "browser_info" || tool == worker.AskUserName) && !isError:
		// What happened, said as it happened: only a question has an answer
		// from the user; a client tool's result came from the browser.
		done := map[string]struct{ heading, what, waited string }{
			"publish_note":     {"Approved: the note is published", "You approved the **publish_note** call, so it ran. It returned:", "for your approval"},
			"browser_info":     {"Your browser ran browser_info", "**browser_info** is a client tool: your browser ran it and sent back its result:", "for your browser"},
			worker.AskUserName: {"Thanks for your answer", "I asked you a question with **ask_user**, and you answered:", "for your answer"},
		}[tool]
		fmt.Fprintf(&b, "## %s\n\nYou asked: *%s*\n\n%s\n\n```\n%s\n```\n\n", done.heading, quote, done.what, result)
		fmt.Fprintf(&b, "The reply waited %s without holding a worker, then went on in the same message.\n\n", done.waited)
	case tool != "" && tool != "calculator" && tool != "text_stats" && !isError:
		// A tool the user asked for by "/call": what it answered.
		fmt.Fprintf(&b, "## %s answered\n\nYou asked: *%s*\n\nI called **%s** with `%s`, and it answered:\n\n```\n%s\n```\n\n",
			escapeMarkdown(tool), quote, escapeMarkdown(tool), args, result)
	case isError:
		fmt.Fprintf(&b, "## The %s tool failed\n\n", tool)
		fmt.Fprintf(&b, "You asked: *%s*\n\nThe tool answered with an error:\n\n```\n%s\n```\n\n", quote, result)
		b.WriteString("I will not make up a result; try rephrasing the request.\n\n")
	default:
		fmt.Fprintf(&b, "## Your message\n\nYou wrote %d %s: *%s*\n\n", stats.Words, plural(stats.Words, "word", "words"), quote)
	}

	fmt.Fprintf(&b, "### %s\n\n", voice.choose(4, "What you are watching", "How this reply was made", "Behind this reply"))
	b.WriteString(voice.choose(5,
		"This reply comes from convo's built-in **demo model**. It needs no network and no API key, yet it exercises every kind of block a real model produces:\n\n",
		"convo's built-in **demo model** wrote this without a network or an API key, and still used every kind of block a real model produces:\n\n",
		"No network, no API key: this is convo's built-in **demo model**, and it streams every kind of block a real model does:\n\n"))
	b.WriteString("1. a **reasoning** block, where it planned this answer;\n")
	if tool != "" {
		fmt.Fprintf(&b, "2. a **tool_use** block holding the arguments of its `%s` call, streamed as JSON;\n", tool)
		b.WriteString("3. a **tool_result** block with what the tool returned;\n")
		b.WriteString("4. this **text** block, streamed token by token.\n\n")
	} else {
		b.WriteString("2. this **text** block, streamed token by token.\n\n")
	}
	b.WriteString("Each token reaches PostgreSQL through the SQL worker API, which appends it to the conversation's ")
	b.WriteString("event log and notifies subscribers. Tokens that arrive close together are batched into one write, ")
	b.WriteString("so a fast model does not cost one commit per token. A client that joins in the middle sees the ")
	b.WriteString("text so far, then the rest, with nothing missing and nothing twice.\n\n")
	if turn > 1 {
		fmt.Fprintf(&b, "This is message %d of our conversation; the earlier messages were part of my context.\n\n", turn)
	}
	b.WriteString(voice.choose(6,
		"> Press **Stop** while I am writing to cancel the prompt: the worker stops within half a second and the partial reply stays.\n\n",
		"> To cancel, press **Stop** while I write: the worker stops within half a second, and what was written stays.\n\n",
		"> **Stop** cancels the prompt mid-reply: the worker halts within half a second and keeps the partial reply.\n\n"))
	fmt.Fprintf(&b, "*Written by %s.*\n", voice.signature)
	return b.String()
}

func countRole(req worker.Request, role worker.Role) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == role {
			n++
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// demoEmitter paces a round's events and counts its tokens.
type demoEmitter struct {
	ctx       context.Context
	yield     func(worker.Event, error) bool
	tps       float64
	start     time.Time
	tokens    int
	maxTokens int // < 0: no limit
	cut       bool
	reason    worker.FinishReason
	stopped   bool
	// reasoning counts the tokens streamed as reasoning.
	reasoning int
}

// usage is the round's usage in the demo model's own tokens: the
// request's messages (their text and tool calls' arguments) in, what it
// streamed out.
func (e *demoEmitter) usage(req worker.Request) *worker.Usage {
	in := 0
	for _, m := range req.Messages {
		in += len(demoTokenRE.FindAllString(m.Text, -1))
		for _, c := range m.ToolCalls {
			in += len(demoTokenRE.FindAllString(c.Arguments, -1))
		}
	}
	return &worker.Usage{InputTokens: int64(in), OutputTokens: int64(e.tokens), ReasoningTokens: int64(e.reasoning)}
}

func (e *demoEmitter) finishReason() worker.FinishReason {
	switch {
	case e.cut:
		return worker.FinishLength
	case e.reason != "":
		return e.reason
	}
	return worker.FinishStop
}

// emit yields ev; false when the stream must stop.
func (e *demoEmitter) emit(ev worker.Event) bool {
	if e.stopped || e.ctx.Err() != nil {
		e.stopped = true
		return false
	}
	if !e.yield(ev, nil) {
		e.stopped = true
		return false
	}
	return true
}

// demoTokenRE splits text into tokens of at most six letters or digits,
// or one other character, each with the spaces before it. The tokens
// concatenate to the text exactly.
var demoTokenRE = regexp.MustCompile(`\s*[\p{L}\p{N}_]{1,6}|\s*[^\s\p{L}\p{N}_]|\s+`)

// stream emits text at index as chunks of one token each, paced; it stops
// early (setting cut) at the token limit.
func (e *demoEmitter) stream(index int, text string, chunk func(string) worker.Chunk) bool {
	for _, tok := range demoTokenRE.FindAllString(text, -1) {
		if e.cut {
			return true
		}
		if e.maxTokens >= 0 && e.tokens >= e.maxTokens {
			e.cut = true
			return true
		}
		if !e.pace() {
			return false
		}
		e.tokens++
		c := chunk(tok)
		if _, ok := c.(worker.ReasoningChunk); ok {
			e.reasoning++
		}
		if !e.emit(worker.Part{Index: index, Chunk: c}) {
			return false
		}
	}
	return true
}

// pace waits until the next token is due.
func (e *demoEmitter) pace() bool {
	if e.tps <= 0 {
		return e.ctx.Err() == nil
	}
	due := e.start.Add(time.Duration(float64(e.tokens) / e.tps * float64(time.Second)))
	wait := time.Until(due)
	if wait <= 0 {
		return e.ctx.Err() == nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-e.ctx.Done():
		e.stopped = true
		return false
	case <-t.C:
		return true
	}
}
