package web_test

import (
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// gate sits in front of the WebSocket gateway so a test can cut one browser's connections and
// hold it offline: it refuses upgrades from user agents containing a blocked word and closes the
// open connections of such agents. Agents are told apart by the user agent each tab sends.
type gate struct {
	mu        sync.Mutex
	next      http.Handler
	blocked   map[string]bool          // user agent words refused
	agents    map[string]string        // remote address -> user agent of WebSocket requests
	conns     map[string]net.Conn      // remote address -> connection
	stale     map[string]bool          // user agent words whose conversation list lags behind
	frozen    map[string]bool          // user agent words whose member lists lag behind
	seen      map[string][]byte        // user agent + path -> the last member list it was answered
	loads     map[string]int           // user agent -> member lists asked for
	trail     map[string]int           // user agent word -> message history reads still to answer empty
	reads     map[string]int           // user agent -> message history reads over REST
	held      map[string]chan struct{} // user agent word -> closed when its held presence answers may go
	holding   map[string]int           // user agent -> presence answers read and held back
	gone      map[string]int           // user agent -> held presence answers written or given up
	listHolds map[string]chan struct{} // user agent word -> closed when its held conversation lists may be answered
}

func newGate(next http.Handler) *gate {
	return &gate{next: next, blocked: map[string]bool{}, agents: map[string]string{}, conns: map[string]net.Conn{}, stale: map[string]bool{},
		frozen: map[string]bool{}, seen: map[string][]byte{}, loads: map[string]int{}, trail: map[string]int{}, reads: map[string]int{},
		held: map[string]chan struct{}{}, holding: map[string]int{}, gone: map[string]int{}, listHolds: map[string]chan struct{}{}}
}

// names reports whether the user agent ua contains one of words.
func names(words map[string]bool, ua string) bool {
	for word := range words {
		if strings.Contains(ua, word) {
			return true
		}
	}
	return false
}

// ServeHTTP refuses a blocked agent with 503 and passes everything else on.
func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ua := r.UserAgent()
	g.mu.Lock()
	refused := names(g.blocked, ua)
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

// lagLists makes the conversation list of agents containing word answer as a read model that
// has not caught up yet: an empty first page.
func (g *gate) lagLists(word string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stale[word] = true
}

// freezeMembers makes the member lists of agents containing word answer as a read model that
// has stopped catching up: each list as it was last answered to the agent, until thawMembers.
func (g *gate) freezeMembers(word string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.frozen[word] = true
}

// thawMembers lets word's member lists catch up again.
func (g *gate) thawMembers(word string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.frozen, word)
}

// memberLoads counts the member lists agents containing word have asked for.
func (g *gate) memberLoads(word string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return countFor(g.loads, word)
}

// trailHistory makes the next n REST message history reads of agents containing word answer as
// a read model that has not caught up yet: an empty page.
func (g *gate) trailHistory(word string, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.trail[word] = n
}

// historyReads counts the REST message history reads of agents containing word.
func (g *gate) historyReads(word string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return countFor(g.reads, word)
}

// trailing reports whether this history read of ua is to be answered empty, counting it.
func (g *gate) trailing(ua string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads[ua]++
	for word, n := range g.trail {
		if n > 0 && strings.Contains(ua, word) {
			g.trail[word] = n - 1
			return true
		}
	}
	return false
}

// holdPresence makes the presence lookups of agents containing word read their answer at once
// and write it only after releasePresence: an answer that reaches the page late, older than what
// happened meanwhile.
func (g *gate) holdPresence(word string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held[word] = make(chan struct{})
}

// releasePresence lets word's held presence answers go.
func (g *gate) releasePresence(word string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.held[word]; ok {
		close(c)
		delete(g.held, word)
	}
}

// presenceHeld counts the presence answers of agents containing word that were held back, and
// of those the ones done with since: written, or given up when the page went away.
func (g *gate) presenceHeld(word string) (held, written int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return countFor(g.holding, word), countFor(g.gone, word)
}

// holdLists makes the conversation list reads of agents containing word wait until releaseLists:
// a list that reaches the page late, after the user has started doing something else.
func (g *gate) holdLists(word string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.listHolds[word] = make(chan struct{})
}

// releaseLists lets word's held conversation list reads go on.
func (g *gate) releaseLists(word string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.listHolds[word]; ok {
		close(c)
		delete(g.listHolds, word)
	}
}

// countFor adds up the counts of the user agents containing word.
func countFor(counts map[string]int, word string) int {
	n := 0
	for ua, c := range counts {
		if strings.Contains(ua, word) {
			n += c
		}
	}
	return n
}

// holdFor returns the channel of holds (g.held or g.listHolds) that releases ua's answers, or nil.
func (g *gate) holdFor(holds map[string]chan struct{}, ua string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	for word, c := range holds {
		if strings.Contains(ua, word) {
			return c
		}
	}
	return nil
}

// lists sits in front of the REST API; it answers lagging agents' conversation lists, frozen
// agents' member lists and trailing agents' message histories.
func (g *gate) lists(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua := r.UserAgent()
		members := r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/im/groups/") &&
			strings.HasSuffix(r.URL.Path, "/members")
		key := ua + " " + r.URL.Path
		g.mu.Lock()
		lag, frozen := names(g.stale, ua), names(g.frozen, ua)
		last, answered := g.seen[key]
		if members {
			g.loads[ua]++
		}
		g.mu.Unlock()
		history := r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/im/topics/") &&
			strings.HasSuffix(r.URL.Path, "/messages")
		presence := r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/im/users/") &&
			strings.HasSuffix(r.URL.Path, "/presence")
		var hold chan struct{}
		if presence {
			hold = g.holdFor(g.held, ua)
		}
		if r.Method == http.MethodGet && r.URL.Path == "/v1/im/conversations" {
			if c := g.holdFor(g.listHolds, ua); c != nil {
				select {
				case <-c:
				case <-r.Context().Done():
					return
				}
			}
		}
		switch {
		case hold != nil:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			g.mu.Lock()
			g.holding[ua]++
			g.mu.Unlock()
			select {
			case <-hold:
				maps.Copy(w.Header(), rec.Header())
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
			case <-r.Context().Done(): // the page went away (a reload) before the answer
			}
			g.mu.Lock()
			g.gone[ua]++
			g.mu.Unlock()
		case history && g.trailing(ua):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"code":200,"data":{"messages":[]}}`))
		case lag && r.Method == http.MethodGet && r.URL.Path == "/v1/im/conversations":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"conversations":[]}`))
		case members && frozen && answered:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(last)
		case members:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				g.mu.Lock()
				g.seen[key] = rec.Body.Bytes()
				g.mu.Unlock()
			}
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		default:
			next.ServeHTTP(w, r)
		}
	})
}
