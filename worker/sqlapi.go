package worker

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/worker/internal/wdb"
)

// sqlAPI is all the runtime asks of PostgreSQL: the SQL worker API
// (db/queries/worker/worker.sql): the process's heartbeat, claims, the
// batches of every reply's writes (convo.write_batch), and the few single
// calls made when a prompt ends badly; and the reads of a prompt's context
// (db/queries/worker/worker_context.sql). sqlc compiles them into package
// wdb, the runtime's alone. Each is a function a connection of the worker
// role may call (docs/deploy.md, "The worker role"); the reads answer only
// about a prompt the worker holds.
// *wdb.Queries on a pool implements it; tests wrap it to watch the calls.
type sqlAPI interface {
	PromptClaimMany(ctx context.Context, arg wdb.PromptClaimManyParams) ([]wdb.PromptClaimManyRow, error)
	PromptClaimManyTraced(ctx context.Context, arg wdb.PromptClaimManyTracedParams) ([]wdb.PromptClaimManyTracedRow, error)
	BatchWrite(ctx context.Context, arg wdb.BatchWriteParams) ([]wdb.BatchWriteRow, error)
	BatchMark(ctx context.Context, arg wdb.BatchMarkParams) (int64, error)
	PromptHeartbeat(ctx context.Context, arg wdb.PromptHeartbeatParams) (bool, error)
	WorkerHeartbeat(ctx context.Context, arg wdb.WorkerHeartbeatParams) (bool, error)
	WorkerPromptsGone(ctx context.Context, arg wdb.WorkerPromptsGoneParams) ([]wdb.WorkerPromptsGoneRow, error)
	PromptFail(ctx context.Context, arg wdb.PromptFailParams) error
	PromptRelease(ctx context.Context, arg wdb.PromptReleaseParams) (bool, error)
	PromptStatus(ctx context.Context, arg wdb.PromptStatusParams) (string, error)
	WorkerPromptRead(ctx context.Context, arg wdb.WorkerPromptReadParams) ([]wdb.WorkerPromptReadRow, error)
	WorkerInputs(ctx context.Context, arg wdb.WorkerInputsParams) ([]wdb.WorkerInputsRow, error)
	WorkerReply(ctx context.Context, arg wdb.WorkerReplyParams) ([]wdb.WorkerReplyRow, error)
	WorkerFileChunk(ctx context.Context, arg wdb.WorkerFileChunkParams) ([]byte, error)
}

var _ sqlAPI = (*wdb.Queries)(nil)

// sqlMessage returns the message of a PostgreSQL error without the
// "ERROR: … (SQLSTATE …)" decoration, or err's text.
func sqlMessage(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	return err.Error()
}

// connectionLost reports whether err came from the connection rather than
// from PostgreSQL's answer.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
