package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"connectrpc.com/connect"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/testwait"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// markdownDoc is one parsed documentation file.
type markdownDoc struct {
	path   string // relative to the repository
	source []byte
	root   ast.Node
}

// docFiles parses README.md and docs/*.md with a CommonMark + GFM parser,
// as GitHub renders them.
func docFiles(t *testing.T) []markdownDoc {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append([]string{filepath.Join(repoRoot, "README.md")}, paths...)
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	var docs []markdownDoc
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		docs = append(docs, markdownDoc{path: filepath.ToSlash(rel), source: src, root: md.Parser().Parse(text.NewReader(src))})
	}
	if len(docs) < 2 {
		t.Fatalf("found no docs/*.md next to README.md")
	}
	return docs
}

// lineOf is the 1-based line of byte offset off in src.
func lineOf(src []byte, off int) int { return bytes.Count(src[:off], []byte("\n")) + 1 }

// nodeLine is the first line of a block node, or 0 when it has none.
func nodeLine(n ast.Node, src []byte) int {
	if lines := n.Lines(); lines != nil && lines.Len() > 0 {
		return lineOf(src, lines.At(0).Start)
	}
	return 0
}

// fencedBlocks returns the text of every fenced code block of doc whose
// info string starts with lang.
func fencedBlocks(doc markdownDoc, lang string) []string {
	var blocks []string
	ast.Walk(doc.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if fb, ok := n.(*ast.FencedCodeBlock); ok && entering {
			if fields := strings.Fields(string(fb.Info.Segment.Value(doc.source))); len(fields) > 0 && fields[0] == lang {
				var b strings.Builder
				for i := range fb.Lines().Len() {
					seg := fb.Lines().At(i)
					b.Write(seg.Value(doc.source))
				}
				blocks = append(blocks, b.String())
			}
		}
		return ast.WalkContinue, nil
	})
	return blocks
}

// headingAnchors returns the anchors GitHub gives the headings of doc:
// the text lowercased, without punctuation, spaces as hyphens, and -1,
// -2, … after repeats.
func headingAnchors(doc markdownDoc) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	ast.Walk(doc.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		h, ok := n.(*ast.Heading)
		if !ok || !entering {
			return ast.WalkContinue, nil
		}
		var plain strings.Builder
		ast.Walk(h, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
			if entering {
				switch c := c.(type) {
				case *ast.Text:
					plain.Write(c.Segment.Value(doc.source))
				case *ast.String:
					plain.Write(c.Value)
				}
			}
			return ast.WalkContinue, nil
		})
		var slug strings.Builder
		for _, r := range strings.ToLower(plain.String()) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		a := slug.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
		return ast.WalkSkipChildren, nil
	})
	return anchors
}

// serviceMethods are the RPCs of convo.v1.ConversationService.
func serviceMethods(t *testing.T) []string {
	t.Helper()
	svc := convov1.File_convo_v1_conversation_service_proto.Services().ByName("ConversationService")
	if svc == nil {
		t.Fatal("no ConversationService in the generated descriptors")
	}
	var names []string
	for i := range svc.Methods().Len() {
		names = append(names, string(svc.Methods().Get(i).Name()))
	}
	return names
}

// rpcNameRE finds the RPCs a shell example calls: through the docs' post
// helper, or by URL path.
var rpcNameRE = regexp.MustCompile(`(?:^|[\s$(|;])post\s+([A-Za-z]\w*)|ConversationService/([A-Za-z]\w*)|\$API/([A-Za-z]\w*)`)

