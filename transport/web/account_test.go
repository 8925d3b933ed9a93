package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

// listRequests counts the page's requests for the conversation list (resource timing entries).
const listRequests = `performance.getEntriesByType('resource').filter(e => e.name.includes('/v1/im/conversations')).length`

// A chat another user starts over REST appears on the receiver's page within a second, from
// the per-user channel, and the page asks for the conversation list at its start (and, through
// the SDK, once more a second later for what the read models did not have yet) and never again
// while nothing asks it to: no polling.
func TestNewChatAppearsWithoutPolling(t *testing.T) {
	t.Parallel()
	n := startServed(t)
	browser := newBrowser(t)
	bob := newPage(t, browser, "bob", "imledger-browser-test bob")
	bob.register(n.url, "bob", "bob-password-1")
	bob.waitFor("the first list and its recheck", listRequests+` >= 2`)
	first := eval[int](bob, "list requests", listRequests)
	bobID := bob.userID()
	alice, aliceID := restSignUp(t, n.url, "alice", "alice-password-1")
	topic := directTopic(t, aliceID, bobID)

	start := time.Now()
	if _, err := restCall(n.url, alice, http.MethodPost, "/v1/im/topics/"+topic+"/messages",
		map[string]any{"client_msg_id": "hello-1", "content": map[string]string{"text": "hello bob"}}); err != nil {
		t.Fatal(err)
	}
	sel := `#convs button[data-topic="` + topic + `"]`
	for !eval[bool](bob, "the new chat", `!!document.querySelector('`+sel+`')`) {
		if time.Since(start) > time.Second {
			t.Fatalf("the chat alice started was not on bob's page after 1 s: %s", bob.state())
		}
		time.Sleep(20 * time.Millisecond)
	}
	shown := time.Since(start)
	bob.waitFor("its last message and unread badge", `(() => { const b = document.querySelector('`+sel+`');
		return b.textContent.includes('hello bob') && b.querySelector('.badge') && b.querySelector('.badge').textContent === '1'; })()`)

	// Longer than the page's old refresh period (20 s): a poll would have asked again.
	time.Sleep(25 * time.Second)
	if got := eval[int](bob, "list requests", listRequests); got != first {
		t.Fatalf("the page asked for the conversation list %d times, %d at its start and its recheck", got, first)
	}
	if p := bob.problemsSeen(); len(p) > 0 {
		t.Fatalf("page problems: %q", p)
	}
	t.Logf("the new chat showed after %v; %d list request(s) in 25 s of waiting after the start's", shown.Round(time.Millisecond), first)
}

