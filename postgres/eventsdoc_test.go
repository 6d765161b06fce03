package postgres_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres/dbq"
)

// TestEventsDoc keeps docs/events.md true. It writes a conversation whose
// log holds every event kind through the SQL functions (each writer that
// gives a kind's row or payload another shape, but expire_leases, whose
// promptFailed is fail_prompt's), then checks that
//
//   - the kinds the SQL wrote are exactly the fields of the Event oneof in
//     proto/convo/v1/events.proto, and each has its section in the doc and
//     its row in the doc's table of kinds;
//   - every payload is valid proto3 JSON of its kind's message (strictly:
//     a key the proto lacks fails), and every key the SQL writes is named
//     in the kind's section, or in the section of the nested object
//     (conversation, message, prompt, toolCall) that holds it;
//   - the table's prompt_id, block_id and tool_call_id cells say what the
//     SQL writes (yes: always set, no: never, some: both seen);
//   - every function the table names exists, and the doc names the file
//     of db/functions that defines it;
//   - each function that notifies (calls pg_notify, or a helper that does)
//     is a sender of that channel in the doc's table of notifications.
func TestEventsDoc(t *testing.T) {
	t.Parallel()
	doc := readDocSections(t, "../docs/events.md")
	tb := setup(t)
	conv := driveEveryEventKind(t, tb)
	events := tb.events(t, conv)

	oneof := convov1.File_convo_v1_events_proto.Messages().ByName("Event").Oneofs().ByName("kind")
	fields := map[string]protoreflect.FieldDescriptor{}
	for i := range oneof.Fields().Len() {
		fd := oneof.Fields().Get(i)
		fields[fd.JSONName()] = fd
	}
	rows := docTableRows(t, doc["Event kinds"], "kind")

	written := map[string]bool{}
	for _, e := range events {
		written[string(e.Kind)] = true
	}
	for kind := range fields {
		if !written[kind] {
			t.Errorf("no SQL path this test drives wrote %s: drive the function that writes it", kind)
		}
		if _, ok := doc["`"+kind+"`"]; !ok {
			t.Errorf("docs/events.md has no section \"### `%s`\"", kind)
		}
		if _, ok := rows["`"+kind+"`"]; !ok {
			t.Errorf("docs/events.md's table of kinds has no row for `%s`", kind)
		}
	}
	for kind := range written {
		if fields[kind] == nil {
			t.Errorf("the SQL wrote kind %s, which the Event oneof of events.proto lacks", kind)
		}
	}
	for name := range rows {
		if fields[strings.Trim(name, "`")] == nil {
			t.Errorf("docs/events.md's table of kinds has a row %s, which is no field of the Event oneof", name)
		}
	}

	// Payloads: strict proto3 JSON, and every key named in the doc.
	reported := map[string]bool{}
	for _, e := range events {
		fd := fields[string(e.Kind)]
		if fd == nil {
			continue
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(fd.Message().FullName())
		if err != nil {
			t.Fatal(err)
		}
		if err := protojson.Unmarshal(e.Payload, mt.New().Interface()); err != nil {
			t.Errorf("event %d (%s): the payload is not proto3 JSON of %s: %v\n%s", e.Seq, e.Kind, fd.Message().FullName(), err, e.Payload)
		}
		var payload map[string]any
		if err := json.Unmarshal(e.Payload, &payload); err != nil {
			t.Fatal(err)
		}
		checkDocumentedKeys(t, doc, reported, []string{doc["`"+string(e.Kind)+"`"]}, payload, string(e.Kind))
	}

	// The row's id columns.
	type seen struct{ set, null bool }
	columns := map[string]*[3]seen{}
	for _, e := range events {
		c := columns[string(e.Kind)]
		if c == nil {
			c = &[3]seen{}
			columns[string(e.Kind)] = c
		}
		for i, id := range []uuid.NullUUID{e.PromptID, e.BlockID, e.ToolCallID} {
			if id.Valid {
				c[i].set = true
			} else {
				c[i].null = true
			}
		}
	}
	names := [3]string{"`prompt_id`", "`block_id`", "`tool_call_id`"}
	for kind, c := range columns {
		row, ok := rows["`"+kind+"`"]
		if !ok {
			continue
		}
		for i, s := range c {
			want := map[seen]string{{set: true}: "yes", {null: true}: "no", {set: true, null: true}: "some"}[s]
			if got := row[names[i]]; got != want {
				t.Errorf("docs/events.md: %s's %s is %q, but the SQL wrote %q", kind, names[i], got, want)
			}
		}
	}

	// The functions the table names, and the files that define them.
	inForce := functionsInForce(t, "../db/functions")
	for kind, row := range rows {
		for _, fn := range backticked(row["written by"]) {
			if inForce[fn].file == "" {
				t.Errorf("docs/events.md: %s is written by convo.%s, which db/functions does not define", kind, fn)
			}
		}
	}
	files := docTableRows(t, doc["Event kinds"], "function")
	if len(files) == 0 {
		t.Error("docs/events.md has no table of functions and their files")
	}
	for cell, row := range files {
		file := regexp.MustCompile(`\(\.\./db/functions/([\w.]+)\)`).FindStringSubmatch(row["file"])
		if file == nil {
			t.Errorf("docs/events.md: the file of %s is not a link to db/functions: %s", cell, row["file"])
			continue
		}
		for _, fn := range backticked(cell) {
			if inForce[fn].file != file[1] {
				t.Errorf("docs/events.md says convo.%s is defined in %s; the definition in force is in %q", fn, file[1], inForce[fn].file)
			}
		}
	}

	// Who notifies which channel.
	senders := map[string][]string{}
	for _, line := range strings.Split(doc["Notifications"], "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "`convo_") {
			continue
		}
		channel := strings.Trim(strings.TrimSpace(cells[0]), "`")
		senders[channel] = append(senders[channel], backticked(cells[2])...)
	}
	if len(senders) == 0 {
		t.Error("docs/events.md has no table of notifications under \"## Notifications\"")
	}
	// The helpers that call pg_notify, and the channel each notifies.
	helpers := map[string]string{}
	for fn, def := range inForce {
		if m := notifyRE.FindStringSubmatch(def.body); m != nil {
			helpers[fn] = m[1]
		}
	}
	if len(helpers) == 0 {
		t.Error("no function of db/functions calls pg_notify")
	}
	for fn, def := range inForce {
		if _, ok := helpers[fn]; ok {
			continue
		}
		for _, m := range helperCallRE.FindAllStringSubmatch(def.body, -1) {
			channel, ok := helpers[m[1]]
			if ok && !slices.Contains(senders[channel], fn) {
				t.Errorf("convo.%s (%s) notifies %s; docs/events.md's table of notifications does not say so", fn, def.file, channel)
			}
		}
		if notifyRE.MatchString(def.body) {
			t.Errorf("convo.%s (%s) calls pg_notify itself: the payloads are written once, by the helpers of events.sql", fn, def.file)
		}
	}
}

var (
	notifyRE     = regexp.MustCompile(`pg_notify\('(\w+)'`)
	helperCallRE = regexp.MustCompile(`convo\.(\w+)\(`)
)

// driveEveryEventKind writes, through the SQL API, a conversation whose
// log holds every event kind, each from every writer that gives its row
// or payload another shape, and returns it.
func driveEveryEventKind(t *testing.T, tb *testBundle) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// claimStart claims and starts the oldest queued prompt (the two of
	// a comparison are equally old: either may come first).
	claimStart := func() (promptID, messageID uuid.UUID) {
		t.Helper()
		claimed, err := tb.api.PromptClaim(ctx, apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v %+v", err, claimed)
		}
		must(tb.api.PromptStart(ctx, claimed[0].PromptID))
		return claimed[0].PromptID, claimed[0].MessageID
	}
	toolBlock := func(promptID uuid.UUID) uuid.UUID {
		t.Helper()
		block := tb.startBlock(t, promptID, "tool_use")
		tb.append(t, block, `{"expression":"6*7"}`)
		call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: block, Name: "calculator", Input: json.RawMessage(`{"expression":"6*7"}`)})
		must(err)
		return call
	}

	// An A/B comparison: messageCreated (user, with its block; then each
	// assistant message), promptQueued, conversationUpdated.
	sent, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "local", Text: "What is 6 times 7?",
		ModelConfigs: []json.RawMessage{json.RawMessage(`{"model":"a"}`), json.RawMessage(`{"model":"b"}`)},
	})
	must(err)
	conv := sent.ConversationID

	// The first prompt: every block and tool call event.
	a, replyA := claimStart()
	text := tb.startBlock(t, a, "text")
	tb.append(t, text, "6 times 7 ")
	tb.append(t, text, "is 42.")
	must(tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: text, Metadata: json.RawMessage(`{"tokens":4}`)}))
	completed := toolBlock(a)
	must(tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: completed, Output: "evaluating … "}))
	output := "42"
	must(tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: completed, Output: &output}))
	must(tb.api.ToolCallFail(ctx, apiq.ToolCallFailParams{ToolCallID: toolBlock(a), Error: "division by zero"}))
	toolBlock(a) // left open: complete_prompt fails the call and ends the block
	must(tb.api.PromptComplete(ctx, a))

	// The second fails.
	b, _ := claimStart()
	must(tb.api.PromptFail(ctx, apiq.PromptFailParams{PromptID: b, Error: "model unavailable"}))

	// A pause: a reply asks for approval and waits (inputRequested,
	// promptWaiting), is answered (inputAnswered) and resumed; then a
	// client tool is claimed (inputClaimed) and, left pending, cancelled
	// when the reply completes (inputAnswered without an answer).
	endedToolBlock := func(promptID uuid.UUID) uuid.UUID {
		t.Helper()
		block := tb.startBlock(t, promptID, "tool_use")
		must(tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: block}))
		call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: block, Name: "delete_file", Input: json.RawMessage(`{"path":"notes.txt"}`)})
		must(err)
		return call
	}
	p := tb.sendMessage(t, conv, "Delete the file?")
	if id, _ := claimStart(); id != p.promptID {
		t.Fatalf("claimed %s, want %s", id, p.promptID)
	}
	approval := endedToolBlock(p.promptID)
	must(tb.api.InputRequest(ctx, apiq.InputRequestParams{ToolCallID: approval, Kind: "approval", Request: json.RawMessage(`{"message":"Delete notes.txt?"}`)}))
	if parked, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: p.promptID, Worker: "w1"}); err != nil || !parked {
		t.Fatalf("wait_prompt = %v, %v", parked, err)
	}
	_, err = tb.q.InputAnswer(ctx, dbq.InputAnswerParams{OwnerID: "local", ToolCallID: approval, Answer: json.RawMessage(`{"approved":true}`)})
	must(err)
	claimStart()
	must(tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: approval, Output: &output}))
	clientTool := endedToolBlock(p.promptID)
	must(tb.api.InputRequest(ctx, apiq.InputRequestParams{ToolCallID: clientTool, Kind: "client_tool", Request: json.RawMessage(`{}`)}))
	_, err = tb.q.InputClaim(ctx, dbq.InputClaimParams{OwnerID: "local", ToolCallID: clientTool, Claimant: "tab-1", LeaseSeconds: 30})
	must(err)
	must(tb.api.PromptComplete(ctx, p.promptID))

	// Feedback, a rename, a cancelled reply, a regenerated one, a clear.
	_, err = tb.store.SubmitFeedback(ctx, "local", replyA, conversation.RatingUp, "right")
	must(err)
	_, err = tb.store.RenameConversation(ctx, "local", conv, "Arithmetic")
	must(err)
	c := tb.sendMessage(t, conv, "And 7 times 8?")
	_, err = tb.store.CancelPrompt(ctx, "local", c.promptID)
	must(err)
	_, err = tb.store.RegenerateReply(ctx, conversation.RegenerateParams{OwnerID: "local", ConversationID: conv})
	must(err)
	_, err = tb.store.ClearConversation(ctx, "local", conv)
	must(err)
	// Members: memberAdded, memberRemoved.
	_, err = tb.store.AddMember(ctx, "local", conv, "bob", conversation.RoleViewer)
	must(err)
	must(tb.store.RemoveMember(ctx, "local", conv, "bob"))
	// Share links: shareCreated, shareRevoked.
	sh, _, err := tb.store.CreateShare(ctx, conversation.CreateShareParams{
		CallerID: "local", ConversationID: conv, Mode: conversation.ShareLive})
	must(err)
	_, err = tb.store.RevokeShare(ctx, "local", sh.ID)
	must(err)
	return conv
}

