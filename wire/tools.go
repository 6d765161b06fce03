package wire

import "google.golang.org/protobuf/types/known/structpb"

// ToolName is the tool call's name, or "unknown" for a tool_use block
// whose worker never named it.
func ToolName(name string) string {
	if name == "" {
		return "unknown"
	}
	return name
}

// MetadataString reads a string field of a block's metadata ("" when
// absent or not a string), such as a tool_use block's "name".
func MetadataString(s *structpb.Struct, key string) string {
	if v, ok := s.GetFields()[key]; ok {
		return v.GetStringValue()
	}
	return ""
}
