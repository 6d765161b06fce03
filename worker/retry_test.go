package worker

import (
	"context"
	"encoding/json"
	"io"
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
	"github.com/convo-dev/convo/postgres/dbq"
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

// TestAppendRetryAfterLostReply cuts the connection between an
// append_block's commit and its reply. The writer retries with the same
// delta_seq, and the delta is applied once.
func TestAppendRetryAfterLostReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	for _, tc := range []struct {
		name     string
		deltaSeq bool
		want     string
	}{
		{"WithDeltaSeqAppliedOnce", true, "hello world"},
		// The control: a plain retry of the same cut duplicates the text,
		// which shows the cut really fell after the commit.
		{"PlainRetryDuplicates", false, "hello world world"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
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
			q := store.Queries()
			prompt := res.PromptIDs[0]
			if err := q.PromptStart(ctx, prompt); err != nil {
				t.Fatal(err)
			}
			block, err := q.BlockStart(ctx, dbq.BlockStartParams{PromptID: prompt, BlockType: "text", Metadata: []byte("{}")})
			if err != nil {
				t.Fatal(err)
			}

			// The writer talks to PostgreSQL through the proxy, on one
			// connection, so the armed cut hits the append.
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

			var api sqlAPI = dbq.New(viaProxy)
			if !tc.deltaSeq {
				api = withoutDeltaSeq{dbq.New(viaProxy)}
			}
			stop, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			w := newWriter(stop, cancel, api, prompt, &Config{CallTimeout: 10 * time.Second, BatchInterval: -1, BatchBytes: 1 << 20})
			defer w.close()
			into := target{id: block}
			// The first append prepares the statement on the connection,
			// so the next one is a single round trip: execute and commit,
			// then the reply that the proxy drops.
			if err := w.appendText(into, "hello"); err != nil {
				t.Fatal(err)
			}
			proxy.armed.Store(true)
			if err := w.appendText(into, " world"); err != nil {
				t.Fatalf("append after the cut: %v", err)
			}
			if proxy.cuts.Load() != 1 {
				t.Fatal("the proxy cut nothing")
			}

			st, err := store.State(ctx, "local", res.ConversationID)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Messages[1].Blocks[0].Content; got != tc.want {
				t.Errorf("block text = %q, want %q", got, tc.want)
			}
		})
	}
}

// withoutDeltaSeq strips delta_seq from appends: an old-style worker.
type withoutDeltaSeq struct{ *dbq.Queries }

func (a withoutDeltaSeq) BlockAppend(ctx context.Context, arg dbq.BlockAppendParams) error {
	arg.DeltaSeq = nil
	return a.Queries.BlockAppend(ctx, arg)
}