// The account panel changes the password (the old one required), lists the login sessions, and
// signs another one out: that session's open WebSocket connection is closed. Deleting the account
// with a wrong password shows the server's refusal; with the right one the account is erased, the
// page signed out and the login name free again.
func TestAccountPanel(t *testing.T) {
	t.Parallel()
	n := startServed(t)
	browser := newBrowser(t)
	mei := newPage(t, browser, "mei", "imledger-browser-test mei")
	mei.register(n.url, "mei", "mei-password-1")
	mei.clickJS(`#account-box summary`)

	mei.do("a wrong old password", chromedp.SetValue(chromedp.ID("old-password"), "not-it"),
		chromedp.SetValue(chromedp.ID("new-password"), "mei-password-2"), chromedp.Click(chromedp.ID("password-btn")))
	mei.waitFor("the refusal", `document.getElementById('account-error').textContent.includes('Could not change the password')`)
	mei.do("the right one", chromedp.SetValue(chromedp.ID("old-password"), "mei-password-1"),
		chromedp.SetValue(chromedp.ID("new-password"), "mei-password-2"), chromedp.Click(chromedp.ID("password-btn")))
	mei.waitFor("the change", `document.getElementById('account-status').textContent.startsWith('Password changed')`)
	if _, err := restCall(n.url, "", http.MethodPost, "/v1/im/auth/login",
		map[string]string{"tenant": "demo", "login": "mei", "password": "mei-password-1"}); err == nil {
		t.Fatal("the old password still logs in")
	}

	// A second device: a login with the new password and a WebSocket connection of it.
	other, err := restCall(n.url, "", http.MethodPost, "/v1/im/auth/login",
		map[string]string{"tenant": "demo", "login": "mei", "password": "mei-password-2", "device": "mei's phone"})
	if err != nil {
		t.Fatal(err)
	}
	phone := dialLoggedIn(t, n.url, other["token"].(string))
	sid, _ := other["session_id"].(string)
	row := `#sessions li[data-session="` + sid + `"]`
	deadline := time.Now().Add(20 * time.Second)
	for mei.count(row) == 0 { // the session list trails the login by the projection's lag
		if time.Now().After(deadline) {
			t.Fatalf("the phone's session was never listed: %s", mei.text("#sessions"))
		}
		mei.clickJS(`#account-box summary`) // closed, and open again: the list is read again
		mei.clickJS(`#account-box summary`)
		time.Sleep(300 * time.Millisecond)
	}
	if got := mei.text(row); !strings.Contains(got, "mei's phone") {
		t.Errorf("the phone's row: %q", got)
	}
	if mei.count(`#sessions li`) < 2 || !strings.Contains(mei.text("#sessions"), "(this one)") {
		t.Errorf("the sessions: %q", mei.text("#sessions"))
	}
	mei.clickJS(row + ` button`)
	reason := phone.endReason(t)
	if reason != "session_revoked" {
		t.Fatalf("the phone's connection ended with %q, want session_revoked", reason)
	}
	mei.waitFor("the row gone", `!document.querySelector('`+row+`')`)

	if got := mei.text("#conn"); got != "Connected" {
		t.Errorf("the page's own session after signing another out: %q", got)
	}
	if p := mei.problemsSeen(); len(p) > 0 {
		t.Fatalf("page problems: %q", p)
	}

	// Deleting the account takes the password again: a wrong one changes nothing, the right one
	// erases the account, signs the page out and frees the login name.
	mei.do("delete with a wrong password", chromedp.SetValue(chromedp.ID("delete-password"), "not-mei"), chromedp.Click(chromedp.ID("delete-btn")))
	mei.waitFor("the refusal", `document.getElementById('account-error').textContent.startsWith('Could not delete the account: ')`)
	mei.do("delete the account", chromedp.SetValue(chromedp.ID("delete-password"), "mei-password-2"), chromedp.Click(chromedp.ID("delete-btn")))
	mei.waitFor("signed out", `document.getElementById('login-error').textContent === 'Your account was deleted.'`)
	if _, id := restSignUp(t, n.url, "mei", "a-new-mei-password"); id == "" {
		t.Error("the deleted account's login name is not free")
	}
}

// restSignUp registers login over REST and returns a token of it and its user id.
func restSignUp(t *testing.T, baseURL, login, password string) (token, id string) {
	t.Helper()
	creds := map[string]string{"tenant": "demo", "login": login, "password": password}
	if _, err := restCall(baseURL, "", http.MethodPost, "/v1/im/auth/register", creds); err != nil {
		t.Fatal(err)
	}
	data, err := restCall(baseURL, "", http.MethodPost, "/v1/im/auth/login", creds)
	if err != nil {
		t.Fatal(err)
	}
	token, _ = data["token"].(string)
	id, _ = data["user_id"].(string)
	if token == "" || id == "" {
		t.Fatalf("login of %s: %v", login, data)
	}
	return token, id
}

// wsClient is a WebSocket session of the gateway, logged in.
type wsClient struct {
	conn *websocket.Conn
}

// dialLoggedIn opens a WebSocket session on baseURL and logs in with token.
func dialLoggedIn(t *testing.T, baseURL, token string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(baseURL, "http")+"/v1/im/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	w := &wsClient{conn: c}
	for i, f := range []string{`{"hi":{"id":"1","ver":"1"}}`, `{"login":{"id":"2","token":` + strconv.Quote(token) + `}}`} {
		if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
			t.Fatal(err)
		}
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var fr struct {
				Ctrl *struct {
					ID   string `json:"id"`
					Code int    `json:"code"`
				} `json:"ctrl"`
			}
			if json.Unmarshal(b, &fr) == nil && fr.Ctrl != nil && fr.Ctrl.ID == strconv.Itoa(i+1) {
				if fr.Ctrl.Code >= 300 {
					t.Fatalf("%s: %s", f, b)
				}
				break
			}
		}
	}
	return w
}

// endReason reads until the server ends the session and returns the reason of its last ctrl;
// it fails when the connection stays open 10 s or closes without one.
func (w *wsClient) endReason(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reason := ""
	for {
		_, b, err := w.conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatal("the connection stayed open 10 s")
			}
			return reason
		}
		var fr struct {
			Ctrl *struct {
				Text   string `json:"text"`
				Reason string `json:"reason"`
			} `json:"ctrl"`
		}
		if json.Unmarshal(b, &fr) == nil && fr.Ctrl != nil && fr.Ctrl.Text == "session ended" {
			reason = fr.Ctrl.Reason
		}
	}
}
