package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres"
)

// snapshotFixture is a database with conversations of every shape a
// snapshot meets: a long one (older messages left out), a reply in
// progress with streaming text, an open tool call with output so far and
// answered input requests past the budget, an empty one, and one of
// another owner.
type snapshotFixture struct {
	long, live, empty, foreign uuid.UUID
}

func newSnapshotFixture(t *testing.T, tb *testBundle, dsn string) snapshotFixture {
	t.Helper()
	ctx := context.Background()
	var f snapshotFixture
	var err error
	if f.long, err = pgtest.FillConversation(ctx, dsn, "local", 30, 10_000); err != nil {
		t.Fatal(err)
	}
	r := tb.startReply(t)
	f.live = r.conversationID
	done := tb.startBlock(t, r.promptID, "text")
	tb.append(t, done, "finished text")
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: done}); err != nil {
		t.Fatal(err)
	}
	output, err := json.Marshal(map[string]string{"output": strings.Repeat("x", 20_000)})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		call := tb.toolCall(t, r.promptID, "read_page")
		tb.requestInput(t, call, "client_tool", `{}`)
		if err := tb.answer(ctx, call, string(output)); err != nil {
			t.Fatal(err)
		}
	}
	running := tb.toolCall(t, r.promptID, "search")
	if err := tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: running, Output: "found 3; "}); err != nil {
		t.Fatal(err)
	}
	streaming := tb.startBlock(t, r.promptID, "text")
	for i := range 20 {
		tb.append(t, streaming, fmt.Sprintf("<%d>", i))
	}
	f.empty = tb.create(t, "local")
	f.foreign = tb.create(t, "someone-else")
	return f
}

// create creates an empty conversation of owner.
func (tb *testBundle) create(t testing.TB, owner string) uuid.UUID {
	t.Helper()
	c, err := tb.store.CreateConversation(context.Background(), owner, "untitled")
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// TestRecentStatesMatchRecentState: a group read answers each request
// with exactly what RecentState reads for it alone (messages, blocks with
// the streaming text so far, tool calls with their output so far, input
// requests within the request's own budget, Older, Seq), whatever else is
// in the group: the same conversation with another budget, twice with
// the same, another owner's conversation (NotFound for that request
// only), an unknown one, a budget that is not positive.
func TestRecentStatesMatchRecentState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	f := newSnapshotFixture(t, tb, dsn)

	reqs := []postgres.StateRequest{
		{OwnerID: "local", ConversationID: f.long, MaxBytes: 50_000},
		{OwnerID: "local", ConversationID: f.live, MaxBytes: 256 << 10},
		{OwnerID: "local", ConversationID: f.foreign, MaxBytes: 256 << 10},
		{OwnerID: "local", ConversationID: f.long, MaxBytes: 4096},
		{OwnerID: "local", ConversationID: f.live, MaxBytes: 30_000},
		{OwnerID: "local", ConversationID: uuid.New(), MaxBytes: 4096},
		{OwnerID: "local", ConversationID: f.empty, MaxBytes: 4096},
		{OwnerID: "someone-else", ConversationID: f.foreign, MaxBytes: 4096},
		{OwnerID: "local", ConversationID: f.live, MaxBytes: 256 << 10},
		{OwnerID: "local", ConversationID: f.live, MaxBytes: 0},
	}
	results, err := tb.store.RecentStates(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(results), len(reqs))
	}
	for i, r := range reqs {
		got := results[i]
		if r.MaxBytes <= 0 {
			if got.Err == nil {
				t.Errorf("request %d (maxBytes %d): no error", i, r.MaxBytes)
			}
			continue
		}
		want, wantErr := tb.store.RecentState(ctx, r.OwnerID, r.ConversationID, r.MaxBytes)
		if wantErr != nil {
			if conversation.ErrorCode(got.Err) != conversation.NotFound || got.Err.Error() != wantErr.Error() {
				t.Errorf("request %d: error %v; want RecentState's %v", i, got.Err, wantErr)
			}
			continue
		}
		if got.Err != nil {
			t.Errorf("request %d: %v", i, got.Err)
			continue
		}
		if !reflect.DeepEqual(got.State, want) {
			t.Errorf("request %d (%s, %d bytes): the group's state differs from RecentState's:\n got %s\nwant %s",
				i, r.ConversationID, r.MaxBytes, summary(got.State), summary(want))
		}
	}
	live := results[1].State
	if s := live.Streaming(); len(s) != 1 || s[0].Content != "<0><1><2><3><4><5><6><7><8><9><10><11><12><13><14><15><16><17><18><19>" {
		t.Errorf("the live reply's streaming blocks: %+v; want the text so far", s)
	}
	var outputs []string
	for _, blk := range live.Messages[len(live.Messages)-1].Blocks {
		if tc := blk.ToolCall; tc != nil && tc.Status == conversation.ToolCallRunning {
			outputs = append(outputs, tc.Output)
		}
	}
	if len(outputs) != 1 || outputs[0] != "found 3; " {
		t.Errorf("running tool calls' output: %q; want the search's so far", outputs)
	}
	if len(live.PendingInputs) != 5 || len(results[4].State.PendingInputs) != 5 {
		t.Errorf("pending inputs: %d and %d; want the 5 open requests in both budgets", len(live.PendingInputs), len(results[4].State.PendingInputs))
	}
	if !results[0].State.Older || len(results[3].State.Messages) >= len(results[0].State.Messages) {
		t.Errorf("the long conversation: %d messages in 50,000 bytes, %d in 4096; want fewer in the smaller budget, older ones left out",
			len(results[0].State.Messages), len(results[3].State.Messages))
	}

	// Two requests of one conversation share no blocks or tool calls:
	// what one caller changes, the other does not see.
	a, b := results[1].State, results[8].State
	a.Messages[len(a.Messages)-1].Blocks[0].Content = "changed"
	for _, blk := range a.Messages[len(a.Messages)-1].Blocks {
		if blk.ToolCall != nil {
			blk.ToolCall.Output = "changed"
		}
	}
	for _, blk := range b.Messages[len(b.Messages)-1].Blocks {
		if blk.Content == "changed" || (blk.ToolCall != nil && blk.ToolCall.Output == "changed") {
			t.Fatal("two results of one conversation share their blocks")
		}
	}
}

