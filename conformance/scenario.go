package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Scenario is one file of scenarios/: a script for the scripted model,
// what goes wrong while it plays, and what the conversation must hold at
// the end. README.md describes every field.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Script is the user's message, a JSON object {"rounds": [[step, …], …]}.
	Script json.RawMessage `json:"script"`
	// Files are uploaded by the user before the script is sent, and the
	// script's message holds them (not the followUp's or whileWaiting's).
	Files []ScenarioFile `json:"files"`
	// Replies is how many conversations get the script at once (default 1).
	Replies int `json:"replies"`
	// Slots is the runner's CONVO_WORKER_SLOTS (default 1).
	Slots int `json:"slots"`
	// Action, when set, is done once the reply's text starts with When.
	Action *Action `json:"action"`
	// FollowUp is a second script, sent after the action in a new
	// conversation: it must complete.
	FollowUp json.RawMessage `json:"followUp"`
	// WhileWaiting, for approve and deny, is a script sent in a new
	// conversation once the prompt waits and before it is answered: it
	// must complete while the prompt still waits, which proves that the
	// pause freed the runner's slot.
	WhileWaiting json.RawMessage `json:"whileWaiting"`
	Expect       Expect          `json:"expect"`
	// ExitCode, for sigterm, is the status the runner must exit with.
	ExitCode *int `json:"exitCode"`
	// SharedTransactions, for Replies > 1: some transaction wrote deltas
	// of two replies or more.
	SharedTransactions bool `json:"sharedTransactions"`
}

// ScenarioFile is a file the script's message holds: its name and its
// bytes, as text.
type ScenarioFile struct {
	Filename string `json:"filename"`
	Content  string `json:"content"`
}

// Action is a fault the driver causes mid-reply.
type Action struct {
	// Kind is one of the Action* constants.
	Kind string `json:"kind"`
	// When is the text the reply's text blocks, joined, start with before
	// the driver acts.
	When string `json:"when"`
	// Reason, for deny, is the reason of the user's denial.
	Reason string `json:"reason"`
}

// The kinds of Action.
const (
	ActionCancel         = "cancel"
	ActionExpireLease    = "expireLease"
	ActionCutAfterCommit = "cutAfterCommit"
	ActionRestart        = "restart"
	ActionSigterm        = "sigterm"
	ActionSigkill        = "sigkill"
	ActionApprove        = "approve"
	ActionDeny           = "deny"
)

var actionKinds = []string{ActionCancel, ActionExpireLease, ActionCutAfterCommit, ActionRestart, ActionSigterm, ActionSigkill,
	ActionApprove, ActionDeny}

// answers reports whether the action answers a paused prompt's input
// request (approve, deny).
func (a *Action) answers() bool {
	return a != nil && (a.Kind == ActionApprove || a.Kind == ActionDeny)
}

// Expect is what each reply must be at the end.
type Expect struct {
	// Status is the prompt's: completed, failed or cancelled.
	Status string `json:"status"`
	// Error is text the prompt's error must contain ("": no check).
	Error string `json:"error"`
	// Blocks are the assistant message's blocks, in order.
	Blocks []ExpectBlock `json:"blocks"`
}

// ExpectBlock is one expected block. Content is compared exactly, but for
// a tool_use block, whose content is the call's argument JSON as the
// runtime serialised it: that is compared as JSON.
type ExpectBlock struct {
	Type     string          `json:"type"`
	Content  string          `json:"content"`
	ToolCall *ExpectToolCall `json:"toolCall,omitempty"`
}

