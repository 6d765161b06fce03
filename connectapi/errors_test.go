package connectapi_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/auth"
	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/wire"
)

// rpcs calls every RPC that names an object, with ids taken from ids.
type ids struct{ conversation, userMessage, message, prompt, comparison, toolCall string }

// everyMessagesToken is a messages page token of position 1<<40: before
// every message.
const everyMessagesToken = "bQAAAQAAAAAA"

func everyRPC(client convov1connect.ConversationServiceClient, id ids) map[string]func() error {
	ctx := context.Background()
	return map[string]func() error{
		"SendMessage": func() error {
			_, err := client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: id.conversation, Text: "x"}))
			return err
		},
		"GetConversation": func() error {
			_, err := client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: id.conversation}))
			return err
		},
		"ListMessages": func() error {
			_, err := client.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{ConversationId: id.conversation, PageToken: everyMessagesToken}))
			return err
		},
		"CancelPrompt": func() error {
			_, err := client.CancelPrompt(ctx, connect.NewRequest(&convov1.CancelPromptRequest{PromptId: id.prompt}))
			return err
		},
		"RenameConversation": func() error {
			_, err := client.RenameConversation(ctx, connect.NewRequest(&convov1.RenameConversationRequest{ConversationId: id.conversation, Title: "mine now"}))
			return err
		},
		"SetSendPolicy": func() error {
			_, err := client.SetSendPolicy(ctx, connect.NewRequest(&convov1.SetSendPolicyRequest{ConversationId: id.conversation, SendPolicy: convov1.SendPolicy_SEND_POLICY_REJECT}))
			return err
		},
		"DeleteQueuedMessage": func() error {
			_, err := client.DeleteQueuedMessage(ctx, connect.NewRequest(&convov1.DeleteQueuedMessageRequest{MessageId: id.userMessage}))
			return err
		},
		"ClearConversation": func() error {
			_, err := client.ClearConversation(ctx, connect.NewRequest(&convov1.ClearConversationRequest{ConversationId: id.conversation}))
			return err
		},
		"DeleteConversation": func() error {
			_, err := client.DeleteConversation(ctx, connect.NewRequest(&convov1.DeleteConversationRequest{ConversationId: id.conversation}))
			return err
		},
		"SubmitFeedback": func() error {
			_, err := client.SubmitFeedback(ctx, connect.NewRequest(&convov1.SubmitFeedbackRequest{MessageId: id.message, Rating: convov1.Rating_RATING_UP}))
			return err
		},
		"VoteComparison": func() error {
			_, err := client.VoteComparison(ctx, connect.NewRequest(&convov1.VoteComparisonRequest{ComparisonId: id.comparison, Preference: convov1.Preference_PREFERENCE_A}))
			return err
		},
		"GetTraceByPrompt": func() error {
			_, err := client.GetTrace(ctx, connect.NewRequest(&convov1.GetTraceRequest{Target: &convov1.GetTraceRequest_PromptId{PromptId: id.prompt}}))
			return err
		},
		"GetTraceByMessage": func() error {
			_, err := client.GetTrace(ctx, connect.NewRequest(&convov1.GetTraceRequest{Target: &convov1.GetTraceRequest_MessageId{MessageId: id.message}}))
			return err
		},
		"AnswerInput": func() error {
			_, err := answerInput(client, id.toolCall, approval(true, ""))
			return err
		},
		"ClaimInput": func() error {
			_, err := claimInput(client, id.toolCall, "tab-1", 30)
			return err
		},
	}
}

