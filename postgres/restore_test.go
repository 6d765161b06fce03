package postgres_test

import (
	"context"
	"testing"

	"github.com/convo-dev/convo/internal/pgtest"
)

// TestNoteDatabaseIdentity checks that the first call records the
// database's identity and that a restart finds it unchanged, moving
// nothing; that a database whose identity changed (as a restore's does:
// another cluster, oid or timeline) has every conversation's seq moved
// forward by 2^40, once; and that the next start finds it unchanged again.
func TestNoteDatabaseIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	conv, err := pgtest.FillConversation(ctx, dsn, "ana", 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	lastSeq := func() int64 {
		t.Helper()
		var seq int64
		if err := tb.pool.QueryRow(ctx, `SELECT last_seq FROM convo.conversations WHERE id = $1`, conv).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	before := lastSeq()
	for i, what := range []string{"the first start", "a restart"} {
		r, err := tb.store.NoteDatabaseIdentity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Restored || lastSeq() != before {
			t.Fatalf("call %d (%s): %+v, seq %d → %d; want nothing restored or moved", i, what, r, before, lastSeq())
		}
	}
	// What a restore into another cluster looks like from here.
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.database_identity SET system_identifier = '1', timeline = timeline + 1`); err != nil {
		t.Fatal(err)
	}
	r, err := tb.store.NoteDatabaseIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Restored || r.Conversations != 1 || lastSeq() != before+1<<40 {
		t.Fatalf("after the identity changed: %+v, seq %d → %d; want restored, 1 conversation moved by 2^40", r, before, lastSeq())
	}
	var restores int
	if err := tb.pool.QueryRow(ctx, `SELECT restores FROM convo.database_identity`).Scan(&restores); err != nil || restores != 1 {
		t.Fatalf("restores = %d (%v); want 1", restores, err)
	}
	if r, err := tb.store.NoteDatabaseIdentity(ctx); err != nil || r.Restored || lastSeq() != before+1<<40 {
		t.Fatalf("the start after: %+v (%v), seq %d; want nothing restored or moved again", r, err, lastSeq())
	}
}
