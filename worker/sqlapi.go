package worker

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/postgres/dbq"
)

// sqlAPI is all the runtime asks of PostgreSQL: the SQL worker API
// (db/queries/worker.sql, one convo.* function per call, each its own
// transaction) and the context query (db/queries/worker_context.sql).
// *dbq.Queries on a pool implements it; tests wrap it to watch the calls.
type sqlAPI interface {
	PromptClaim(ctx context.Context, arg dbq.PromptClaimParams) ([]dbq.PromptClaimRow, error)
	PromptStart(ctx context.Context, promptID uuid.UUID) error
	PromptHeartbeat(ctx context.Context, arg dbq.PromptHeartbeatParams) (bool, error)
	PromptComplete(ctx context.Context, promptID uuid.UUID) error
	PromptFail(ctx context.Context, arg dbq.PromptFailParams) error
	PromptRelease(ctx context.Context, arg dbq.PromptReleaseParams) (bool, error)
	PromptStatus(ctx context.Context, promptID uuid.UUID) (string, error)
	BlockStart(ctx context.Context, arg dbq.BlockStartParams) (uuid.UUID, error)
	BlockAppend(ctx context.Context, arg dbq.BlockAppendParams) error
	BlockEnd(ctx context.Context, arg dbq.BlockEndParams) error
	ToolCallStart(ctx context.Context, arg dbq.ToolCallStartParams) (uuid.UUID, error)
	ToolCallProgress(ctx context.Context, arg dbq.ToolCallProgressParams) error
	ToolCallComplete(ctx context.Context, arg dbq.ToolCallCompleteParams) error
	ToolCallFail(ctx context.Context, arg dbq.ToolCallFailParams) error
	WorkerContextList(ctx context.Context, promptID uuid.UUID) ([]dbq.WorkerContextListRow, error)
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
