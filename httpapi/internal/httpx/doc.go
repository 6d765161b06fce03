// Package httpx is what every protocol under httpapi shares, so that each
// protocol's package holds only its own mapping: the Server its handlers
// are built on (the store, the hub and the settings), authentication
// (WithUser, Caller), the JSON body check of state-changing routes
// (JSONBody, WriteRequest), error answers (WriteError: the one place where
// domain errors become HTTP statuses) and the Server-Sent Events writer
// with its write deadline and keep-alive comments (StartSSE, Next).
package httpx
