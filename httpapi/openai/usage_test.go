package openai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// The usage a worker reports with complete_prompt is the Response's
// usage, in GET and in response.completed, the same bytes on every
// replay; a response whose worker reported none has usage null, and a
// malformed usage is refused, the prompt still running.
func TestUsage(t *testing.T) {
	t.Parallel()
	tb := apitest.SetupAuth(t)
	c := client(t, tb, "alice")
	ctx := context.Background()
	create := func() string {
		t.Helper()
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
			Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("count")}})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}

	id := create()
	p := promptOf(t, id)
	tb.StartPrompt(t, p)
	for _, bad := range []string{`[]`, `{"inputTokens": 1}`, `{"inputTokens": -1, "outputTokens": 2}`,
		`{"inputTokens": 1.5, "outputTokens": 2}`, `{"inputTokens": 1, "outputTokens": 2, "total": 3}`,
		`{"inputTokens": 1, "outputTokens": 2, "cachedInputTokens": 5}`, `{"inputTokens": 1, "outputTokens": "2"}`} {
		_, err := tb.Pool.Exec(ctx, "SELECT convo.complete_prompt($1, $2::jsonb)", p, bad)
		if err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("usage %s: %v; want a refusal naming usage", bad, err)
		}
	}
	if got, _ := c.Responses.Get(ctx, id, responses.ResponseGetParams{}); got.Status != "in_progress" {
		t.Fatalf("after refused completions: status %s; want in_progress", got.Status)
	}
	b := tb.StartBlock(t, p, "text", "{}")
	tb.AppendText(t, b, "one two")
	tb.EndBlock(t, b)
	if _, err := tb.Pool.Exec(ctx, "SELECT convo.complete_prompt($1, $2::jsonb)", p,
		`{"inputTokens": 30, "outputTokens": 12, "cachedInputTokens": 8, "reasoningTokens": 5}`); err != nil {
		t.Fatal(err)
	}
	got, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	u := got.Usage
	if u.InputTokens != 30 || u.OutputTokens != 12 || u.TotalTokens != 42 || u.InputTokensDetails.CachedTokens != 8 ||
		u.OutputTokensDetails.ReasoningTokens != 5 {
		t.Fatalf("usage %s; want 30 in (8 cached), 12 out (5 reasoning), 42 in all", u.RawJSON())
	}
	terminal := func() string {
		t.Helper()
		all := readUntil(t, c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), terminal)
		return all[len(all)-1].json
	}
	first := terminal()
	var done responses.ResponseCompletedEvent
	if err := json.Unmarshal([]byte(first), &done); err != nil || done.Response.Usage.RawJSON() != u.RawJSON() {
		t.Fatalf("response.completed %s (%v); want GET's usage %s", first, err, u.RawJSON())
	}
	if again := terminal(); again != first {
		t.Fatalf("a replay's response.completed\n%s\nthe first's\n%s", again, first)
	}

	// None reported: null.
	id = create()
	p = promptOf(t, id)
	tb.StartPrompt(t, p)
	tb.CompletePrompt(t, p)
	got, err = c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(got.RawJSON()), &raw); err != nil || string(raw.Usage) != "null" {
		t.Fatalf("usage %s (%v); want null", raw.Usage, err)
	}
}

// The Go runtime reports what its model gives: the demo model counts its
// own tokens (the request's in, what it streamed out, its reasoning
// among them), summed over its rounds (it calls a tool, then answers).
func TestUsageFromTheDemoWorker(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true})
	c := client(t, tb, "alice")
	resp, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("how much is 6*7?")}})
	if err != nil {
		t.Fatal(err)
	}
	u := resp.Usage
	if resp.Status != "completed" || u.InputTokens == 0 || u.OutputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens ||
		u.OutputTokensDetails.ReasoningTokens == 0 || u.OutputTokensDetails.ReasoningTokens >= u.OutputTokens {
		t.Fatalf("%s: usage %s; want input and output tokens, some of them reasoning", resp.Status, u.RawJSON())
	}
}
