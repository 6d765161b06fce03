// Package shares serves share links over plain HTTP: GET
// /v1/shares/{token}, what the share shows as JSON (the Connect API's
// GetSharedConversationResponse), and GET /v1/shares/{token}/events, the
// same as Server-Sent Events, a "state" event each time it changes
// (wire.ShareStream, the loop of the Connect API's
// StreamSharedConversation). A share token is no bearer token, and these
// routes take no user: their Authorization header is not looked at.
//
// docs/protocols.md ("Share links") is the reference.
package shares
