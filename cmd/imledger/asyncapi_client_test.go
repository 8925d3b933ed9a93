package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/imledger/imledger/transport/ws"
)

// asyncDoc is the AsyncAPI document a node serves, compiled: one schema per message, and the
// record of which server messages real frames matched.
type asyncDoc struct {
	client map[string]*jsonschema.Schema // the client frames, by message name
	server map[string]*jsonschema.Schema // the server frames, by message name

	mu   sync.Mutex
	seen map[string]int // server message name -> frames that matched it
}

// clientMessages are the document's messages a client sends; every other message is the server's.
var clientMessages = map[string]bool{"hi": true, "login": true, "sub": true, "leave": true, "pub": true, "get": true,
	"note": true, "ping": true}

// fetchAsyncDoc reads base's AsyncAPI document and compiles the payload schema of each message.
func fetchAsyncDoc(t *testing.T, base string) *asyncDoc {
	t.Helper()
	resp, err := http.Get(base + ws.AsyncAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s", ws.AsyncAPIPath, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("asyncapi.json: %v", err)
	}
	const url = "https://imledger.test/asyncapi.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	messages, _ := doc.(map[string]any)["components"].(map[string]any)["messages"].(map[string]any)
	d := &asyncDoc{client: map[string]*jsonschema.Schema{}, server: map[string]*jsonschema.Schema{}, seen: map[string]int{}}
	for name := range messages {
		sch, err := c.Compile(url + "#/components/messages/" + name + "/payload")
		if err != nil {
			t.Fatalf("compile %s: %v", name, err)
		}
		if clientMessages[name] {
			d.client[name] = sch
		} else {
			d.server[name] = sch
		}
	}
	if len(d.client) != len(clientMessages) {
		t.Fatalf("the document has client messages %v", d.client)
	}
	return d
}

// match returns the server messages frame validates against, and why it failed the others.
func (d *asyncDoc) match(frame any) (names []string, why []string) {
	for name, sch := range d.server {
		if err := sch.Validate(frame); err != nil {
			why = append(why, name+": "+err.Error())
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	sort.Strings(why)
	d.mu.Lock()
	for _, n := range names {
		d.seen[n]++
	}
	d.mu.Unlock()
	return names, why
}

// unseen lists the server messages no frame matched.
func (d *asyncDoc) unseen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name := range d.server {
		if d.seen[name] == 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// docFrame is one server frame as received, with the document's messages it matched.
type docFrame struct {
	raw     string
	v       map[string]any
	matched []string
}

// is reports whether the frame matched the message name.
func (f docFrame) is(name string) bool {
	for _, n := range f.matched {
		if n == name {
			return true
		}
	}
	return false
}

// body is the frame's body under its one key (ctrl, data, pres or info).
func (f docFrame) body(key string) map[string]any {
	b, _ := f.v[key].(map[string]any)
	return b
}

// str is a string field of the frame's body under key.
func (f docFrame) str(key, field string) string {
	s, _ := f.body(key)[field].(string)
	return s
}

// docClient is a WebSocket client that validates every frame it sends and receives against the
// document: a server frame that matches no server message fails the test.
type docClient struct {
	t    *testing.T
	name string
	doc  *asyncDoc
	conn *websocket.Conn
	next int

	mu      sync.Mutex
	frames  []docFrame
	readErr error
	done    chan struct{}
}

// dialDoc connects to base's gateway and says hi.
func dialDoc(t *testing.T, base string, doc *asyncDoc, name string) *docClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+strings.TrimPrefix(base, "http://")+ws.Path, nil)
	if err != nil {
		t.Fatalf("%s: dial: %v", name, err)
	}
	conn.SetReadLimit(1 << 20)
	c := &docClient{t: t, name: name, doc: doc, conn: conn, done: make(chan struct{})}
	go c.read()
	t.Cleanup(func() {
		// The reader reports to t: it must be done before the test completes.
		_ = conn.Close(websocket.StatusNormalClosure, "bye")
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
		}
	})
	c.request("hi", `{"hi":{"id":%q,"ver":"1","ua":"asyncapi-test"}}`, "ctrlHello")
	return c
}

func (c *docClient) read() {
	defer close(c.done)
	for {
		_, b, err := c.conn.Read(context.Background())
		if err != nil {
			c.mu.Lock()
			c.readErr = err
			c.mu.Unlock()
			return
		}
		f := docFrame{raw: string(b)}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			c.t.Errorf("%s: a server frame that is not JSON: %s", c.name, b)
			continue
		}
		f.v, _ = v.(map[string]any)
		var why []string
		f.matched, why = c.doc.match(v)
		if len(f.matched) == 0 {
			c.t.Errorf("%s: a frame the document does not describe: %s\n  %s", c.name, b, strings.Join(why, "\n  "))
		}
		c.mu.Lock()
		c.frames = append(c.frames, f)
		c.mu.Unlock()
	}
}

