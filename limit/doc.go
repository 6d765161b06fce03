// Package limit holds the per-user limits one server enforces in memory:
// how many streams a user (and the server in total) may hold open, a
// token bucket per user on writes, and the searches a user (and the
// server) may run: a rate per user and a cap on those running at once,
// and the whole-conversation reads a user may have running at once. Both protocol adapters use the same
// values: the stream hub counts every subscription, whatever protocol
// opened it, and both the Connect API and the HTTP endpoints take write
// tokens from one Writes. A refusal is a conversation.ResourceExhausted
// error whose message names the limit. The per-user cap on prompts in
// flight is not here: the database enforces it (convo.send_message), so
// that it holds across servers.
package limit
