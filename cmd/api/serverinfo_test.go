package main

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// TestServerInfoDemoModel: GetServerInfo says demo_model exactly when the
// server's own workers run and default to the demo model: by default
// (no OpenAI key), not with CONVO_WORKERS=0, not when OpenAI is the
// default provider.
func TestServerInfoDemoModel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"default", nil, true},
		{"no workers", map[string]string{"CONVO_WORKERS": "0"}, false},
		{"openai", map[string]string{"CONVO_OPENAI_API_KEY": "sk-test", "CONVO_OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, false},
		{"demo chosen over openai", map[string]string{"CONVO_OPENAI_API_KEY": "sk-test", "CONVO_DEFAULT_PROVIDER": "demo"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := startMain(t, c.env)
			client := convov1connect.NewConversationServiceClient(http.DefaultClient, m.URL())
			res, err := client.GetServerInfo(context.Background(), connect.NewRequest(&convov1.GetServerInfoRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Msg.DemoModel != c.want {
				t.Errorf("demo_model %v; want %v", res.Msg.DemoModel, c.want)
			}
		})
	}
}
