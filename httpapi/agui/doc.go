// Package agui serves the AG-UI protocol (POST /v1/agui and GET
// /v1/conversations/{id}/agui), so that any AG-UI client (HttpAgent of
// @ag-ui/client, for one) can use convo as its agent: a conversation is a
// thread, each prompt a run, and a conversation's events are translated
// into AG-UI events (translator.go) over the protocol's HTTP binding, SSE
// whose every event is one "data:" line of JSON.
//
// AG-UI is specified at https://docs.ag-ui.com; convo speaks protocol 1.0,
// as the schemas of @ag-ui/core define it (types.go).
// docs/protocols.md ("AG-UI") is convo's reference, the mapping included.
package agui
