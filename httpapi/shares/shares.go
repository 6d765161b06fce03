package shares

import (
	"net/http"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/httpapi/internal/httpx"
	"github.com/convo-dev/convo/wire"
)

// stateEvent names the SSE event that carries a share's state.
const stateEvent = "state"

// Handler serves a share link's reads.
type Handler struct{ srv *httpx.Server }

// New returns the handler of GET /v1/shares/{token} and
// /v1/shares/{token}/events.
func New(srv *httpx.Server) *Handler { return &Handler{srv: srv} }

// Routes mounts the share routes on mux, outside authentication: a share
// token opens them, whatever Authorization says. GET /v1/shares/ (no
// token) is 400 naming token.
func (h *Handler) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/shares/{$}", h.Get)
	mux.HandleFunc("GET /v1/shares/{token}", h.Get)
	mux.HandleFunc("GET /v1/shares/{token}/events", h.Events)
}

// Get serves GET /v1/shares/{token}: what the share shows now, as the
// proto3 JSON of GetSharedConversationResponse, its files' URLs signed.
// An unknown, revoked or expired token is 404 not_found "share does not
// exist"; an empty one or one over wire.MaxShareToken bytes 400 naming
// token.
func (h *Handler) Get(w http.ResponseWriter, r *http.Request) {
	token, err := wire.ShareToken("token", r.PathValue("token"))
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	state, err := wire.SharedState(r.Context(), h.srv.Store, h.srv.URLs, token)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	data, err := httpx.ProtoJSON.Marshal(state)
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	// The token is a secret, and the state changes: nothing keeps it.
	hd.Set("Cache-Control", "no-store")
	_, _ = w.Write(data)
}

// Events serves GET /v1/shares/{token}/events: the share's state as SSE
// events named "state", the first the state now, then, for a live share,
// the state again whenever the conversation changed, at most one every
// wire.ShareStreamEvery (no ids: each state replaces the last, and a
// reconnect gets the state again). When the share is revoked (on every
// server) or expires, an "error" event with the JSON error body
// ({"code": "not_found", "message": "share does not exist"}) ends the
// stream, and EventSource's reconnect is answered 404, which stops it.
// Ends by design (the server shutting down, a reader too slow) end the
// response without one: EventSource reconnects. A token the route
// refuses before the stream starts is answered as Get answers it.
func (h *Handler) Events(w http.ResponseWriter, r *http.Request) {
	token, err := wire.ShareToken("token", r.PathValue("token"))
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	ctx := r.Context()
	var out *httpx.SSEWriter
	follow := wire.ShareStream{Store: h.srv.Store, Hub: h.srv.Hub, URLs: h.srv.URLs, KeepAlive: h.srv.KeepAlive,
		Idle: func() error {
			if out == nil {
				return nil
			}
			return out.KeepAlive()
		}}
	err = follow.Follow(ctx, token, func(state *convov1.GetSharedConversationResponse) error {
		if out == nil {
			var err error
			if out, err = h.srv.StartSSE(w); err != nil {
				return err
			}
		}
		data, err := httpx.ProtoJSON.Marshal(state)
		if err != nil {
			return err
		}
		if err := out.Event("", stateEvent, data); err != nil {
			return err
		}
		return out.Flush()
	})
	if out == nil {
		// Refused before the first state: an answer of its own.
		h.srv.WriteError(w, r, err)
		return
	}
	defer out.End()
	if ctx.Err() != nil {
		return
	}
	h.srv.StreamEnded(r, err, 0)
	// Only the share's end is told, as an error event, which a client
	// takes as final; any other end (a server shutting down, PostgreSQL
	// restarting) closes the stream silently, and EventSource reconnects.
	if f := wire.Classify(err); f.Code == conversation.NotFound {
		_ = h.srv.ErrorEvent(out, err)
	}
}