// summary is a short description of a state, for failures.
func summary(st conversation.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seq %d, older %v, %d inputs, messages:", st.Seq, st.Older, len(st.PendingInputs))
	for _, m := range st.Messages {
		fmt.Fprintf(&b, " %d(%d blocks)", m.Position, len(m.Blocks))
	}
	return b.String()
}

// newSnapshotReader is a SnapshotReader on a pool of conns connections.
func newSnapshotReader(t testing.TB, dsn string, conns int32) *postgres.SnapshotReader {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return postgres.NewSnapshotReader(pool)
}

// TestSnapshotReaderGroups: 300 snapshots asked for at once, over 60
// conversations and a foreign one among them, are read in far fewer
// group reads than requests; each caller gets RecentState's state, and
// the caller of the foreign conversation alone gets NotFound.
func TestSnapshotReaderGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	reader := newSnapshotReader(t, dsn, 2)
	var convs []uuid.UUID
	for i := range 60 {
		r := tb.startReply(t)
		block := tb.startBlock(t, r.promptID, "text")
		tb.append(t, block, fmt.Sprintf("reply %d so far", i))
		convs = append(convs, r.conversationID)
	}
	foreign := tb.create(t, "someone-else")
	want := make(map[uuid.UUID]conversation.State)
	for _, id := range convs {
		var err error
		if want[id], err = tb.store.RecentState(ctx, "local", id, 4096); err != nil {
			t.Fatal(err)
		}
	}

	const requests = 300
	const foreignAt = 150
	states := make([]conversation.State, requests)
	errs := make([]error, requests)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range requests {
		wg.Go(func() {
			<-start
			id := convs[i%len(convs)]
			if i == foreignAt {
				id = foreign
			}
			states[i], errs[i] = reader.RecentState(ctx, "local", id, 4096)
		})
	}
	close(start)
	wg.Wait()
	for i := range requests {
		if i == foreignAt {
			if conversation.ErrorCode(errs[i]) != conversation.NotFound {
				t.Errorf("the foreign conversation's request: %v; want NotFound", errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("request %d: %v", i, errs[i])
			continue
		}
		if w := want[convs[i%len(convs)]]; !reflect.DeepEqual(states[i], w) {
			t.Errorf("request %d: got %s, want %s", i, summary(states[i]), summary(w))
		}
	}
	reads := reader.Reads()
	if reads > requests/5 {
		t.Errorf("%d group reads for %d snapshots asked for at once; want far fewer reads than requests", reads, requests)
	}
	t.Logf("%d snapshots in %d group reads", requests, reads)
}

// TestSnapshotReaderLoneRequest: a request that finds the reader idle is
// read at once, alone (no wait to gather others), and takes about what a
// direct read takes.
func TestSnapshotReaderLoneRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	reader := newSnapshotReader(t, dsn, 2)
	r := tb.startReply(t)
	tb.append(t, tb.startBlock(t, r.promptID, "text"), "so far")
	const n = 20
	timed := func(read func() error) time.Duration {
		started := time.Now()
		for range n {
			if err := read(); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(started)
	}
	// Warm both pools first.
	if _, err := reader.RecentState(ctx, "local", r.conversationID, 4096); err != nil {
		t.Fatal(err)
	}
	before := reader.Reads()
	direct := timed(func() error { _, err := tb.store.RecentState(ctx, "local", r.conversationID, 4096); return err })
	grouped := timed(func() error { _, err := reader.RecentState(ctx, "local", r.conversationID, 4096); return err })
	if reads := reader.Reads() - before; reads != n {
		t.Errorf("%d lone requests made %d group reads; want one each", n, reads)
	}
	// A loose bound: a lone request waits for nothing.
	if grouped > 10*direct+time.Second {
		t.Errorf("%d lone reads took %v through the reader, %v directly", n, grouped, direct)
	}
	t.Logf("%d lone reads: %v through the reader, %v directly", n, grouped, direct)
}

// TestSnapshotReaderCallerGoes: a caller whose context ends gets its
// error at once; the reader goes on serving the others.
func TestSnapshotReaderCallerGoes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	reader := newSnapshotReader(t, dsn, 1)
	r := tb.startReply(t)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := reader.RecentState(gone, "local", r.conversationID, 4096); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled caller: %v; want context.Canceled", err)
	}
	if _, err := reader.RecentState(context.Background(), "local", r.conversationID, 0); err == nil {
		t.Fatal("maxBytes 0: no error")
	}
	st, err := reader.RecentState(context.Background(), "local", r.conversationID, 4096)
	if err != nil || st.Conversation.ID != r.conversationID {
		t.Fatalf("after them: %v, %s", err, st.Conversation.ID)
	}
}
