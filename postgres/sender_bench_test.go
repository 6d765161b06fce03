package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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

// BenchmarkSendMessages sends n messages at once (each a new conversation
// of its own user), through Store.SendMessage ("grouped": the sender's
// shared transactions) and, for comparison, through convo.send_message
// alone, one transaction per send as SendMessage did before ("alone"),
// on a pool of 16 connections. It reports the sends a second and each
// send's latency, p50 and p99. "idle" is one send at a time (ns/op: one
// send's time with nothing else going on).
//
//	go test -run '^$' -bench SendMessages -benchtime 3x ./postgres/
func BenchmarkSendMessages(b *testing.B) {
	ctx := context.Background()
	configs := []json.RawMessage{json.RawMessage(`{"model":"demo"}`)}
	open := func(b *testing.B) (*postgres.Store, *apiq.Queries) {
		cfg, err := pgxpool.ParseConfig(pgtest.DSN(b))
		if err != nil {
			b.Fatal(err)
		}
		cfg.MaxConns = 16
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		s := postgres.New(pool)
		if err := s.SetMaxActivePrompts(ctx, 0); err != nil {
			b.Fatal(err)
		}
		return s, apiq.New(pool)
	}
	for _, mode := range []string{"grouped", "alone"} {
		b.Run(mode+"/idle", func(b *testing.B) {
			s, api := open(b)
			i := 0
			for b.Loop() {
				i++
				p := conversation.SendMessageParams{OwnerID: fmt.Sprintf("idle-%d", i), Text: "hello", ModelConfigs: configs}
				if err := sendBy(ctx, s, api, mode, p); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, n := range []int{100, 200, 1000} {
			b.Run(fmt.Sprintf("%s/n=%d", mode, n), func(b *testing.B) {
				s, api := open(b)
				var took []time.Duration
				var total time.Duration
				round := 0
				for b.Loop() {
					round++
					lat := make([]time.Duration, n)
					var wg sync.WaitGroup
					start := make(chan struct{})
					for i := range n {
						p := conversation.SendMessageParams{OwnerID: fmt.Sprintf("u-%d-%d", round, i), Text: "hello", ModelConfigs: configs}
						wg.Go(func() {
							<-start
							began := time.Now()
							if err := sendBy(ctx, s, api, mode, p); err != nil {
								b.Error(err)
							}
							lat[i] = time.Since(began)
						})
					}
					began := time.Now()
					close(start)
					wg.Wait()
					total += time.Since(began)
					took = append(took, lat...)
				}
				slices.Sort(took)
				b.ReportMetric(float64(len(took))/total.Seconds(), "sends/s")
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50_ms")
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99_ms")
			})
		}
	}
}

// sendBy sends p through the sender ("grouped") or convo.send_message in
// a transaction of its own ("alone").
func sendBy(ctx context.Context, s *postgres.Store, api *apiq.Queries, mode string, p conversation.SendMessageParams) error {
	if mode == "grouped" {
		_, err := s.SendMessage(ctx, p)
		return err
	}
	configs, _ := json.Marshal(p.ModelConfigs)
	_, err := api.MessageSend(ctx, apiq.MessageSendParams{OwnerID: p.OwnerID, Text: p.Text, ModelConfigs: configs, FileIds: []uuid.UUID{}})
	return err
}
