// Package wire is convo's wire form, shared by every protocol adapter: the
// Connect API (package connectapi) and the HTTP protocols, SSE, AG-UI, the
// AI SDK and the history export (package httpapi and one package per
// protocol under it).
//
// It holds what the adapters would otherwise each write again:
//   - the conversion of domain values to the convo.v1 protobuf messages
//     (convert.go);
//   - the hub whose payload is the StreamConversation message of each event,
//     decoded once for every subscriber, and how a stream starts: a snapshot,
//     then the replay of the blocks still streaming (stream.go);
//   - a share link's state with its files signed, and the one loop that
//     follows a share for the Connect API and SSE alike (sharestream.go);
//   - the checks of request fields and their limits, whose errors are
//     conversation.Invalid naming the field (validate.go);
//   - the classification of errors that each adapter maps to its own codes
//     and logs in one place (errors.go);
//   - what the adapters read of tool calls and block metadata alike
//     (tools.go).
//
// It imports neither connect nor net/http.
package wire
