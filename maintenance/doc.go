// Package maintenance runs the database's housekeeping loops that any
// convo process may run, alone or with others at once: the lease reaper
// (convo.expire_leases fails running prompts whose worker stopped
// heartbeating), the compactor (convo.compact_events merges the delta
// events of long-finished prompts) and the prompt-queue gauges read at
// each metrics scrape. cmd/api and cmd/worker both run them.
//
// Several processes running them at once is safe: expire_leases rechecks
// each candidate under its conversation's lock, so a prompt is failed
// once; compact_events takes its prompts FOR UPDATE SKIP LOCKED and marks
// them compacted in the same transaction, so no two processes compact one
// prompt.
package maintenance