// checkDocumentedKeys fails, once per path (which starts with the kind),
// for each key of v (a payload, or an object in it) that none of texts
// names, as `key` or "key". An object under
// conversation, message, prompt or toolCall may also be named in that
// object's section; free-form JSON (metadata, modelConfig, input) is not
// looked into.
func checkDocumentedKeys(t *testing.T, doc map[string]string, reported map[string]bool, texts []string, v any, path string) {
	t.Helper()
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			checkDocumentedKeys(t, doc, reported, texts, e, path+"[]")
		}
	case map[string]any:
		for key, value := range v {
			named := slices.ContainsFunc(texts, func(s string) bool {
				return strings.Contains(s, "`"+key+"`") || strings.Contains(s, `"`+key+`"`)
			})
			if !named && !reported[path+"."+key] {
				reported[path+"."+key] = true
				t.Errorf("docs/events.md: a payload has %s.%s, which the kind's section does not name", path, key)
			}
			switch key {
			case "metadata", "modelConfig", "input":
				continue
			}
			inner := texts
			if s, ok := doc["`"+key+"`"]; ok {
				inner = append(slices.Clip(texts), s)
			}
			checkDocumentedKeys(t, doc, reported, inner, value, path+"."+key)
		}
	}
}

var headingRE = regexp.MustCompile(`^#{2,3} (.+)$`)

