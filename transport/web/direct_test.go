package web_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// directTopic is the 1:1 topic of two users: p2p<lower id>_<higher id>.
func directTopic(t *testing.T, x, y string) string {
	t.Helper()
	a, err1 := strconv.ParseUint(x, 10, 64)
	b, err2 := strconv.ParseUint(y, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("user ids %q, %q", x, y)
	}
	if b < a {
		x, y = y, x
	}
	return "p2p" + x + "_" + y
}

// hasText is a JavaScript condition: a message of the page's open conversation reads text.
func hasText(text string) string {
	return `Array.from(document.querySelectorAll('#messages li .text')).some(e => e.textContent === ` + strconv.Quote(text) + `)`
}

// itemWith is a JavaScript expression: the message item reading text (or undefined).
func itemWith(text string) string {
	return `Array.from(document.querySelectorAll('#messages li')).find(li => li.querySelector('.text').textContent === ` + strconv.Quote(text) + `)`
}

// clickIn clicks the button matching sel inside the message item reading text.
func (p *page) clickIn(text, sel string) {
	p.t.Helper()
	p.do("click "+sel+" of "+strconv.Quote(text), chromedp.Evaluate[chromedp.Void](`(() => { const li = `+itemWith(text)+`;
		if (!li) throw new Error('no message reads that'); li.querySelector(`+strconv.Quote(sel)+`).click(); })()`))
}

// clickJS clicks the first element matching sel the way a keyboard's Enter on a focused button
// does; the lists re-render while polls answer, so a node looked up by the protocol may be gone
// by the time the mouse would reach it.
func (p *page) clickJS(sel string) {
	p.t.Helper()
	p.waitFor(sel, `document.querySelector(`+strconv.Quote(sel)+`) !== null`)
	p.do("click "+sel, chromedp.Evaluate[chromedp.Void](`document.querySelector(`+strconv.Quote(sel)+`).click()`))
}

