//go:build !unix

package ws

// rawWrite is unused here.
type rawWrite struct{}

// writeNow writes nothing here: every frame goes through the session's writer goroutine.
func (s *session) writeNow([]byte) (int, error) { return 0, nil }
