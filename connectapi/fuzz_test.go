package connectapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// FuzzRequests sends arbitrary bytes, decoded as the request of one RPC,
// to a real server on a real database. Whatever the input, the server must
// answer: success or a client error, never Internal or Unknown, and never
// crash. The seed corpus is in testdata/fuzz/FuzzRequests.
//
//	go test -run '^$' -fuzz FuzzRequests -fuzztime 60s ./connectapi/
func FuzzRequests(f *testing.F) {
	tb := setup(f)
	sent := tb.send(f, tb.client, "", "seed conversation")
	seed := func(rpc byte, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rpc, b)
	}
	seed(0, &convov1.SendMessageRequest{ConversationId: sent.ConversationId, Text: "hello"})
	seed(1, &convov1.GetConversationRequest{ConversationId: sent.ConversationId})
	seed(2, &convov1.ListConversationsRequest{PageSize: 3, PageToken: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"})
	seed(3, &convov1.CancelPromptRequest{PromptId: sent.PromptId})
	seed(4, &convov1.RenameConversationRequest{ConversationId: sent.ConversationId, Title: "t"})
	seed(5, &convov1.SubmitFeedbackRequest{MessageId: sent.AssistantMessageId, Rating: convov1.Rating_RATING_UP})
	seed(6, &convov1.GetTraceRequest{Target: &convov1.GetTraceRequest_MessageId{MessageId: sent.AssistantMessageId}})
	seed(7, &convov1.SearchMessagesRequest{Query: `"seed" -x or y`})
	seed(7, &convov1.SearchMessagesRequest{Query: "seed " + strings.Repeat("-", 33)}) // nested deeper than tsquery's stack
	seed(7, &convov1.SearchMessagesRequest{Query: "&|<->seed"})
	seed(8, &convov1.ListComparisonsRequest{ConversationId: sent.ConversationId})

	ctx := context.Background()
	c := tb.client
	f.Fuzz(func(t *testing.T, rpc byte, data []byte) {
		var err error
		switch rpc % 9 {
		case 0:
			m := &convov1.SendMessageRequest{}
			if proto.Unmarshal(data, m) != nil {
				return
			}
			_, err = c.SendMessage(ctx, connect.NewRequest(m))
		case 1:
			m := &convov1.GetConversationRequest{}
			if proto.Unmarshal(data, m) != nil {
				return
			}
			_, err = c.GetConversation(ctx, connect.NewRequest(m))
		case 2:
			m := &convov1.ListConversationsRequest{}
			if proto.Unmarshal(data, m) != nil {
				return
			}
			_, err = c.ListConversations(ctx, connect.NewRequest(m))
		case 3:
			m := &convov1.CancelPromptRequest{}
			if proto.Unmarshal(data, m) != nil {
				return
			}
			_, err = c.CancelPrompt(ctx, connect.NewRequest(m))
		case 4:
			m := &convov1.RenameConversationRequest{}
			if proto.Unmarshal(data, m) != nil {
				return
			}
			_, err = c.RenameConversation(ctx, connect.NewRequest(m))
		case 5:
			m := &convov1.SubmitFeedbackRequest{}
			if proto.Unmarshal(data, m) != nil {
				return
			}
			_, err = c.SubmitFeedback(ctx, connect.NewRequest(m))
		case 6:
			m := &convov1.GetTraceRequest{}
			if proto.Unmarshal(data, m) != nil {
				return
			}
			_, err = c.GetTrace(ctx, connect.NewRequest(m))
		case 7:
			m := &convov1.SearchMessagesRequest{}
			if proto.Unmarshal(data, m) != nil {
				return
			}
			_, err = c.SearchMessages(ctx, connect.NewRequest(m))
		case 8:
			m := &convov1.ListComparisonsRequest{}
			if proto.Unmarshal(data, m) != nil {
				return
			}
			_, err = c.ListComparisons(ctx, connect.NewRequest(m))
		}
		var ce *connect.Error
		if err != nil && (!errors.As(err, &ce) || ce.Code() == connect.CodeInternal || ce.Code() == connect.CodeUnknown) {
			t.Fatalf("rpc %d answered %v", rpc%9, err)
		}
	})
}
