//go:build !linux

package pgtest

// memoryDir is a RAM-backed directory for the private cluster, or "": none
// is known outside Linux.
func memoryDir() string { return "" }