// TestOwnership checks that user B can neither see nor change anything of
// user A's through any RPC, and that a foreign id answers exactly like an
// unknown one.
func TestOwnership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setupAuth(t)
	alice, bob := tb.clientAs(tokenFor(t, "alice")), tb.clientAs(tokenFor(t, "bob"))
	res, err := alice.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{
		Text: "alice's secret", Model: &convov1.ModelConfig{Model: "a"}, CompareModel: &convov1.ModelConfig{Model: "b"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	a := res.Msg
	// One of alice's replies waits for her approval of a tool call.
	_, call, err := pgtest.PauseForApproval(ctx, tb.pool, "w1")
	if err != nil {
		t.Fatal(err)
	}
	foreign := ids{a.ConversationId, a.UserMessageId, a.AssistantMessageId, a.PromptId, a.ComparisonId, call}
	unknown := ids{uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()}

	before := tb.countRows(t)
	foreignCalls, unknownCalls := everyRPC(bob, foreign), everyRPC(bob, unknown)
	for name, call := range foreignCalls {
		foreignErr := requireCode(t, call(), connect.CodeNotFound)
		unknownErr := requireCode(t, unknownCalls[name](), connect.CodeNotFound)
		// Same answer, up to the id itself.
		f := strings.NewReplacer(foreign.conversation, "ID", foreign.userMessage, "ID", foreign.message, "ID", foreign.prompt, "ID", foreign.comparison, "ID", foreign.toolCall, "ID").Replace(foreignErr.Message())
		u := strings.NewReplacer(unknown.conversation, "ID", unknown.userMessage, "ID", unknown.message, "ID", unknown.prompt, "ID", unknown.comparison, "ID", unknown.toolCall, "ID").Replace(unknownErr.Message())
		if f != u {
			t.Errorf("%s: foreign id answers %q, unknown id %q", name, f, u)
		}
	}
	if after := tb.countRows(t); after != before {
		t.Errorf("bob's calls changed alice's data:\nbefore %s\nafter  %s", before, after)
	}
	// Bob's lists and search show nothing of alice's.
	list, err := bob.ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{}))
	if err != nil || len(list.Msg.Conversations) != 0 {
		t.Errorf("bob lists %v, %v", list, err)
	}
	cmps, err := bob.ListComparisons(ctx, connect.NewRequest(&convov1.ListComparisonsRequest{}))
	if err != nil || len(cmps.Msg.Comparisons) != 0 {
		t.Errorf("bob's comparisons %v, %v", cmps, err)
	}
	found, err := bob.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: "secret"}))
	if err != nil || len(found.Msg.Results) != 0 {
		t.Errorf("bob finds %v, %v", found, err)
	}
	// Alice still can.
	if _, err := alice.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: a.ConversationId})); err != nil {
		t.Errorf("alice: %v", err)
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setupAuth(t)
	hour := time.Hour
	claims := func(exp time.Duration) map[string]any {
		return map[string]any{"sub": "alice", "exp": time.Now().Add(exp).Unix()}
	}
	hsHeader := map[string]any{"alg": "HS256", "typ": "JWT"}
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice","exp":9999999999}`)) + "."

	for name, token := range map[string]string{
		"Missing":           "",
		"Garbage":           "not-a-jwt",
		"Forged":            hs256(t, "some-other-secret", hsHeader, claims(hour)),
		"Expired":           hs256(t, testSecret, hsHeader, claims(-2*time.Minute)),
		"NoExpiry":          hs256(t, testSecret, hsHeader, map[string]any{"sub": "alice"}),
		"NoSubject":         hs256(t, testSecret, hsHeader, map[string]any{"exp": time.Now().Add(hour).Unix()}),
		"AlgNone":           none,
		"WrongAlgorithm":    hs256(t, testSecret, map[string]any{"alg": "HS512"}, claims(hour)),
		"RS256WithHSSecret": hs256(t, testSecret, map[string]any{"alg": "RS256"}, claims(hour)),
		// A correctly signed token whose subject PostgreSQL could not store.
		"NULInSubject": hs256(t, testSecret, hsHeader, map[string]any{"sub": "al\x00ice", "exp": time.Now().Add(hour).Unix()}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			client := tb.client
			if token != "" {
				client = tb.clientAs(token)
			}
			_, err := client.ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{}))
			requireCode(t, err, connect.CodeUnauthenticated)
			_, err = client.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hi"}))
			requireCode(t, err, connect.CodeUnauthenticated)
		})
	}
	t.Run("Valid", func(t *testing.T) {
		t.Parallel()
		if _, err := tb.clientAs(tokenFor(t, "alice")).ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{})); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("SchemeInAnyCase", func(t *testing.T) {
		t.Parallel()
		for _, scheme := range []string{"bearer", "BEARER", "BeArEr"} {
			req := connect.NewRequest(&convov1.ListConversationsRequest{})
			req.Header().Set("Authorization", scheme+" "+tokenFor(t, "alice"))
			if _, err := tb.client.ListConversations(ctx, req); err != nil {
				t.Errorf("Authorization: %s …: %v", scheme, err)
			}
		}
	})
}