// TestDocs checks README.md and docs/*.md as a CommonMark + GFM renderer
// (GitHub's) sees them: no table cut short, no broken relative link or
// anchor, and docs/api.md's shell examples name only RPCs that exist,
// and every one of them.
func TestDocs(t *testing.T) {
	t.Parallel()
	docs := docFiles(t)

	t.Run("NoTableCutShort", func(t *testing.T) {
		t.Parallel()
		// A line of pipes outside a table is a row that a blank line (or
		// a missing delimiter row) cut from its table.
		for _, doc := range docs {
			ast.Walk(doc.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
				if !entering {
					return ast.WalkContinue, nil
				}
				switch n.(type) {
				case *extast.Table, *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock:
					return ast.WalkSkipChildren, nil
				case *ast.Paragraph:
					for i := range n.Lines().Len() {
						seg := n.Lines().At(i)
						line := strings.TrimSpace(string(seg.Value(doc.source)))
						if strings.HasPrefix(line, "|") && strings.Count(line, "|") >= 2 {
							t.Errorf("%s:%d: a table row outside a table (a blank line inside the table?): %.80s", doc.path, lineOf(doc.source, seg.Start), line)
						}
					}
				}
				return ast.WalkContinue, nil
			})
		}
	})

	t.Run("RelativeLinks", func(t *testing.T) {
		t.Parallel()
		anchors := map[string]map[string]bool{}
		for _, doc := range docs {
			anchors[doc.path] = headingAnchors(doc)
		}
		for _, doc := range docs {
			ast.Walk(doc.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
				var dest string
				switch n := n.(type) {
				case *ast.Link:
					dest = string(n.Destination)
				case *ast.Image:
					dest = string(n.Destination)
				default:
					return ast.WalkContinue, nil
				}
				if !entering {
					return ast.WalkContinue, nil
				}
				u, err := url.Parse(dest)
				if err != nil || u.Scheme != "" || u.Host != "" {
					return ast.WalkContinue, nil
				}
				line := nodeLine(n.Parent(), doc.source)
				target := doc.path
				if u.Path != "" {
					target = filepath.ToSlash(filepath.Join(filepath.Dir(doc.path), u.Path))
					if _, err := os.Stat(filepath.Join(repoRoot, target)); err != nil {
						t.Errorf("%s:%d: link to %s: %s does not exist", doc.path, line, dest, target)
						return ast.WalkContinue, nil
					}
				}
				if u.Fragment == "" || !strings.HasSuffix(target, ".md") {
					return ast.WalkContinue, nil
				}
				a, ok := anchors[target]
				if !ok {
					src, err := os.ReadFile(filepath.Join(repoRoot, target))
					if err != nil {
						t.Fatal(err)
					}
					root := goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser().Parse(text.NewReader(src))
					a = headingAnchors(markdownDoc{path: target, source: src, root: root})
					anchors[target] = a
				}
				if !a[u.Fragment] {
					t.Errorf("%s:%d: link to %s: %s has no heading with anchor #%s", doc.path, line, dest, target, u.Fragment)
				}
				return ast.WalkContinue, nil
			})
		}
	})

	t.Run("APIExamplesNameRealRPCs", func(t *testing.T) {
		t.Parallel()
		methods := serviceMethods(t)
		i := slices.IndexFunc(docs, func(d markdownDoc) bool { return d.path == "docs/api.md" })
		if i < 0 {
			t.Fatal("no docs/api.md")
		}
		shown := map[string]bool{}
		for _, block := range fencedBlocks(docs[i], "sh") {
			var code strings.Builder
			for line := range strings.Lines(block) {
				if !strings.HasPrefix(strings.TrimSpace(line), "#") {
					code.WriteString(line)
				}
			}
			for _, m := range rpcNameRE.FindAllStringSubmatch(code.String(), -1) {
				name := m[1] + m[2] + m[3]
				if !slices.Contains(methods, name) {
					t.Errorf("docs/api.md: an example calls %s, which ConversationService does not have (it has %s)", name, strings.Join(methods, ", "))
				}
				shown[name] = true
			}
		}
		// The page promises an example of every RPC.
		for _, name := range methods {
			if !shown[name] {
				t.Errorf("docs/api.md has no shell example of %s", name)
			}
		}
	})
}

// curlShim stands in for curl and buf on PATH while docs/api.md's
// examples run: it records each call's arguments, response headers and
// body (curl) or exit status (buf). It bounds each call in its own time,
// in place of any --max-time the example gives: a stream ends after 8
// seconds (long enough for its snapshot on a loaded machine; 2 or 3 were
// not, under go test -race beside the other packages), a unary call
// fails after 60.
const curlShim = `#!/bin/sh
call=$(mktemp "$DOCS_CALLS/call.XXXXXX")
printf '%s\n' "$(basename "$0")" "$@" > "$call.args"
case "$(basename "$0")" in
curl)
	limit=60
	skip=no
	for a in "$@"; do
		shift
		if [ $skip = yes ]; then skip=no; continue; fi
		case $a in
		--max-time) skip=yes; continue ;;
		*/StreamConversation|*/StreamSharedConversation|*/events) limit=8 ;;
		esac
		set -- "$@" "$a"
	done
	"$DOCS_REAL_CURL" --max-time $limit -D "$call.headers" "$@" | tee "$call.body"
	;;
buf)
	"$DOCS_REAL_BUF" "$@"
	echo $? > "$call.exit"
	;;
esac
`

