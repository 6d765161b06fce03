package connectapi_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/auth"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// TestGetServerInfo: GetServerInfo answers Options.DemoModel, and only to
// an authenticated caller.
func TestGetServerInfo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, want := range []bool{true, false} {
		tb := setup(t, setupOptions{demoModel: want})
		res, err := tb.client.GetServerInfo(ctx, connect.NewRequest(&convov1.GetServerInfoRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Msg.DemoModel != want {
			t.Errorf("demo_model %v; want %v", res.Msg.DemoModel, want)
		}
	}
	tb := setup(t, setupOptions{verifier: auth.NewHS256(testSecret), demoModel: true})
	_, err := tb.client.GetServerInfo(ctx, connect.NewRequest(&convov1.GetServerInfoRequest{}))
	requireCode(t, err, connect.CodeUnauthenticated)
	res, err := tb.clientAs(tokenFor(t, "ana")).GetServerInfo(ctx, connect.NewRequest(&convov1.GetServerInfoRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Msg.DemoModel {
		t.Error("an authenticated caller: demo_model false; want true")
	}
}
