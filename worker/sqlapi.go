package worker

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/postgres/dbq"
)

// sqlAPI is all the runtime asks of PostgreSQL: the SQL worker API
// (db/queries/worker.sql): the process's heartbeat, claims, the batches of
// every reply's writes (convo.write_batch), and the few single calls made
// when a prompt ends badly; and the context queries (db/queries/worker_context.sql). Each
// is a function a connection of the worker role may call (docs/deploy.md,
// "The worker role"); the reads answer only about a prompt the worker
// holds.
// *dbq.Queries on a pool implements it; tests wrap it to watch the calls.
type sqlAPI interface {
	PromptClaimMany(ctx context.Context, arg dbq.PromptClaimManyParams) ([]dbq.PromptClaimManyRow, error)
	BatchWrite(ctx context.Context, arg dbq.BatchWriteParams) ([]dbq.BatchWriteRow, error)
	BatchMark(ctx context.Context, arg dbq.BatchMarkParams) (int64, error)
	PromptHeartbeat(ctx context.Context, arg dbq.PromptHeartbeatParams) (bool, error)
	WorkerHeartbeat(ctx context.Context, arg dbq.WorkerHeartbeatParams) (bool, error)
	WorkerPromptsGone(ctx context.Context, arg dbq.WorkerPromptsGoneParams) ([]dbq.WorkerPromptsGoneRow, error)
	PromptFail(ctx context.Context, arg dbq.PromptFailParams) error
	PromptRelease(ctx context.Context, arg dbq.PromptReleaseParams) (bool, error)
	PromptStatus(ctx context.Context, arg dbq.PromptStatusParams) (string, error)
	WorkerPromptRead(ctx context.Context, arg dbq.WorkerPromptReadParams) ([]dbq.WorkerPromptReadRow, error)
	WorkerInputs(ctx context.Context, arg dbq.WorkerInputsParams) ([]dbq.WorkerInputsRow, error)
	WorkerReply(ctx context.Context, arg dbq.WorkerReplyParams) ([]dbq.WorkerReplyRow, error)
	WorkerFileChunk(ctx context.Context, arg dbq.WorkerFileChunkParams) ([]byte, error)
}

var _ sqlAPI = (*dbq.Queries)(nil)

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