// readDocSections returns the text under each ## and ### heading of a
// markdown file, by the heading's text.
func readDocSections(t *testing.T, path string) map[string]string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var heading string
	var body strings.Builder
	flush := func() {
		if heading != "" {
			sections[heading] = body.String()
		}
		body.Reset()
	}
	for line := range strings.Lines(string(src)) {
		if m := headingRE.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			flush()
			heading = m[1]
			continue
		}
		body.WriteString(line)
	}
	flush()
	return sections
}

// docTableRows parses the markdown table of text whose first header cell
// is first: each row by its first cell, then its cells by header.
func docTableRows(t *testing.T, text, first string) map[string]map[string]string {
	t.Helper()
	rows := map[string]map[string]string{}
	var header []string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			header = nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil:
			header = cells
		case header[0] != first || strings.HasPrefix(cells[0], "---"):
		default:
			row := map[string]string{}
			for i, h := range header {
				if i < len(cells) {
					row[h] = cells[i]
				}
			}
			rows[cells[0]] = row
		}
	}
	return rows
}

var backtickedRE = regexp.MustCompile("`(?:convo\\.)?([a-z_]+)`")

// backticked returns the identifiers in backticks in a table cell.
func backticked(cell string) []string {
	var names []string
	for _, m := range backtickedRE.FindAllStringSubmatch(cell, -1) {
		names = append(names, m[1])
	}
	return names
}

var createFunctionRE = regexp.MustCompile(`CREATE (?:OR REPLACE )?FUNCTION convo\.(\w+)\(`)

// definition is a function's definition: the file of db/functions that
// holds it, and its text.
type definition struct{ file, body string }

// functionsInForce returns the definition of each function of the schema
// convo in dir (db/functions), failing for one defined twice.
func functionsInForce(t *testing.T, dir string) map[string]definition {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no SQL files in %s: %v", dir, err)
	}
	slices.Sort(paths)
	inForce := map[string]definition{}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createFunctionRE.FindAllStringSubmatchIndex(string(src), -1) {
			name := string(src[m[2]:m[3]])
			if prev, ok := inForce[name]; ok {
				t.Errorf("convo.%s is defined twice in %s: in %s and %s", name, dir, prev.file, filepath.Base(p))
			}
			body, _, _ := strings.Cut(string(src[m[0]:]), "$$;")
			inForce[name] = definition{file: filepath.Base(p), body: body}
		}
	}
	return inForce
}