// helperDefRE matches the first line of a shell function definition.
var helperDefRE = regexp.MustCompile(`^\s*([A-Za-z_]\w*)\(\)\s*\{`)

// exampleCalls counts the lines of the sh blocks that make an HTTP call:
// they run curl or buf, or a helper defined in the blocks whose body runs
// curl.
func exampleCalls(blocks []string) int {
	script := strings.Join(blocks, "\n")
	helpers := []string{"curl", "buf"}
	inFunc := false
	var calls int
	var body []string
	var name string
	for line := range strings.Lines(script) {
		trimmed := strings.TrimSpace(line)
		if m := helperDefRE.FindStringSubmatch(line); m != nil {
			name, body = m[1], []string{line}
			inFunc = !strings.HasSuffix(trimmed, "}")
			if !inFunc && strings.Contains(line, "curl") {
				helpers = append(helpers, name)
			}
			continue
		}
		if inFunc {
			body = append(body, line)
			if trimmed == "}" {
				inFunc = false
				if strings.Contains(strings.Join(body, ""), "curl") {
					helpers = append(helpers, name)
				}
			}
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		callRE := regexp.MustCompile(`(?:^|\$\(|\|)\s*(?:` + strings.Join(helpers, "|") + `)\b`)
		if callRE.MatchString(trimmed) {
			calls++
		}
	}
	return calls
}

// TestDocsAPIExamples runs every shell example of docs/api.md, in order,
// in bash, against the server as `make run` starts it (the in-process
// demo worker answering), and checks that every call answers 2xx, that
// no stream ends in an error, and that the search example finds
// something in the demo's replies.
func TestDocsAPIExamples(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "grep", "cut", "tee", "mktemp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run docs/api.md's examples: %v", tool, err)
		}
	}
	realCurl, _ := exec.LookPath("curl")
	realBuf, err := filepath.Abs(filepath.Join(repoRoot, "web", "node_modules", ".bin", "buf"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(realBuf); err != nil {
		t.Fatalf("docs/api.md's buf curl example needs %s: run npm install --prefix web", realBuf)
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	root := goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser().Parse(text.NewReader(src))
	blocks := fencedBlocks(markdownDoc{path: "docs/api.md", source: src, root: root}, "sh")
	want := exampleCalls(blocks)
	if want == 0 {
		t.Fatal("docs/api.md has no curl examples")
	}

	m := startMain(t, map[string]string{"CONVO_DEMO_TOKENS_PER_SECOND": "400"})
	// A loose bound: the examples take some 30 s, and much longer on a
	// machine busy with other tests.
	// A reply that has ended, as a reader of the page has by the time
	// they search.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
	sent, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "What is 6 times 7?"}))
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, ctx, "the first demo reply", func() bool {
		got, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.Msg.ConversationId}))
		return err == nil && got.Msg.Conversation.GetActivePromptId() == ""
	})

	waiting := waitingForInput(t, ctx, m)

	bin := t.TempDir()
	calls := t.TempDir()
	for _, name := range []string{"curl", "buf"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(curlShim), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := strings.ReplaceAll(strings.Join(blocks, "\n"), "http://127.0.0.1:8080", m.URL())
	cmd := exec.CommandContext(ctx, "bash")
	cmd.Dir = repoRoot
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DOCS_CALLS="+calls, "DOCS_REAL_CURL="+realCurl, "DOCS_REAL_BUF="+realBuf, "TOKEN=", "WAITING="+waiting)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the examples failed: %v\n%s", err, out)
	}

	args, _ := filepath.Glob(filepath.Join(calls, "call.*.args"))
	if len(args) < want {
		t.Errorf("%d calls made, but docs/api.md has %d example lines that call the API:\n%s", len(args), want, out)
	}
	statusRE := regexp.MustCompile(`(?m)^HTTP/\S+ (\d{3})`)
	for _, a := range args {
		call := strings.TrimSuffix(a, ".args")
		argv, _ := os.ReadFile(a)
		what := strings.Join(strings.Fields(string(argv)), " ")
		if bytes.HasPrefix(argv, []byte("buf\n")) {
			exit, err := os.ReadFile(call + ".exit")
			if err != nil || strings.TrimSpace(string(exit)) != "0" {
				t.Errorf("%s: exit status %q", what, exit)
			}
			continue
		}
		headers, _ := os.ReadFile(call + ".headers")
		body, _ := os.ReadFile(call + ".body")
		codes := statusRE.FindAllSubmatch(headers, -1)
		if len(codes) == 0 || codes[len(codes)-1][1][0] != '2' {
			t.Errorf("%s: answered %q, want 2xx\n%s", what, headers, body)
			continue
		}
		// A Connect stream's error comes at its end, after a 200.
		if bytes.Contains(body, []byte(`{"error":{`)) {
			t.Errorf("%s: the stream ended in an error: %q", what, body)
		}
		if strings.Contains(what, "/StreamConversation") && !bytes.Contains(body, []byte(`{"snapshot":`)) {
			t.Errorf("%s: no snapshot streamed: %q", what, body)
		}
		if strings.Contains(what, "/v1/shares/") && strings.HasSuffix(what, "/events") && !bytes.Contains(body, []byte("event: state\n")) {
			t.Errorf("%s: no state streamed: %q", what, body)
		}
		if strings.Contains(what, "/SearchMessages") && !bytes.Contains(body, []byte(`"results":[`)) {
			t.Errorf("%s: the search example finds nothing in the demo's replies: %s", what, body)
		}
	}
	if t.Failed() {
		t.Logf("output of the examples:\n%s", out)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the examples took over 60 s")
	}
}