// ExpectToolCall is the tool call of an expected tool_use block.
type ExpectToolCall struct {
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Status string          `json:"status"`
	Output string          `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// LoadScenarios reads every *.json file of dir, sorted by name. A file
// that is not a valid scenario is an error naming the file and the field.
func LoadScenarios(dir string) ([]Scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no scenarios (*.json) in %s", dir)
	}
	slices.Sort(paths)
	var out []Scenario
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		s, err := ParseScenario(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		if want := strings.TrimSuffix(filepath.Base(path), ".json"); s.Name != want {
			return nil, fmt.Errorf("%s: name is %q, want the file's name %q", filepath.Base(path), s.Name, want)
		}
		out = append(out, s)
	}
	return out, nil
}

// ParseScenario decodes one scenario, refusing unknown fields, fills in
// the defaults and checks it.
func ParseScenario(data []byte) (Scenario, error) {
	var s Scenario
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return s, errors.New("text after the scenario's JSON object")
	}
	if s.Replies == 0 {
		s.Replies = 1
	}
	if s.Slots == 0 {
		s.Slots = 1
	}
	return s, s.check()
}

func (s Scenario) check() error {
	switch {
	case s.Name == "":
		return errors.New("name: missing")
	case s.Description == "":
		return errors.New("description: missing")
	case !isScript(s.Script):
		return errors.New(`script: want an object {"rounds": [[step, …], …]}`)
	case len(s.FollowUp) > 0 && !isScript(s.FollowUp):
		return errors.New(`followUp: want an object {"rounds": [[step, …], …]}`)
	case len(s.WhileWaiting) > 0 && !isScript(s.WhileWaiting):
		return errors.New(`whileWaiting: want an object {"rounds": [[step, …], …]}`)
	case len(s.WhileWaiting) > 0 && !s.Action.answers():
		return errors.New("whileWaiting: only with the approve or deny action (it runs while the prompt waits for the answer)")
	case s.Replies < 1:
		return fmt.Errorf("replies: want 1 or more, got %d", s.Replies)
	case s.Slots < 1:
		return fmt.Errorf("slots: want 1 or more, got %d", s.Slots)
	case s.SharedTransactions && s.Replies < 2:
		return errors.New("sharedTransactions: needs replies of 2 or more")
	case s.ExitCode != nil && (s.Action == nil || s.Action.Kind != ActionSigterm):
		return errors.New("exitCode: only for the sigterm action")
	}
	for i, f := range s.Files {
		if f.Filename == "" || f.Content == "" {
			return fmt.Errorf("files[%d]: want a filename and a non-empty content", i)
		}
	}
	switch s.Expect.Status {
	case "completed", "failed", "cancelled":
	default:
		return fmt.Errorf("expect.status: want completed, failed or cancelled, got %q", s.Expect.Status)
	}
	for i, b := range s.Expect.Blocks {
		if b.Type == "" {
			return fmt.Errorf("expect.blocks[%d].type: missing", i)
		}
		if (b.Type == "tool_use") != (b.ToolCall != nil) {
			return fmt.Errorf("expect.blocks[%d].toolCall: a tool_use block has one, other blocks none", i)
		}
		if b.Type == "tool_use" && b.Content != "" && !json.Valid([]byte(b.Content)) {
			return fmt.Errorf("expect.blocks[%d].content: a tool_use block's content is its argument JSON", i)
		}
		if tc := b.ToolCall; tc != nil && (tc.Name == "" || tc.Status == "" || !json.Valid(tc.Input)) {
			return fmt.Errorf("expect.blocks[%d].toolCall: want name, input (JSON) and status", i)
		}
	}
	if a := s.Action; a != nil {
		if !slices.Contains(actionKinds, a.Kind) {
			return fmt.Errorf("action.kind: want one of %s, got %q", strings.Join(actionKinds, ", "), a.Kind)
		}
		if a.When == "" {
			return errors.New("action.when: missing (the text the reply shows before the driver acts)")
		}
		if s.Replies != 1 {
			return errors.New("action: only with one reply")
		}
		if (a.Kind == ActionSigterm || a.Kind == ActionSigkill) && len(s.FollowUp) > 0 {
			return fmt.Errorf("followUp: the runner is gone after %s", a.Kind)
		}
		if a.Kind == ActionSigterm && s.ExitCode == nil {
			return errors.New("exitCode: required with sigterm")
		}
		if a.Kind == ActionDeny && a.Reason == "" {
			return errors.New("action.reason: required with deny (the reason the user gives)")
		}
		if a.Kind != ActionDeny && a.Reason != "" {
			return fmt.Errorf("action.reason: only with deny, not %s", a.Kind)
		}
	}
	return nil
}

func isScript(raw json.RawMessage) bool {
	var v struct {
		Rounds []json.RawMessage `json:"rounds"`
	}
	return json.Unmarshal(raw, &v) == nil && len(v.Rounds) > 0
}
