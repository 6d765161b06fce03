package pgtest

import (
	"context"
	"fmt"
)

// Input is one input request PauseForInputs asks: its kind (approval,
// client_tool or question) and request (a JSON object of the kind's
// shape, see convo.request_input).
type Input struct {
	Kind, Request string
}

// PauseForInputs pauses as PauseForInput does, with one tool_use block
// and tool call per input (tool_0, tool_1, …), each asking its request,
// so that the prompt waits for all of them. It returns the prompt's id and the
// tool calls' ids, in inputs' order.
func PauseForInputs(ctx context.Context, db DB, worker string, inputs ...Input) (promptID string, toolCallIDs []string, err error) {
	if err := db.QueryRow(ctx, `SELECT prompt_id::text FROM convo.claim_prompt($1, 30)`, worker).Scan(&promptID); err != nil {
		return "", nil, fmt.Errorf("claim: %w", err)
	}
	if _, err := db.Exec(ctx, `SELECT convo.start_prompt($1::uuid)`, promptID); err != nil {
		return "", nil, fmt.Errorf("start: %w", err)
	}
	for i, in := range inputs {
		var call string
		err := db.QueryRow(ctx, `
			WITH block AS (SELECT convo.start_block($1::uuid, 'tool_use') AS id)
			SELECT convo.start_tool_call(block.id, $2, '{}')::text FROM block`,
			promptID, fmt.Sprintf("tool_%d", i)).Scan(&call)
		if err != nil {
			return "", nil, fmt.Errorf("start tool call %d: %w", i, err)
		}
		if _, err := db.Exec(ctx, `
			SELECT convo.request_input($1::uuid, $2, $3::jsonb),
			       convo.end_block((SELECT block_id FROM convo.tool_calls WHERE id = $1::uuid))`, call, in.Kind, in.Request); err != nil {
			return "", nil, fmt.Errorf("request %d (%s): %w", i, in.Kind, err)
		}
		toolCallIDs = append(toolCallIDs, call)
	}
	if _, err := db.Exec(ctx, `SELECT convo.wait_prompt($1::uuid, $2)`, promptID, worker); err != nil {
		return "", nil, fmt.Errorf("wait: %w", err)
	}
	return promptID, toolCallIDs, nil
}