func TestAuthenticationJWKS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]any{{ //nolint:errcheck
			"kty": "RSA", "kid": "k1", "use": "sig",
			"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
		}}})
	}))
	t.Cleanup(jwks.Close)
	tb := setup(t, setupOptions{verifier: mustJWKS(t, jwks.URL)})

	rs256 := func(kid string, signer *rsa.PrivateKey) string {
		h, _ := json.Marshal(map[string]any{"alg": "RS256", "kid": kid})
		c, _ := json.Marshal(map[string]any{"sub": "carol", "exp": time.Now().Add(time.Hour).Unix()})
		input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
		sum := sha256.Sum256([]byte(input))
		sig, err := rsa.SignPKCS1v15(rand.Reader, signer, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return input + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	if _, err := tb.clientAs(rs256("k1", key)).ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{})); err != nil {
		t.Fatalf("valid RS256 token: %v", err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for name, token := range map[string]string{
		"SignedByAnotherKey": rs256("k1", other),
		"UnknownKeyID":       rs256("k2", key),
		"HS256":              tokenFor(t, "carol"),
	} {
		_, err := tb.clientAs(token).ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{}))
		if ce := requireCode(t, err, connect.CodeUnauthenticated); ce == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// TestBadInput checks that malformed requests are refused with
// InvalidArgument naming the field, and change nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	sent := tb.send(t, tb.client, "", "hi")
	// A reply that waits for a client tool, for the pause RPCs.
	_, call, err := pgtest.PauseForInput(ctx, tb.pool, "w1", "client_tool", "{}")
	if err != nil {
		t.Fatal(err)
	}
	c := tb.client
	long := strings.Repeat("x", 100_001)
	temp := 3.5
	maxTokens := int32(0)

	cases := map[string]struct {
		field string
		call  func() error
	}{
		"MalformedConversationID": {"conversationId", func() error {
			_, err := c.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: "not-a-uuid"}))
			return err
		}},
		"MissingConversationID": {"conversationId", func() error {
			_, err := c.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{}))
			return err
		}},
		"UUIDWithoutDashes": {"conversationId", func() error {
			_, err := c.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: strings.ReplaceAll(sent.ConversationId, "-", "")}))
			return err
		}},
		"EmptyText": {"text", func() error {
			_, err := c.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{ConversationId: sent.ConversationId}))
			return err
		}},
		"TextTooLong": {"text", func() error {
			_, err := c.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: long}))
			return err
		}},
		"TextWithNUL": {"text", func() error {
			_, err := c.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "a\x00b"}))
			return err
		}},
		"BlankText": {"text", func() error {
			_, err := c.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "   \n"}))
			return err
		}},
		"TemperatureOutOfRange": {"model.temperature", func() error {
			_, err := c.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hi", Model: &convov1.ModelConfig{Temperature: &temp}}))
			return err
		}},
		"CompareMaxTokensZero": {"compareModel.maxTokens", func() error {
			_, err := c.SendMessage(ctx, connect.NewRequest(&convov1.SendMessageRequest{Text: "hi", CompareModel: &convov1.ModelConfig{MaxTokens: &maxTokens}}))
			return err
		}},
		"MalformedPromptID": {"promptId", func() error {
			_, err := c.CancelPrompt(ctx, connect.NewRequest(&convov1.CancelPromptRequest{PromptId: "42"}))
			return err
		}},
		"TitleTooLong": {"title", func() error {
			_, err := c.RenameConversation(ctx, connect.NewRequest(&convov1.RenameConversationRequest{ConversationId: sent.ConversationId, Title: strings.Repeat("t", 201)}))
			return err
		}},
		"EmptyTitle": {"title", func() error {
			_, err := c.RenameConversation(ctx, connect.NewRequest(&convov1.RenameConversationRequest{ConversationId: sent.ConversationId}))
			return err
		}},
		"UnknownRating": {"rating", func() error {
			_, err := c.SubmitFeedback(ctx, connect.NewRequest(&convov1.SubmitFeedbackRequest{MessageId: sent.AssistantMessageId, Rating: convov1.Rating(7)}))
			return err
		}},
		"UnspecifiedPreference": {"preference", func() error {
			_, err := c.VoteComparison(ctx, connect.NewRequest(&convov1.VoteComparisonRequest{ComparisonId: uuid.NewString()}))
			return err
		}},
		"AbsurdPageSize": {"pageSize", func() error {
			_, err := c.ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{PageSize: 1_000_000}))
			return err
		}},
		"NegativePageSize": {"pageSize", func() error {
			_, err := c.ListComparisons(ctx, connect.NewRequest(&convov1.ListComparisonsRequest{PageSize: -1}))
			return err
		}},
		"ForgedPageToken": {"pageToken", func() error {
			_, err := c.ListConversations(ctx, connect.NewRequest(&convov1.ListConversationsRequest{PageToken: "bm9wZQ"}))
			return err
		}},
		"NoMessagesPageToken": {"pageToken", func() error {
			_, err := c.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{ConversationId: uuid.NewString()}))
			return err
		}},
		"ForgedMessagesPageToken": {"pageToken", func() error {
			_, err := c.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{ConversationId: uuid.NewString(), PageToken: "bm9wZQ"}))
			return err
		}},
		"ListConversationsTokenForMessages": {"pageToken", func() error {
			token := wire.EncodePageToken(conversation.PageCursor{Time: time.Now(), ID: uuid.New()})
			_, err := c.ListMessages(ctx, connect.NewRequest(&convov1.ListMessagesRequest{ConversationId: uuid.NewString(), PageToken: token}))
			return err
		}},
		"NoTraceTarget": {"target", func() error {
			_, err := c.GetTrace(ctx, connect.NewRequest(&convov1.GetTraceRequest{}))
			return err
		}},
		"EmptySearch": {"query", func() error {
			_, err := c.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{}))
			return err
		}},
		"MalformedToolCallID": {"toolCallId", func() error {
			_, err := answerInput(c, "nope", approval(true, ""))
			return err
		}},
		"NoAnswer": {"answer", func() error {
			_, err := answerInput(c, call, nil)
			return err
		}},
		"ReasonWithNUL": {"answer.approval.reason", func() error {
			_, err := answerInput(c, call, approval(false, "a\x00b"))
			return err
		}},
		"ReasonTooLong": {"answer.approval.reason", func() error {
			_, err := answerInput(c, call, approval(false, strings.Repeat("r", 2_001)))
			return err
		}},
		"NoClientToolResult": {"answer.clientTool", func() error {
			_, err := answerInput(c, call, &convov1.InputAnswer{Kind: &convov1.InputAnswer_ClientTool{ClientTool: &convov1.ClientToolAnswer{}}})
			return err
		}},
		"OutputTooLong": {"answer.clientTool.output", func() error {
			_, err := answerInput(c, call, clientOutput(long))
			return err
		}},
		"BlankClientToolError": {"answer.clientTool.error", func() error {
			_, err := answerInput(c, call, clientError(" \u200b"))
			return err
		}},
		"BlankQuestionAnswer": {"answer.question.answer", func() error {
			_, err := answerInput(c, call, questionAnswer("\n"))
			return err
		}},
		"ClaimMalformedToolCallID": {"toolCallId", func() error {
			_, err := claimInput(c, "", "tab-1", 30)
			return err
		}},
		"NoClaimant": {"claimant", func() error {
			_, err := claimInput(c, call, "", 30)
			return err
		}},
		"ClaimantTooLong": {"claimant", func() error {
			_, err := claimInput(c, call, strings.Repeat("é", 101), 30)
			return err
		}},
		"ClaimantWithNewline": {"claimant", func() error {
			_, err := claimInput(c, call, "tab\n1", 30)
			return err
		}},
		"LeaseTooLong": {"leaseSeconds", func() error {
			_, err := claimInput(c, call, "tab-1", 601)
			return err
		}},
		"NegativeLease": {"leaseSeconds", func() error {
			_, err := claimInput(c, call, "tab-1", -1)
			return err
		}},
	}
	before := tb.countRows(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ce := requireCode(t, tc.call(), connect.CodeInvalidArgument)
			if !strings.Contains(ce.Message(), tc.field) {
				t.Errorf("message %q does not name %q", ce.Message(), tc.field)
			}
		})
	}
	if after := tb.countRows(t); after != before {
		t.Errorf("refused requests changed state:\nbefore %s\nafter  %s", before, after)
	}
}

func TestRequestTooLarge(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	before := tb.countRows(t)
	_, err := tb.client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{Text: strings.Repeat("x", 2<<20)}))
	requireCode(t, err, connect.CodeResourceExhausted)
	if after := tb.countRows(t); after != before {
		t.Error("oversized request changed state")
	}
	// The server is still fine.
	tb.send(t, tb.client, "", "still here")
}

func mustJWKS(t *testing.T, url string) auth.Verifier {
	t.Helper()
	v, err := auth.NewJWKS(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
