package stream

import "context"

// Feed wakes or feeds a Hub from PostgreSQL: NotifyFeed (LISTEN/NOTIFY) or
// LogicalFeed (logical replication). A process runs exactly one.
type Feed interface {
	// Run feeds the hub until ctx ends, reconnecting with backoff, and has
	// the hub read every followed conversation again after each connect.
	Run(ctx context.Context)
	// Connects counts successful (re)connections.
	Connects() int64
}

var (
	_ Feed = (*NotifyFeed)(nil)
	_ Feed = (*LogicalFeed)(nil)
)
