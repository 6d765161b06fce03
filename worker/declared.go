package worker

import "fmt"

// withDeclared returns the tools of one prompt: ts's and the client tools
// its model configuration declares (ModelConfig.Tools), each a Tool
// without Run, so that a call of one waits for the client's output (an
// input request of kind client_tool) as any client tool's does. ts is
// returned as it is when nothing is declared. A declaration is checked as
// Tools.Add checks a tool (its name, its parameters: a JSON schema of an
// object within the declaration budget); one that is refused, one
// declared twice, or one named as a tool of the worker's (which would be
// ambiguous: the model could not tell them apart) is an error naming the
// tool, which fails the reply.
func (ts *Tools) withDeclared(decls []ToolDeclaration) (*Tools, error) {
	if len(decls) == 0 {
		return ts, nil
	}
	out := &Tools{byName: map[string]registeredTool{}}
	if ts != nil {
		for name, t := range ts.byName {
			out.byName[name] = t
		}
	}
	for i, d := range decls {
		if _, ok := ts.lookup(d.Name); ok {
			return nil, fmt.Errorf("the prompt declares a client tool %q, but this worker has a tool of that name: rename the declared tool", d.Name)
		}
		if err := out.Add(Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters}); err != nil {
			return nil, fmt.Errorf("the prompt's declared tool %d: %w", i, err)
		}
	}
	return out, nil
}