// waitingForInput plays a worker that pauses, as docs/api.md's pause
// examples need and the demo worker does not do: it sends a message, and
// in the same transaction claims its prompt (so the demo worker never
// sees it claimable), then asks for an approval of one tool call and for
// a client tool's run of another, and waits. It returns the
// conversation's id.
func waitingForInput(t *testing.T, ctx context.Context, m *Main) string {
	t.Helper()
	tx, err := m.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var conv, prompt string
	if err := tx.QueryRow(ctx, `SELECT s.conversation_id::text, s.prompt_ids[1]::text
		  FROM convo.send_message('local', NULL, 'Mail the Lisbon forecast to Ana', '[{}]') s`).Scan(&conv, &prompt); err != nil {
		t.Fatal(err)
	}
	var claimed string
	if err := tx.QueryRow(ctx, `SELECT prompt_id::text FROM convo.claim_prompt('docs', 30)`).Scan(&claimed); err != nil || claimed != prompt {
		t.Fatalf("claimed %q, %v; want the new prompt %s", claimed, err, prompt)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.pool.Exec(ctx, `SELECT convo.start_prompt($1::uuid)`, prompt); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct{ name, kind, request string }{
		{"send_mail", "approval", `{"message": "Send the forecast to ana@example.com?"}`},
		{"get_location", "client_tool", `{"outputSchema": {"type": "object"}}`},
	} {
		if _, err := m.pool.Exec(ctx, `
			WITH block AS (SELECT convo.start_block($1::uuid, 'tool_use') AS id),
			     tool_call AS (SELECT convo.start_tool_call(block.id, $2, '{}') AS id FROM block)
			SELECT convo.request_input(tool_call.id, $3, $4::jsonb), convo.end_block(block.id) FROM block, tool_call`,
			prompt, call.name, call.kind, call.request); err != nil {
			t.Fatalf("%s: %v", call.kind, err)
		}
	}
	var parked bool
	if err := m.pool.QueryRow(ctx, `SELECT convo.wait_prompt($1::uuid, 'docs')`, prompt).Scan(&parked); err != nil || !parked {
		t.Fatalf("wait_prompt = %v, %v", parked, err)
	}
	return conv
}
