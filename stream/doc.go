// Package stream follows conversations as they change: one Hub per process
// fans each conversation's events out to its subscribers, fed by a single
// dedicated LISTEN connection (NotifyFeed) or by logical replication
// (LogicalFeed).
//
// A notification is only a hint that a conversation has events after some
// seq. The hub reads the durable event log after the last seq it delivered,
// once per wake-up for every conversation that needs it (one batched
// query), and fans the events out. After every (re)connect of a feed it
// reads every followed conversation again, so a notification lost while
// disconnected loses nothing. Each subscriber has a bounded queue; one that
// falls behind is cut off with ErrFellBehind and resumes from its last seq,
// and never slows the hub or the other subscribers.
package stream
