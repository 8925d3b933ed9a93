package web_test

import (
	"net"
	"net/http"
	"strings"
	"sync"
)

// gate sits in front of the WebSocket gateway so a test can cut one browser's connections and
// hold it offline: it refuses upgrades from user agents containing a blocked word and closes the
// open connections of such agents. Agents are told apart by the user agent each tab sends.
type gate struct {
	mu      sync.Mutex
	next    http.Handler
	blocked map[string]bool     // user agent words refused
	agents  map[string]string   // remote address -> user agent of WebSocket requests
	conns   map[string]net.Conn // remote address -> connection
}

func newGate(next http.Handler) *gate {
	return &gate{next: next, blocked: map[string]bool{}, agents: map[string]string{}, conns: map[string]net.Conn{}}
}

// ServeHTTP refuses a blocked agent with 503 and passes everything else on.
func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ua := r.UserAgent()
	g.mu.Lock()
	refused := false
	for word := range g.blocked {
		refused = refused || strings.Contains(ua, word)
	}
	if !refused {
		g.agents[r.RemoteAddr] = ua
	}
	next := g.next
	g.mu.Unlock()
	if refused {
		http.Error(w, "held offline by the test", http.StatusServiceUnavailable)
		return
	}
	next.ServeHTTP(w, r)
}

// setNext puts a new gateway behind the gate (after a restart).
func (g *gate) setNext(next http.Handler) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next = next
}

// connState is the http.Server's ConnState hook; it keeps every connection by remote address.
func (g *gate) connState(c net.Conn, s http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch s {
	case http.StateNew:
		g.conns[c.RemoteAddr().String()] = c
	case http.StateClosed:
		delete(g.conns, c.RemoteAddr().String())
		delete(g.agents, c.RemoteAddr().String())
	}
}

// cut blocks word and closes the WebSocket connections of agents containing it; it returns how
// many it closed.
func (g *gate) cut(word string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked[word] = true
	n := 0
	for addr, ua := range g.agents {
		if c, ok := g.conns[addr]; ok && strings.Contains(ua, word) {
			_ = c.Close()
			delete(g.agents, addr)
			n++
		}
	}
	return n
}

// open lets word's agents connect again.
func (g *gate) open(word string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.blocked, word)
}