// TestOneToOneChatInTheBrowser drives two browsers through a 1:1 chat against a real server:
// a friend request and its acceptance, messages both ways with read receipts and typing, an
// edit and a recall that the other side sees, delete-for-me, an unread badge in the conversation
// list, and a reconnect with catch-up after the server restarts on the same port. Screenshots
// at 1280x900 are written as test artifacts.
func TestOneToOneChatInTheBrowser(t *testing.T) {
	start := time.Now()
	shots := artifactsDir(t)
	srv, alice, bob := aliceAndBob(t)
	aliceID, bobID := alice.userID(), bob.userID()
	topic := directTopic(t, aliceID, bobID)

	// Bob asks Alice by her user id and opens their chat by its address.
	bob.do("ask alice",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('friends-box').open = true`),
		chromedp.SendKeys(chromedp.ID("friend-id"), aliceID),
		chromedp.Click(chromedp.ID("friend-btn")))
	bob.waitFor("the request is sent", `document.getElementById('side-error').textContent.startsWith('Asked')`)
	bob.do("open the chat with alice", chromedp.Navigate(srv.url+"/#"+topic), chromedp.WaitVisible(chromedp.ID("room-open")))
	bob.waitFor("subscribed", `document.getElementById('conn').textContent === 'Connected' && document.getElementById('room-name').textContent === 'alice'`)

	// Alice finds the request after a reload, accepts it and opens the chat from her friends.
	alice.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("chat-view")))
	// The request reaches the page from the read model: a projector that is behind when the
	// page reloads leaves it to the page's periodic refresh.
	alice.waitForLong("bob's request", `document.querySelector('#requests li button') !== null && document.getElementById('requests').textContent.includes('bob asks')`)
	alice.clickJS("#requests li button")
	alice.waitFor("bob among friends", `Array.from(document.querySelectorAll('#friends li')).some(li => li.textContent.includes('bob'))`)
	alice.clickJS("#friends li button")
	alice.waitFor("the chat's address", `location.hash === '#`+topic+`' && document.getElementById('room-name').textContent === 'bob'`)
	// The friend list also comes from the read model; the page asks again over 15 s after the
	// acceptance's info frame, so a projector seconds behind still shows it without a reload.
	bob.waitForLong("alice's acceptance reaches bob's friend list", `Array.from(document.querySelectorAll('#friends li')).some(li => li.textContent.includes('alice'))`)

	// Alice writes; Bob reads it, which Alice sees as a read receipt. Bob's typing shows at Alice's.
	alice.waitFor("alice connected", `document.getElementById('conn').textContent === 'Connected'`)
	alice.do("type", chromedp.SendKeys(chromedp.ID("message"), "hello bob"))
	alice.pressEnter("message")
	bob.waitFor("hello reaches bob", hasText("hello bob"))
	alice.waitFor("bob has read it", itemWith("hello bob")+`?.querySelector('.state').textContent === 'seen'`)
	bob.do("type", chromedp.SendKeys(chromedp.ID("message"), "hi alice"))
	alice.waitFor("bob is typing", `document.getElementById('typing').textContent === 'bob is typing…'`)
	bob.pressEnter("message")
	alice.waitFor("bob's answer", hasText("hi alice"))
	alice.waitFor("bob's presence dot", onlineDot(bobID))
	alice.fitsViewport()
	bob.fitsViewport()
	alice.accessible()
	alice.screenshot(shots, "1-chat")
	bob.screenshot(shots, "1-chat")

	// Alice edits her message; Bob sees the new text. Then she recalls it; Bob sees the placeholder.
	// The page knows the version of a message it was sent live, so the edit does not wait for
	// the message history, which may not hold the message yet: here it never answers.
	srv.gate.trailHistory("alice", 1<<30)
	alice.clickIn("hello bob", ".op-edit")
	alice.waitFor("editing", `document.getElementById('message').value === 'hello bob' && document.getElementById('message-label').textContent.startsWith('Edit message #')`)
	alice.do("change the text", chromedp.SendKeys(chromedp.ID("message"), ", how are you?"))
	alice.pressEnter("message")
	alice.waitFor("edited here", hasText("hello bob, how are you?"))
	bob.waitFor("the edit reaches bob", hasText("hello bob, how are you?")+` && `+itemWith("hello bob, how are you?")+`.querySelector('.edited').textContent === '(edited)'`)
	srv.gate.trailHistory("alice", 0)
	if n := srv.gate.historyReads("alice"); n != 0 {
		t.Fatalf("alice's page read the message history %d times to edit a message it was sent live", n)
	}
	alice.clickIn("hello bob, how are you?", ".op-recall")
	alice.clickIn("hello bob, how are you?", ".op-recall") // the second click confirms
	bob.waitFor("the recall reaches bob", hasText("(message recalled)")+` && !(`+hasText("hello bob, how are you?")+`)`)
	alice.waitFor("recalled here", hasText("(message recalled)"))

	// Bob deletes his own message for himself only.
	bob.clickIn("hi alice", ".op-delete")
	bob.waitFor("gone for bob", `!(`+hasText("hi alice")+`)`)
	if alice.count("#messages li") != 2 {
		t.Fatalf("alice should still see both messages: %s", alice.state())
	}

	// Bob moves to a group of his own; Alice's next message is an unread badge in his list.
	bob.do("create a group",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('groups-box').open = true`),
		chromedp.SendKeys(chromedp.ID("group-name"), "Bob's notes"),
		chromedp.Click(chromedp.ID("create-btn")))
	bob.waitFor("in the group", `location.hash.startsWith('#grp')`)
	alice.do("type", chromedp.SendKeys(chromedp.ID("message"), "are you there?"))
	alice.pressEnter("message")
	badge := `document.querySelector('#convs button[data-topic="` + topic + `"] .badge')`
	bob.waitFor("the unread badge", badge+`?.textContent === '1' && document.querySelector('#convs button[data-topic="`+topic+
		`"] .last').textContent === 'are you there?' && document.querySelector('#convs li button').dataset.topic === '`+topic+`'`)
	bob.fitsViewport()
	bob.accessible()
	if label := eval[string](bob, "the chat's spoken summary", `document.querySelector('#convs button[data-topic="`+topic+`"]').getAttribute('aria-label')`); label != "alice, 1 unread. Last: are you there?" {
		t.Fatalf("the unread chat is announced as %q", label)
	}
	bob.screenshot(shots, "2-unread-badge")
	bob.clickJS(`#convs button[data-topic="` + topic + `"]`)
	bob.waitFor("read, badge gone", hasText("are you there?")+` && `+badge+` === null`)

	// The server stops and starts again on the same port. Bob is held offline meanwhile, so
	// Alice's next message reaches him only by catching up after he reconnects.
	if n := srv.gate.cut("bob"); n == 0 {
		t.Fatal("found no WebSocket connection of bob to cut")
	}
	srv.restart(t, time.Second)
	for _, p := range []*page{alice, bob} {
		p.waitFor("notices the restart", `document.getElementById('conn').textContent !== 'Connected'`)
	}
	alice.waitForLong("reconnects to the restarted server", `document.getElementById('conn').textContent === 'Connected'`)
	alice.do("type", chromedp.SendKeys(chromedp.ID("message"), "after the restart"))
	alice.pressEnter("message")
	alice.waitFor("acked after the restart", itemWith("after the restart")+`?.classList.contains('pending') === false`)
	srv.gate.open("bob")
	bob.waitForLong("reconnects to the restarted server", `document.getElementById('conn').textContent === 'Connected'`)
	bob.waitFor("catches up", hasText("after the restart"))
	alice.screenshot(shots, "3-after-restart")
	bob.screenshot(shots, "3-after-restart")

	want := []string{"(message recalled)", "are you there?", "after the restart"}
	got := eval[[]string](bob, "bob's messages", `Array.from(document.querySelectorAll('#messages li')).map(li => li.dataset.seq + ' ' + li.querySelector('.text').textContent)`)
	if len(got) != len(want) {
		t.Fatalf("bob shows %q, want %q once each", got, want)
	}
	last := 0
	for i, g := range got {
		seq, _ := strconv.Atoi(strings.Fields(g)[0])
		if !strings.HasSuffix(g, " "+want[i]) || seq <= last {
			t.Fatalf("bob shows %q, want %q in ascending seq order", got, want)
		}
		last = seq
	}
	for _, p := range []*page{alice, bob} {
		if problems := p.problemsSeen(); len(problems) > 0 {
			t.Fatalf("%s: the page reported problems: %q", p.name, problems)
		}
	}
	t.Logf("a 1:1 chat with an edit, a recall and a server restart in Chromium in %s", time.Since(start).Round(time.Millisecond))
}

