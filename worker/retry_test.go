package worker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/postgres"
	"github.com/convo-dev/convo/worker/internal/wdb"
)

// cuttingProxy forwards TCP to PostgreSQL. Armed, it drops the next reply
// from the server and closes that connection: the statement ran and
// committed, but the client never hears so.
type cuttingProxy struct {
	ln    net.Listener
	to    string
	armed atomic.Bool
	cuts  atomic.Int32
	wg    sync.WaitGroup
}

func newCuttingProxy(t *testing.T, to string) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{ln: ln, to: to}
	p.wg.Go(p.serve)
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *cuttingProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.to)
		if err != nil {
			client.Close()
			continue
		}
		p.wg.Go(func() { io.Copy(server, client); server.Close() }) //nolint:errcheck
		p.wg.Go(func() {
			defer client.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && p.armed.CompareAndSwap(true, false) {
					p.cuts.Add(1)
					server.Close()
					return
				}
				if n > 0 {
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

// TestBatchRetryAfterLostReply cuts the connection between a batch's
// commit and its reply. The committer sends the same batch again, which
// write_batch recognises by its number: the text is written once.
func TestBatchRetryAfterLostReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := postgres.New(db)
	res, err := store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: "local", Text: "hi", ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := wdb.New(db).PromptClaimMany(ctx, wdb.PromptClaimManyParams{Worker: "w", LeaseSeconds: 30, MaxPrompts: 1}); err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v %v", rows, err)
	}

	// The committer talks to PostgreSQL through the proxy, on one
	// connection, so the armed cut hits the batch.
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCuttingProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(proxy.ln.Addr().(*net.TCPAddr).Port)
	cfg.MaxConns = 1
	viaProxy, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer viaProxy.Close()

	calls := &countingBatches{sqlAPI: wdb.New(viaProxy)}
	m := newPoolMetrics()
	c := newCommitter(calls, "w", 0, false, &Config{CallTimeout: 10 * time.Second, LeaseSeconds: 30, HeartbeatInterval: 10 * time.Second,
		BatchBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}, &m)
	stop, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w, err := newWriter(stop, cancel, c, nil, res.PromptIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	// The first batch prepares the statement on the connection, so the
	// next one is a single round trip: execute and commit, then the reply
	// that the proxy drops.
	_ = w.start()
	block, _ := w.startBlock("text", nil)
	_ = w.appendText(target{id: block}, "hello")
	c.flush(ctx)
	proxy.armed.Store(true)
	_ = w.appendText(target{id: block}, " world")
	c.flush(ctx)
	if err := w.sync(); err != nil {
		t.Fatalf("after the cut: %v", err)
	}
	if proxy.cuts.Load() != 1 || calls.n.Load() != 3 {
		t.Fatalf("%d cuts, %d calls: want the second batch cut once and sent again", proxy.cuts.Load(), calls.n.Load())
	}

	st, err := store.State(ctx, "local", res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Messages[1].Blocks[0].Content; got != "hello world" {
		t.Errorf("block text = %q, want %q", got, "hello world")
	}
	events, err := store.EventsAfter(ctx, res.ConversationID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	deltas := 0
	for _, e := range events {
		if e.Kind == conversation.EventBlockDelta {
			deltas++
		}
	}
	if deltas != 2 {
		t.Errorf("%d delta events, want 2", deltas)
	}
}

// countingBatches counts write_batch calls.
type countingBatches struct {
	sqlAPI
	n atomic.Int32
}

func (c *countingBatches) BatchWrite(ctx context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error) {
	c.n.Add(1)
	return c.sqlAPI.BatchWrite(ctx, arg)
}
