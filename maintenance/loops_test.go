package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/maintenance"
	"github.com/convo-dev/convo/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSeveralProcessesReapOnce runs three reapers at once, as three
// processes would, over prompts whose workers died: each prompt is failed
// once, and the three counters add up to the prompts.
func TestSeveralProcessesReapOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.Pool(t)
	store := postgres.New(db)
	const prompts = 12
	for range prompts {
		res, err := store.SendMessage(ctx, conversation.SendMessageParams{
			OwnerID: "local", Text: "hello?", ModelConfigs: []json.RawMessage{json.RawMessage(`{}`)},
		})
		if err != nil {
			t.Fatal(err)
		}
		// A worker claims it for one second, starts it, and dies.
		if _, err := db.Exec(ctx, `SELECT prompt_id FROM convo.claim_prompt('dead', 1)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `SELECT convo.start_prompt($1)`, res.PromptIDs[0]); err != nil {
			t.Fatal(err)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	var loops []*maintenance.Loops
	done := make(chan struct{}, 3)
	for range 3 {
		l := maintenance.New(maintenance.Options{Store: store, ReapEvery: 20 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		loops = append(loops, l)
		go func() { l.Run(runCtx); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		stop()
		for range loops {
			<-done
		}
	})

	reaped := func() float64 {
		var n float64
		for _, l := range loops {
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(l)
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() == "convo_prompt_leases_expired_total" {
					n += f.GetMetric()[0].GetCounter().GetValue()
				}
			}
		}
		return n
	}
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for reaped() < prompts {
		select {
		case <-deadline:
			t.Fatalf("%v of %d prompts reaped after 20s", reaped(), prompts)
		case <-tick.C:
		}
	}
	var failed, events int
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'failed'), count(*) FROM convo.prompts`).Scan(&failed, &events); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM convo.events WHERE kind = 'promptFailed'`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if failed != prompts || events != prompts || reaped() != prompts {
		t.Errorf("%d prompts failed, %d promptFailed events, %v counted; want %d of each", failed, events, reaped(), prompts)
	}
}

// TestLoopsCollectFiles runs the loops with a file collector over a file
// no message holds, older than the grace period: it is deleted, with its
// bytes, and counted; a newer one stays.
func TestLoopsCollectFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.Pool(t)
	svc := files.NewService(files.Options{Store: postgres.NewFileStore(db), Blobs: postgres.NewFileBlobs(db)})
	old, err := svc.Upload(ctx, "local", "old.txt", "", strings.NewReader("old bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE convo.files SET created_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	recent, err := svc.Upload(ctx, "local", "new.txt", "", strings.NewReader("new bytes"))
	if err != nil {
		t.Fatal(err)
	}
	const grace = 10 * time.Second // collected every second
	l := maintenance.New(maintenance.Options{Store: postgres.New(db), Files: svc, FileGrace: grace,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(l)
	collected := func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "convo_files_collected_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	deadline := time.Now().Add(20 * time.Second)
	for collected() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the old file was not collected within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := svc.Get(ctx, "local", old.ID); !errors.Is(err, files.ErrNotFound) {
		t.Errorf("the old file: %v, want ErrNotFound", err)
	}
	if _, err := svc.Get(ctx, "local", recent.ID); err != nil {
		t.Errorf("the recent file: %v", err)
	}
	var chunks int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM convo.file_chunks`).Scan(&chunks); err != nil || chunks != 1 {
		t.Errorf("%d chunks (%v), want 1: the recent file's", chunks, err)
	}
}
