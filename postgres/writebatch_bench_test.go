package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// BenchmarkWriteBatch measures one convo.write_batch of 100 replies
// (the chat bench's shape): "appends", one append to each reply's
// streaming text block (mid-reply, every prompt running); "starts", each
// of the 100 prompts claimed and not started, its start_prompt, text
// block and first append (the first texts of a burst). Each iteration
// writes afresh: new appends, or 100 new prompts.
//
//	go test -run '^$' -bench WriteBatch ./postgres/
func BenchmarkWriteBatch(b *testing.B) {
	ctx := context.Background()
	const n = 100
	type op struct {
		Op     string    `json:"op"`
		Prompt uuid.UUID `json:"prompt"`
		Block  uuid.UUID `json:"block,omitzero"`
		Type   string    `json:"type,omitempty"`
		Text   string    `json:"text,omitempty"`
		Seq    int       `json:"seq,omitempty"`
	}
	queue := func(b *testing.B, tb *testBundle, round int) []uuid.UUID {
		if _, err := tb.pool.Exec(ctx, `SELECT convo.send_message('user' || $1::text || '-' || i::text, NULL, 'hello', '[{}]')
			FROM generate_series(1, $2) i`, fmt.Sprint(round), n); err != nil {
			b.Fatal(err)
		}
		claimed, err := tb.api.PromptClaimMany(ctx, apiq.PromptClaimManyParams{Worker: "w", LeaseSeconds: 30, MaxPrompts: n})
		if err != nil || len(claimed) != n {
			b.Fatalf("claimed %d: %v", len(claimed), err)
		}
		ids := make([]uuid.UUID, n)
		for i, c := range claimed {
			ids[i] = c.PromptID
		}
		return ids
	}
	var batch int64
	// wal sums the WAL bytes of the timed batches: unlike their time, it
	// does not depend on what else runs on the machine.
	var wal, walBatches int64
	lsn := func(b *testing.B, tb *testBundle) int64 {
		var at int64
		if err := tb.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&at); err != nil {
			b.Fatal(err)
		}
		return at
	}
	// cpu sums the CPU time of the backend that wrote the timed
	// batches (its /proc stat, in clock ticks of 10 ms): the database's
	// work, whatever else waits for the cores.
	var cpu int64
	write := func(b *testing.B, tb *testBundle, ops []op) {
		raw, err := json.Marshal(ops)
		if err != nil {
			b.Fatal(err)
		}
		batch++
		conn, err := tb.pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Release()
		var pid int
		if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			b.Fatal(err)
		}
		before, ticks := lsn(b, tb), backendTicks(b, pid)
		refused, err := apiq.New(conn).BatchWrite(ctx, apiq.BatchWriteParams{Worker: "w", Batch: batch, Ops: raw})
		if err != nil || len(refused) > 0 {
			b.Fatalf("write_batch: %v %+v", err, refused)
		}
		cpu += backendTicks(b, pid) - ticks
		wal += lsn(b, tb) - before
		walBatches++
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(wal)/float64(walBatches), "wal-bytes/batch")
		b.ReportMetric(float64(cpu*10)/float64(walBatches), "pg-cpu-ms/batch")
		wal, walBatches, cpu = 0, 0, 0
	}
	b.Run("appends", func(b *testing.B) {
		tb := setup(b)
		prompts := queue(b, tb, 0)
		blocks := make([]uuid.UUID, n)
		var ops []op
		for i, p := range prompts {
			blocks[i] = uuid.New()
			ops = append(ops, op{Op: "start_prompt", Prompt: p}, op{Op: "start_block", Prompt: p, Block: blocks[i], Type: "text"})
		}
		write(b, tb, ops)
		wal, walBatches, cpu = 0, 0, 0
		seq := 0
		for b.Loop() {
			seq++
			ops = ops[:0]
			for i, p := range prompts {
				ops = append(ops, op{Op: "append", Prompt: p, Block: blocks[i], Text: "a token ", Seq: seq})
			}
			write(b, tb, ops)
		}
		report(b)
	})
	b.Run("starts", func(b *testing.B) {
		tb := setup(b)
		round := 0
		for b.Loop() {
			b.StopTimer()
			prompts := queue(b, tb, round)
			round++
			var ops []op
			for _, p := range prompts {
				block := uuid.New()
				ops = append(ops, op{Op: "start_prompt", Prompt: p}, op{Op: "start_block", Prompt: p, Block: block, Type: "text"},
					op{Op: "append", Prompt: p, Block: block, Text: "a token ", Seq: 1})
			}
			b.StartTimer()
			write(b, tb, ops)
		}
		report(b)
	})
}

// backendTicks is the CPU time (user and system, in clock ticks) of the
// PostgreSQL backend pid so far, from /proc/<pid>/stat.
func backendTicks(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's ")": utime and stime are the 12th
	// and 13th of them.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}
