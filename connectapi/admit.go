package connectapi

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/limit"
)

// maxBodyBytes bounds the HTTP body of a call: one request message of at
// most maxRequestBytes, and room for what frames it (the envelopes of
// gRPC, gRPC-Web and Connect streaming).
const maxBodyBytes = maxRequestBytes + 64<<10

// admission is the HTTP middleware in front of connect: it authenticates
// every call from its headers before a byte of its body is read, and
// bounds the body it hands on.
//
// Connect's interceptors cannot do either: a unary call's interceptors run
// once connect has read and decoded the request, and connect reads the
// rest of an oversized body to its end (to report its size) before it
// refuses it. Here a call without a valid token is refused Unauthenticated
// with its body unread, and a body is cut off after maxBodyBytes
// (ResourceExhausted). A body that does not arrive in time (the server's
// read deadline, see guard.BodyDeadline) fails the call with
// DeadlineExceeded.
type admission struct {
	auth   auth.Authenticator
	logger *slog.Logger
	// errors writes a refusal in the protocol of the call (Connect, gRPC
	// or gRPC-Web).
	errors *connect.ErrorWriter
	// refused, when set, is told of every call refused here, by procedure
	// (metrics: connect's interceptors never see these calls).
	refused func(procedure string, err error)
	// reads caps each user's readProcedures running at once (nil: no cap).
	reads *limit.Reads
	next  http.Handler
}

// readProcedures are the RPCs that read a conversation's messages whole
// up to the snapshot size, and count against Options.Reads.
var readProcedures = map[string]bool{
	convov1connect.ConversationServiceGetConversationProcedure: true,
	convov1connect.ConversationServiceListMessagesProcedure:    true,
}

// procedures are the paths of ConversationService's RPCs: only these are
// reported to admission.refused, so that a client cannot make up labels.
var procedures = func() map[string]bool {
	svc := convov1.File_convo_v1_conversation_service_proto.Services().ByName("ConversationService")
	m := map[string]bool{}
	for i := range svc.Methods().Len() {
		m["/"+string(svc.FullName())+"/"+string(svc.Methods().Get(i).Name())] = true
	}
	return m
}()

// anonymousProcedures are the RPCs a share token opens (docs/api.md,
// "Share links"): they run with no user, their Authorization header not
// looked at, and read only what the token in their request shows. Every
// other RPC authenticates; a share token as a bearer token is no valid
// token there.
var anonymousProcedures = map[string]bool{
	convov1connect.ConversationServiceGetSharedConversationProcedure:    true,
	convov1connect.ConversationServiceStreamSharedConversationProcedure: true,
}

func (a *admission) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if anonymousProcedures[r.URL.Path] {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &callBody{ReadCloser: http.MaxBytesReader(w, r.Body, maxBodyBytes)}
		}
		a.next.ServeHTTP(w, r)
		return
	}
	owner, err := a.auth.Authenticate(r.Context(), r.Header)
	if err != nil {
		a.refuse(w, r, err)
		return
	}
	if readProcedures[r.URL.Path] {
		// Held until the handler returns, once connect has written the
		// answer: a client that does not read holds its place.
		release, err := a.reads.Acquire(owner)
		if err != nil {
			a.refuse(w, r, err)
			return
		}
		defer release()
	}
	r = r.WithContext(conversation.WithUser(r.Context(), owner))
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &callBody{ReadCloser: http.MaxBytesReader(w, r.Body, maxBodyBytes)}
	}
	a.next.ServeHTTP(w, r)
}

// refuse answers err without reading the request's body. Over HTTP/1.1
// the connection is closed after the answer, so that net/http does not
// read the body either (it would, to reuse the connection).
func (a *admission) refuse(w http.ResponseWriter, r *http.Request, err error) {
	ce := toConnectError(r.Context(), a.logger, r.URL.Path, err)
	if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
		w.Header().Set("Connection", "close")
	}
	if a.refused != nil && procedures[r.URL.Path] {
		a.refused(r.URL.Path, ce)
	}
	if a.errors.IsSupported(r) {
		_ = a.errors.Write(w, r, ce)
		return
	}
	status := http.StatusServiceUnavailable
	if ce.Code() == connect.CodeUnauthenticated {
		status = http.StatusUnauthorized
	}
	http.Error(w, ce.Message(), status)
}

// callBody is a call's body, whose read cut off by the server's read
// deadline fails as DeadlineExceeded (connect passes a *connect.Error from
// the body on as it is).
//
// Once a read has failed (the body is too large, or too slow), Close
// leaves the body to net/http, which closes it after the answer is sent:
// closing it here, before, would read on into the rest of a chunked body
// (net/http reads up to 256 KB of it, for the connection's next request)
// and hold the answer back until the client sent more or the read
// deadline passed.
type callBody struct {
	io.ReadCloser
	failed bool
}

func (b *callBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.failed = true
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("request body: %w", err))
		}
	}
	return n, err
}

func (b *callBody) Close() error {
	if b.failed {
		return nil
	}
	return b.ReadCloser.Close()
}
