package openai

import (
	"encoding/json"
	"net/http"
	"regexp"

	"github.com/convo-dev/convo/conversation"
)

// apiError is a refusal in OpenAI's terms: the HTTP status OpenAI answers
// the case with, and its error's type, param and code.
type apiError struct {
	status        int
	typ, param    string
	code, message string
}

func (e *apiError) Error() string { return e.message }

// invalid is a 400 invalid_request_error naming param.
func invalid(param, code, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, code: code, message: message}
}

// notFound is the 404 of an unknown or foreign response id.
func notFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found",
		message: "No response found with id '" + clip(id) + "'."}
}

// errorBody is OpenAI's error object, which the SDKs decode into
// *openai.Error (raised with the response's status).
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// fieldPrefix reads the field a convo Invalid error names ("input: is
// required" names input).
var fieldPrefix = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.\[\]]*): `)

// writeError answers err in OpenAI's shape: an apiError as it says, any
// other error with the status convo gives it (httpx.Server.Status: the
// same logging, Retry-After and WWW-Authenticate) and the OpenAI type of
// that status.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	var body errorBody
	e, ok := err.(*apiError)
	if ok {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
	} else {
		st := h.srv.Status(w, r, err)
		e = &apiError{status: st.HTTP, message: st.Failure.Message, code: st.Name}
		switch {
		case st.HTTP == http.StatusUnauthorized:
			e.typ, e.code = "invalid_request_error", "invalid_api_key"
		case st.HTTP == http.StatusForbidden:
			e.typ = "permission_error"
		case st.HTTP == http.StatusTooManyRequests:
			e.typ, e.code = "rate_limit_error", "rate_limit_exceeded"
		case st.HTTP >= 500:
			e.typ, e.code = "server_error", "server_error"
		default:
			e.typ = "invalid_request_error"
		}
		if st.Failure.Code == conversation.Invalid {
			if m := fieldPrefix.FindStringSubmatch(st.Failure.Message); m != nil {
				e.param = m[1]
			}
		}
	}
	body.Error.Message, body.Error.Type = e.message, e.typ
	if e.param != "" {
		body.Error.Param = &e.param
	}
	if e.code != "" {
		body.Error.Code = &e.code
	}
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(body)
}

// clip shortens what a caller sent, for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
