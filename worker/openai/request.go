package openai

import (
	"encoding/json"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/convo-dev/convo/worker"
)

// params is the chat.completions request for req: the SDK's parameters,
// and the options that set what the SDK has no field for (a
// response_format given as raw JSON). max_tokens is sent, not
// max_completion_tokens: every compatible server knows it.
func (m *model) params(req worker.Request) (sdk.ChatCompletionNewParams, []option.RequestOption, error) {
	p := sdk.ChatCompletionNewParams{Model: req.Config.Model}
	if p.Model == "" {
		p.Model = m.opts.Model
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case worker.RoleSystem:
			p.Messages = append(p.Messages, sdk.SystemMessage(msg.Text))
		case worker.RoleUser:
			p.Messages = append(p.Messages, sdk.UserMessage(msg.Text))
		case worker.RoleAssistant:
			if msg.Text == "" && len(msg.ToolCalls) == 0 {
				continue
			}
			var a sdk.ChatCompletionAssistantMessageParam
			if msg.Text != "" {
				a.Content.OfString = sdk.String(msg.Text)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments},
					},
				})
			}
			p.Messages = append(p.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case worker.RoleTool:
			p.Messages = append(p.Messages, sdk.ToolMessage(msg.Text, msg.ToolCallID))
		}
	}
	for _, t := range req.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return p, nil, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			def.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(def))
	}
	if req.Config.Temperature != nil {
		p.Temperature = sdk.Float(*req.Config.Temperature)
	}
	if req.Config.MaxTokens != nil {
		p.MaxTokens = sdk.Int(int64(*req.Config.MaxTokens))
	}
	var extra []option.RequestOption
	if len(req.Config.ResponseFormat) > 0 {
		var rf any
		if err := json.Unmarshal(req.Config.ResponseFormat, &rf); err != nil {
			return p, nil, fmt.Errorf("responseFormat: %w", err)
		}
		extra = append(extra, option.WithJSONSet("response_format", rf))
	}
	return p, extra, nil
}
