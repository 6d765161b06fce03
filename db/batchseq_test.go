package db_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// TestAppendSeqFromOne writes appends whose seq is not a whole number from
// 1 (-1 and 0, which would pass for retries of appends applied already;
// a fraction; a string; one past int4), through write_batch and
// append_block: each is refused CV003 naming the op and its field, and
// changes nothing; seq 1 then appends.
func TestAppendSeqFromOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	block := tb.startBlock(t, r.promptID, "text")
	before := tb.fingerprint(t)
	batch := int64(0)
	for _, seq := range []any{-1, 0, 1.5, "1", 2147483648, nil} {
		batch++
		op := appendOp(r, block, "lost", 0)
		op["seq"] = seq
		if seq == nil {
			delete(op, "seq")
		}
		rows, err := tb.writeBatch(t, batch, op)
		want := `write_batch: op "append" needs "seq", the number of this append to its block (a whole number: 1, 2, 3, …), got `
		if err != nil || len(rows) != 1 || rows[0].Code != sqlstate.InvalidArgument || !strings.HasPrefix(rows[0].Message, want) {
			t.Errorf("seq %v: %+v %v; want the prompt refused with CV003 %q", seq, rows, err, want)
			continue
		}
		if got, _ := json.Marshal(seq); seq != nil && !strings.HasSuffix(rows[0].Message, string(got)) {
			t.Errorf("seq %v: %q does not name the seq given", seq, rows[0].Message)
		}
	}
	for _, seq := range []int32{-1, 0} {
		err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: block, Delta: "lost", DeltaSeq: &seq})
		if pgErr := requireSQLState(t, err, sqlstate.InvalidArgument); !strings.Contains(pgErr.Message, "append_block: delta_seq must be 1 or more") {
			t.Errorf("append_block with delta_seq %d: %q", seq, pgErr.Message)
		}
	}
	// The refused batches are recorded as applied (their numbers are
	// used), and wrote nothing else.
	if after := tb.fingerprint(t); after != before {
		t.Errorf("refused appends changed state:\nbefore %s\nafter  %s", before, after)
	}
	if rows, err := tb.writeBatch(t, batch+1, appendOp(r, block, "kept", 1)); err != nil || len(rows) != 0 {
		t.Fatalf("seq 1: %+v %v", rows, err)
	}
	if text, _ := tb.blockContent(t, r, block); text != "kept" {
		t.Errorf("block text %q, want kept", text)
	}
}
