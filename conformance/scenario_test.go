package conformance

import (
	"strings"
	"testing"
)

func TestScenariosLoad(t *testing.T) {
	t.Parallel()
	scenarios, err := LoadScenarios("scenarios")
	if err != nil {
		t.Fatal(err)
	}
	// The scenarios the suite promises (README.md); more may be added.
	for _, name := range []string{"text", "reasoning", "structured", "tool-call", "model-error", "cancel", "lost-lease",
		"retried-batch", "database-restart", "sigterm", "sigkill", "many-replies", "approval", "approval-denied"} {
		found := false
		for _, s := range scenarios {
			found = found || s.Name == name
		}
		if !found {
			t.Errorf("no scenario %s", name)
		}
	}
}

// TestParseScenarioRefuses: a scenario the driver cannot run is refused
// with an error naming the field.
func TestParseScenarioRefuses(t *testing.T) {
	t.Parallel()
	const script = `"script": {"rounds": [[{"text": "hi"}]]}`
	const ok = `"expect": {"status": "completed", "blocks": [{"type": "text", "content": "hi"}]}`
	for _, tc := range []struct{ json, want string }{
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "colour": 1}`, `unknown field "colour"`},
		{`{"description": "d", ` + script + `, ` + ok + `}`, "name: missing"},
		{`{"name": "x", "description": "d", "script": {"rounds": []}, ` + ok + `}`, "script:"},
		{`{"name": "x", "description": "d", ` + script + `, "expect": {"status": "done"}}`, "expect.status"},
		{`{"name": "x", "description": "d", ` + script + `, "expect": {"status": "completed", "blocks": [{"content": "hi"}]}}`, "expect.blocks[0].type"},
		{`{"name": "x", "description": "d", ` + script + `, "expect": {"status": "completed", "blocks": [{"type": "tool_use"}]}}`, "expect.blocks[0].toolCall"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "action": {"kind": "explode", "when": "hi"}}`, "action.kind"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "action": {"kind": "cancel"}}`, "action.when"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "action": {"kind": "sigterm", "when": "hi"}}`, "exitCode"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "action": {"kind": "sigkill", "when": "hi"}, "followUp": {"rounds": [[]]}}`, "followUp"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "sharedTransactions": true}`, "sharedTransactions"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "replies": 2, "action": {"kind": "cancel", "when": "hi"}}`, "action: only with one reply"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "action": {"kind": "deny", "when": "hi"}}`, "action.reason: required with deny"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "action": {"kind": "approve", "when": "hi", "reason": "r"}}`, "action.reason: only with deny"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "action": {"kind": "cancel", "when": "hi", "reason": "r"}}`, "action.reason: only with deny"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "whileWaiting": {"rounds": [[]]}}`, "whileWaiting: only with the approve or deny action"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "action": {"kind": "cancel", "when": "hi"}, "whileWaiting": {"rounds": [[]]}}`, "whileWaiting: only with the approve or deny action"},
		{`{"name": "x", "description": "d", ` + script + `, ` + ok + `, "action": {"kind": "approve", "when": "hi"}, "whileWaiting": {"rounds": []}}`, "whileWaiting: want an object"},
	} {
		_, err := ParseScenario([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.json, err, tc.want)
		}
	}
}
