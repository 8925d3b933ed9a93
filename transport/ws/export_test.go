package ws

// SetFrameHook makes g call fn with the type of every client frame before dispatching it, on the
// goroutine that handles the frame; tests make it panic to check the recovery. nil removes it.
func SetFrameHook(g *Gateway, fn func(typ string)) {
	if fn == nil {
		g.frameHook.Store(nil)
		return
	}
	g.frameHook.Store(&fn)
}

// SetWriteHook makes g call fn on a session's writer goroutine before it writes a batch of
// frames. nil removes it.
func SetWriteHook(g *Gateway, fn func()) {
	if fn == nil {
		g.writeHook.Store(nil)
		return
	}
	g.writeHook.Store(&fn)
}
