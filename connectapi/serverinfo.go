package connectapi

import (
	"context"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// GetServerInfo answers what Options said of the server's set-up (whether
// its own workers answer with the demo model, the limits of files). It reads nothing else, and
// like every RPC it answers only an authenticated caller (Unauthenticated
// otherwise).
func (s *service) GetServerInfo(ctx context.Context, _ *connect.Request[convov1.GetServerInfoRequest]) (*connect.Response[convov1.GetServerInfoResponse], error) {
	if _, err := user(ctx); err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.GetServerInfoResponse{DemoModel: s.demoModel,
		MaxFileBytes: s.maxFileBytes, MaxFilesPerMessage: int32(s.maxFiles)}), nil
}
