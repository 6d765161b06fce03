package postgres

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ForTransactionPooler sets cfg up for a pool whose connections go through
// a transaction pooler (PgBouncer with pool_mode = transaction), where
// consecutive transactions of one client connection may run on different
// server connections, and nothing of a session outlives its transaction.
//
// It makes pgx send every statement as the unnamed prepared statement
// (QueryExecModeCacheDescribe) instead of its default, named prepared
// statements kept per connection: PgBouncer 1.18 does not carry those
// from one server connection to the next, so the second use of a query
// would fail with "prepared statement ... does not exist". Of the modes
// without named statements, CacheDescribe sends each execution as one
// self-contained message sequence (Parse, Bind, Describe, Execute, Sync),
// which a pooler never splits; DescribeExec describes in one round trip
// and executes in the next, which a pooler may route to another server
// connection (one that never saw the statement); Exec guesses parameter
// types from Go types and reads results as text, which convo's uuid and
// jsonb arguments do not survive. What CacheDescribe caches is each
// query's parameter and result types, which change only with a migration
// that changes a query's result, as named statements would.
//
// The session state convo needs is then set per transaction
// (Store.SetSnapshotBytes), and LISTEN, the logical feed and the
// migrations' session lock need a direct connection (cmd/api's
// CONVO_DIRECT_DATABASE_URL): TransactionPooled tells a listener that
// would otherwise LISTEN through cfg.
func ForTransactionPooler(cfg *pgxpool.Config) {
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
}

// TransactionPooled reports whether cfg was set up by ForTransactionPooler
// (or names a mode without named prepared statements in its URL, such as
// default_query_exec_mode=cache_describe, which is what one sets for a
// transaction pooler): a LISTEN through such connections would not hold.
func TransactionPooled(cfg *pgx.ConnConfig) bool {
	switch cfg.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		return true
	}
	return false
}
