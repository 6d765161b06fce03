// Package stream follows conversations as they change: one Hub per process
// fans each conversation's events out to its subscribers, fed by the
// process's one LISTEN connection (NotifyFeed, on a pglisten.Listener) or
// by logical replication (LogicalFeed).
//
// A notification is only a hint that a conversation has events after some
// seq. The hub reads the durable event log after the last seq it delivered,
// once per wake-up for every conversation that needs it (one batched
// query), and fans the events out. After every (re)connect of a feed it
// reads every followed conversation again, so a notification lost while
// disconnected loses nothing. Each subscriber has a bounded queue; one that
// falls behind is cut off with ErrFellBehind and resumes from its last seq,
// and never slows the hub or the other subscribers.
//
// Logical replication carries whole event rows, in commit order, so
// LogicalFeed hands them to the hub (Hub.Deliver) instead of hinting: the
// hub fans out the next event of a conversation at once, drops one it has
// delivered, and reads the log only when it sees a gap. The replication
// commands live in replication.go, the decoding of pgoutput in pgoutput.go.
package stream