// write sends one raw message.
func (c *docClient) write(frame string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.conn.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		c.t.Fatalf("%s: write: %v", c.name, err)
	}
}

// send validates frame against the client message msg (fitting says whether it must fit or,
// for a frame that breaks the protocol on purpose, must not), then sends it.
func (c *docClient) send(msg, frame string, fitting bool) {
	c.t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(frame))
	if err != nil {
		c.t.Fatalf("%s: the test's frame is not JSON: %s", c.name, frame)
	}
	err = c.doc.client[msg].Validate(v)
	switch {
	case fitting && err != nil:
		c.t.Fatalf("%s: frame %s does not fit message %s: %v", c.name, frame, msg, err)
	case !fitting && err == nil:
		c.t.Fatalf("%s: frame %s, wrong on purpose, fits message %s", c.name, frame, msg)
	}
	c.write(frame)
}

// request sends format (with a fresh frame id for its %q) as client message msg and returns
// the ctrl answering it, which must match the server message want.
func (c *docClient) request(msg, format, want string) docFrame {
	c.t.Helper()
	return c.requestAs(msg, format, want, true)
}

// requestAs is request for a frame that fits msg or, with fitting false, breaks it on purpose.
func (c *docClient) requestAs(msg, format, want string, fitting bool) docFrame {
	c.t.Helper()
	c.next++
	id := fmt.Sprintf("%s-%d", msg, c.next)
	c.send(msg, fmt.Sprintf(format, id), fitting)
	return c.answer(id, want)
}

// answer waits for the ctrl frame echoing id and checks it matched the server message want
// (any, when want is "").
func (c *docClient) answer(id, want string) docFrame {
	c.t.Helper()
	f := c.await("the answer to "+id, func(f docFrame) bool { return f.v["ctrl"] != nil && f.str("ctrl", "id") == id })
	if want != "" && !f.is(want) {
		c.t.Fatalf("%s: the answer to %s is %s, matching %v; want %s", c.name, id, f.raw, f.matched, want)
	}
	return f
}

// await waits up to 30 s for a frame that cond accepts, among all received so far.
func (c *docClient) await(what string, cond func(docFrame) bool) docFrame {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		frames := c.frames[:len(c.frames):len(c.frames)]
		c.mu.Unlock()
		for _, f := range frames {
			if cond(f) {
				return f
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: never got %s", c.name, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// has reports whether a frame matching the server message name that cond accepts has come.
func (c *docClient) has(name string, cond func(docFrame) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.frames {
		if f.is(name) && cond(f) {
			return true
		}
	}
	return false
}

// awaitMessage waits for a frame matching the server message name that cond accepts.
func (c *docClient) awaitMessage(name string, cond func(docFrame) bool) docFrame {
	c.t.Helper()
	return c.await("a "+name+" frame", func(f docFrame) bool { return f.is(name) && (cond == nil || cond(f)) })
}

// closedWith waits until the server closed the connection with code.
func (c *docClient) closedWith(code websocket.StatusCode) {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.t.Fatalf("%s: still open, want a close %d", c.name, code)
	}
	c.mu.Lock()
	err := c.readErr
	c.mu.Unlock()
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != code {
		c.t.Fatalf("%s: ended with %v, want close %d", c.name, err, code)
	}
}

// login logs in with token and checks the answer matched ctrlLogin.
func (c *docClient) login(token string) {
	c.t.Helper()
	c.request("login", `{"login":{"id":%q,"token":`+jsonString(token)+`}}`, "ctrlLogin")
}

// subscribe subscribes to topic, asking again while the read models do not know the membership
// yet (403 not_member, 404), and fails unless it is admitted within 30 s.
func (c *docClient) subscribe(topic string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.next++
		id := fmt.Sprintf("sub-%d", c.next)
		c.send("sub", fmt.Sprintf(`{"sub":{"id":%q,"topic":%q}}`, id, topic), true)
		f := c.await("the answer to "+id, func(f docFrame) bool { return f.v["ctrl"] != nil && f.str("ctrl", "id") == id })
		if f.is("ctrlTopic") {
			return
		}
		if !f.is("ctrlError") || time.Now().After(deadline) {
			c.t.Fatalf("%s: sub %s: %s", c.name, topic, f.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