// TestEditWhileHistoryTrails: a message shown from history, whose content
// version the page does not know, is edited with the version the message history answers; while
// the history has not caught up with the message yet, the page asks again rather than give up.
func TestEditWhileHistoryTrails(t *testing.T) {
	srv := newChatServer(t)
	alice := newPage(t, newBrowser(t), "alice", "imledger-browser-test alice")
	alice.register(srv.url, "alice", "alice-password-1")
	createGroup(t, alice)
	alice.waitFor("alice connected", `document.getElementById('conn').textContent === 'Connected'`)
	alice.do("type", chromedp.SendKeys(chromedp.ID("message"), "first draft"))
	alice.pressEnter("message")
	alice.waitFor("acked", itemWith("first draft")+`?.classList.contains('pending') === false`)
	alice.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("room-open")))
	alice.waitForLong("the message from history", hasText("first draft")+` && document.getElementById('conn').textContent === 'Connected'`)

	srv.gate.trailHistory("alice", 2)
	alice.clickIn("first draft", ".op-edit")
	alice.waitFor("editing", `document.getElementById('message').value === 'first draft'`)
	alice.do("change the text", chromedp.SendKeys(chromedp.ID("message"), ", revised"))
	alice.pressEnter("message")
	alice.waitFor("edited", hasText("first draft, revised")+` && document.getElementById('send-status').textContent.startsWith('Edited #')`)
	if n := srv.gate.historyReads("alice"); n != 3 {
		t.Fatalf("the page read the message history %d times, want 3 (two that had not caught up, then the message)", n)
	}
	// The edit is stored: a second edit from the version the first one answered is accepted.
	alice.clickIn("first draft, revised", ".op-edit")
	alice.do("change the text again", chromedp.SendKeys(chromedp.ID("message"), " twice"))
	alice.pressEnter("message")
	alice.waitFor("edited twice", hasText("first draft, revised twice")+` && document.getElementById('send-status').textContent.startsWith('Edited #')`)
	if n := srv.gate.historyReads("alice"); n != 3 {
		t.Fatalf("the second edit read the message history (%d reads in all); the first edit's answer gave its version", n)
	}
	if problems := alice.problemsSeen(); len(problems) > 0 {
		t.Fatalf("the page reported problems: %q", problems)
	}
}
