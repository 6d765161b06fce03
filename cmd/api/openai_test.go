package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/testbin"
)

// openaiEvent is one event of a Responses stream as the SDK read it.
type openaiEvent struct {
	seq  int64
	typ  string
	json string
}

// openaiEvents reads s until a terminal event (true) or the stream's end
// (false, with its error).
func openaiEvents(s *ssestream.Stream[responses.ResponseStreamEventUnion], stop func(responses.ResponseStreamEventUnion) bool) ([]openaiEvent, bool, error) {
	var out []openaiEvent
	for s.Next() {
		e := s.Current()
		out = append(out, openaiEvent{e.SequenceNumber, e.Type, e.RawJSON()})
		if stop(e) {
			return out, true, nil
		}
	}
	return out, false, s.Err()
}

func openaiTerminal(e responses.ResponseStreamEventUnion) bool {
	return e.Type == "response.completed" || e.Type == "response.failed" || e.Type == "response.incomplete"
}

// TestOpenAIResumeAfterServerKilled kills (SIGKILL) the server whose POST
// /v1/responses is streaming a background reply, while a second server on
// the same database keeps running, with the worker: the SDK's stream
// drops, and GET /v1/responses/{id}?stream=true&starting_after=N on the
// second server, N the last sequence_number the client saw, continues
// with N+1: the reply completes, no number repeats or is missing, and the
// events are those a replay from the start makes, byte for byte.
func TestOpenAIResumeAfterServerKilled(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, apiPkg)
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a := startProcess(t, bin, "DATABASE_URL="+dsn, "CONVO_WORKERS=0")
	b := startProcess(t, bin, "DATABASE_URL="+dsn, "CONVO_WORKERS=1", "CONVO_DEMO_TOKENS_PER_SECOND=150")
	sdk := func(url string) openaisdk.Client {
		return openaisdk.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("local"), option.WithMaxRetries(0))
	}

	ca, cb := sdk(a.url), sdk(b.url)
	s := ca.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo", Background: openaisdk.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("Tell me about the weather")}})
	seen, ended, err := openaiEvents(s, func(e responses.ResponseStreamEventUnion) bool {
		return e.Type == "response.output_text.delta" // mid-reply
	})
	if !ended || err != nil || len(seen) == 0 {
		t.Fatalf("A's stream before the kill: %v %v %v", seen, ended, err)
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	// What A sent before it died, still in the connection: never the end.
	more, ended, _ := openaiEvents(s, openaiTerminal)
	if ended {
		t.Fatalf("A's stream ended cleanly (%s) although A was killed mid-reply", more[len(more)-1].typ)
	}
	seen = append(seen, more...)
	var created struct {
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if seen[0].typ != "response.created" || json.Unmarshal([]byte(seen[0].json), &created) != nil || created.Response.ID == "" {
		t.Fatalf("A's stream starts %s; want response.created with the response's id", seen[0].json)
	}
	id := created.Response.ID
	last := seen[len(seen)-1].seq

	rest, ended, err := openaiEvents(cb.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{
		StartingAfter: openaisdk.Int(last)}), openaiTerminal)
	if !ended || err != nil {
		t.Fatalf("the resume on B after %d: %d events, ended %v, %v (the reply may have ended before: slow the demo model down)",
			last, len(rest), ended, err)
	}
	if len(rest) < 2 {
		t.Fatalf("the resume on B had %d events; want the rest of the reply (the demo model too fast?)", len(rest))
	}
	t.Logf("A's stream: %d events before the kill; B's resume after %d: %d more", len(seen), last, len(rest))
	all := append(seen, rest...)
	for i, e := range all {
		if e.seq != int64(i) {
			t.Fatalf("event %d (%s) has sequence_number %d: A's events and B's resume after %d are not 0, 1, 2, …", i, e.typ, e.seq, last)
		}
	}
	if end := all[len(all)-1]; end.typ != "response.completed" {
		t.Fatalf("the resumed stream ends with %s; want response.completed", end.typ)
	}

	replay, ended, err := openaiEvents(cb.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), openaiTerminal)
	if !ended || err != nil || len(replay) != len(all) {
		t.Fatalf("a replay from the start: %d events, ended %v, %v; want the %d of A's stream and B's resume", len(replay), ended, err, len(all))
	}
	for i := range all {
		if replay[i].json != all[i].json {
			t.Fatalf("event %d: the replay has %s, the killed stream and its resume %s", i, replay[i].json, all[i].json)
		}
	}
	got, err := cb.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.Status != "completed" || got.OutputText() == "" {
		t.Fatalf("GET on B: %v %v", err, got)
	}
	b.stop(t)
}
