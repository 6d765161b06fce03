package conformance

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/internal/testwait"
)

// cutLock is the advisory lock that holds a cut batch's transaction open
// until the proxy drops what the server sends.
const cutLock = 7271001 // cutSQL spells it out

// cutSQL replaces convo.write_batch, in one scenario's database, by a
// wrapper of the same signature that calls the real function and then,
// when the one-shot flag is armed and the batch appends text, disarms it
// and waits for the driver's advisory lock before returning: the batch is
// applied, its transaction still open, its answer not yet sent. The real
// function goes on as convo.write_batch_uncut, a copy whose body names
// its parameters by the new name (it qualifies them with the function's).
const cutSQL = `
CREATE SCHEMA conformance;
CREATE TABLE conformance.cut_after_commit (
    armed   boolean NOT NULL,
    -- the batch that was cut, and how often it came again
    worker  text,
    lane    integer,
    batch   bigint,
    resent  integer NOT NULL DEFAULT 0
);
INSERT INTO conformance.cut_after_commit (armed) VALUES (false);
DO $do$
DECLARE
    v_src text;
BEGIN
    SELECT prosrc INTO STRICT v_src FROM pg_proc
     WHERE oid = 'convo.write_batch(text, bigint, jsonb, integer)'::regprocedure;
    EXECUTE format($f$
        CREATE FUNCTION convo.write_batch_uncut(worker text, batch bigint, ops jsonb, lane integer DEFAULT 0)
        RETURNS TABLE (prompt_id uuid, op_index integer, code text, message text)
        LANGUAGE plpgsql AS %L$f$, replace(v_src, 'write_batch.', 'write_batch_uncut.'));
END $do$;
CREATE OR REPLACE FUNCTION convo.write_batch(worker text, batch bigint, ops jsonb, lane integer DEFAULT 0)
RETURNS TABLE (prompt_id uuid, op_index integer, code text, message text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT * FROM convo.write_batch_uncut($1, $2, $3, $4);
    UPDATE conformance.cut_after_commit c SET resent = c.resent + 1
     WHERE (c.worker, c.lane, c.batch) = ($1, $4, $2);
    IF $3 @> '[{"op": "append"}]' THEN
        UPDATE conformance.cut_after_commit c SET armed = false, worker = $1, lane = $4, batch = $2 WHERE c.armed;
        IF FOUND THEN
            PERFORM pg_advisory_xact_lock(7271001);
        END IF;
    END IF;
END $$;`

// installCut installs the wrapper; it must run before the runner starts.
func installCut(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	if _, err := db.Exec(context.Background(), cutSQL); err != nil {
		t.Fatalf("install the cutAfterCommit wrapper of convo.write_batch: %v", err)
	}
}

// cutAfterCommit breaks the runner's connection after a write_batch that
// appends text has committed and before its answer arrives, without a
// race: the driver holds the advisory lock and arms the flag; the next
// such batch applies its ops and waits for the lock inside its
// transaction; the driver sees it waiting, has the proxy drop every byte
// from the server, releases the lock, waits until the transaction
// committed (the disarmed flag shows), then closes the proxied
// connections. The runner must send the batch again, unchanged, and
// write_batch answers a repeated batch number as applied.
func (run *scenarioRun) cutAfterCommit() {
	t := run.t
	t.Helper()
	ctx := context.Background()
	conn, err := run.db.Acquire(ctx)
	if err != nil {
		t.Fatalf("cutAfterCommit: %v", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, cutLock); err != nil {
		t.Fatalf("cutAfterCommit: take the lock: %v", err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, cutLock); err != nil {
				t.Errorf("cutAfterCommit: release the lock: %v", err)
			}
		}
	}
	defer unlock()
	if _, err := conn.Exec(ctx, `UPDATE conformance.cut_after_commit SET armed = true`); err != nil {
		t.Fatalf("cutAfterCommit: arm: %v", err)
	}
	testwait.For(t, "a write_batch that appends text to wait for the cut (the reply streamed nothing more?)", func() bool {
		var waiting bool
		// The batch's backend waits for cutLock (a one-part key: objid).
		err := conn.QueryRow(ctx, `
SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objid = $1
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND a.wait_event_type = 'Lock')`, cutLock).Scan(&waiting)
		if err != nil {
			t.Fatalf("cutAfterCommit: read pg_locks: %v", err)
		}
		return waiting
	})
	run.proxy.DropFromServer()
	unlock()
	testwait.For(t, "the cut batch to commit", func() bool {
		var armed bool
		if err := conn.QueryRow(ctx, `SELECT armed FROM conformance.cut_after_commit`).Scan(&armed); err != nil {
			t.Fatalf("cutAfterCommit: read the flag: %v", err)
		}
		return !armed
	})
	run.proxy.Reset()
}

// checkResent checks, once the reply settled, that the runner sent the
// cut batch again (write_batch answered it as applied).
func (run *scenarioRun) checkResent() {
	t := run.t
	t.Helper()
	var batch int64
	var resent int
	if err := run.db.QueryRow(context.Background(), `SELECT batch, resent FROM conformance.cut_after_commit`).Scan(&batch, &resent); err != nil {
		t.Fatalf("cutAfterCommit: read the flag: %v", err)
	}
	if resent == 0 {
		t.Errorf("cutAfterCommit: the runner never sent the cut batch (number %d) again: it must resend a batch whose answer it lost, unchanged", batch)
	}
}
