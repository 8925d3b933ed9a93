package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// xss is a message that would run script if the page rendered content as HTML.
const xss = `<img src=x onerror=alert(1)> & <b>bold</b>`

// TestTwoUsersChatInTheBrowser drives the page in headless Chromium as two users in two browser
// contexts against a real server: both register, one creates a group and the other joins it,
// messages typed in one tab appear in the other in seq order, once, as text; a tab that was
// offline while a message was sent catches up when it reconnects.
func TestTwoUsersChatInTheBrowser(t *testing.T) {
	start := time.Now()
	shots := artifactsDir(t)
	srv, alice, bob := aliceAndBob(t)
	meetInAGroup(t, alice, bob)

	// Bob's subscription reaches Alice as a pres frame; Bob finds Alice among the members and
	// asks for her presence. Both show names from the public profiles, with roles.
	alice.waitFor("bob online for alice", memberList("alice (you) owner", "bob member")+` && `+onlineDot(bob.userID()))
	bob.waitFor("alice online for bob", memberList("alice owner", "bob (you) member")+` && `+onlineDot(alice.userID()))
	alice.fitsViewport()

	// Alice types and presses Enter; the ack's seq is shown, and Bob sees the message with it.
	alice.do("type", chromedp.SendKeys(chromedp.ID("message"), "hello bob"))
	alice.pressEnter("message")
	alice.waitFor("alice's ack", `(() => { const li = document.querySelector('#messages li:last-child');
		return li && !li.classList.contains('pending') && /^#\d+$/.test(li.querySelector('.seq').textContent); })()`)
	seq1 := alice.text("#messages li:last-child .seq")
	bob.waitFor("hello reaches bob", `Array.from(document.querySelectorAll('#messages li .text')).some(e => e.textContent === 'hello bob')`)
	if got := bob.text("#messages li:last-child .seq"); got != seq1 {
		t.Fatalf("bob shows seq %q, alice's ack said %q", got, seq1)
	}
	if got := alice.text("#send-status"); got != "Sent as "+seq1 {
		t.Fatalf("alice's send status %q, want %q", got, "Sent as "+seq1)
	}

	// Bob sends markup with the button; both tabs show it literally, and no element is made of it.
	bob.do("send markup with the button",
		chromedp.SendKeys(chromedp.ID("message"), xss),
		chromedp.Click(chromedp.ID("send-btn")))
	for _, p := range []*page{alice, bob} {
		p.waitFor("markup arrives as text", `Array.from(document.querySelectorAll('#messages li .text')).some(e => e.textContent === `+strconv.Quote(xss)+`)`)
		if n := p.count("#messages img, #messages b"); n != 0 {
			t.Fatalf("%s: the message list holds %d elements made from message content", p.name, n)
		}
	}

	// Bob goes offline; Alice sends; Bob comes back and catches up without duplicates.
	if n := srv.gate.cut("bob"); n == 0 {
		t.Fatal("found no WebSocket connection of bob to cut")
	}
	bob.waitFor("bob notices", `document.getElementById('conn').textContent.startsWith('Disconnected')`)
	alice.do("type while bob is away", chromedp.SendKeys(chromedp.ID("message"), "while you were away"))
	alice.pressEnter("message")
	alice.waitFor("alice's third ack", `document.querySelectorAll('#messages li:not(.pending)').length === 3`)
	srv.gate.open("bob")
	bob.waitFor("bob reconnects", `document.getElementById('conn').textContent === 'Connected'`)
	bob.waitFor("bob catches up", `Array.from(document.querySelectorAll('#messages li .text')).some(e => e.textContent === 'while you were away')`)

	for _, p := range []*page{alice, bob} {
		checkTranscript(t, p)
		p.fitsViewport()
		p.screenshot(shots, "group")
	}
	t.Logf("two users chatted in Chromium in %s", time.Since(start).Round(time.Millisecond))
}

// meetInAGroup has the first page create a group and the second open the group's link, which
// offers to join it, and join; the link survives a reload of the joiner's page.
func meetInAGroup(t *testing.T, owner, joiner *page) {
	t.Helper()
	joinByLink(t, joiner, createGroup(t, owner))
}

// createGroup has p create a group and returns the group's link.
func createGroup(t *testing.T, owner *page) string {
	t.Helper()
	owner.do("create group",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('groups-box').open = true`),
		chromedp.SendKeys(chromedp.ID("group-name"), "Browser test room"),
		chromedp.Click(chromedp.ID("create-btn")),
		chromedp.WaitVisible(chromedp.ID("room-open")))
	owner.waitFor("the group's link", `/^http:.*\/#grp\d+$/.test(document.getElementById('share-link').value)`)
	link := eval[string](owner, "group link", `document.getElementById('share-link').value`)
	if hash := eval[string](owner, "hash", `location.hash`); !strings.HasSuffix(link, hash) || !strings.HasPrefix(hash, "#grp") {
		t.Fatalf("the link %q does not end in the address's hash %q", link, hash)
	}
	return link
}

// joinByLink has p open a group's link, which offers to join it, and join; the link survives a
// reload of the page.
func joinByLink(t *testing.T, joiner *page, link string) {
	t.Helper()
	joiner.do("open the link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("join-banner")))
	joiner.waitFor("the group's name on the banner", `document.getElementById('join-banner-text').textContent.includes('Browser test room')`)
	joiner.do("join", chromedp.Click(chromedp.ID("join-banner-btn")), chromedp.WaitNotVisible(chromedp.ID("join-banner")))
	joiner.waitFor("the group's name as room title", `document.getElementById('room-name').textContent === 'Browser test room'`)
	joiner.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("room-open")))
	joiner.waitFor("the group again after the reload", `location.hash === `+strconv.Quote(link[strings.Index(link, "#"):])+
		` && document.getElementById('room-name').textContent === 'Browser test room' && document.getElementById('join-banner').hidden`+
		` && document.getElementById('conn').textContent === 'Connected'`)
}

// TestReloadRightAfterJoining: a user who reloads the page right after joining a group, while the
// conversation list does not list the group yet, is shown the group as a member (no join banner,
// the composer open) because the member list names them, and can send to it.
func TestReloadRightAfterJoining(t *testing.T) {
	srv, alice, bob := aliceAndBob(t)

	srv.gate.lagLists("bob")
	meetInAGroup(t, alice, bob)
	bob.waitFor("the composer open", `!document.getElementById('message').disabled`)
	bob.do("type", chromedp.SendKeys(chromedp.ID("message"), "joined and reloaded"))
	bob.pressEnter("message")
	alice.waitFor("bob's message reaches alice", `Array.from(document.querySelectorAll('#messages li .text')).some(e => e.textContent === 'joined and reloaded')`)
}

// TestMemberListCatchesUpWithASlowReadModel: when the member list's read model trails a join by
// more than a few seconds (a busy node), the page goes on asking and shows the new member once
// the list names them.
func TestMemberListCatchesUpWithASlowReadModel(t *testing.T) {
	srv, alice, bob := aliceAndBob(t)

	link := createGroup(t, alice)
	alice.waitFor("alice's member list", memberList("alice (you) owner"))
	srv.gate.freezeMembers("alice")
	joinByLink(t, bob, link)
	time.Sleep(5 * time.Second)
	if got := eval[bool](alice, "the frozen list", memberList("alice (you) owner")); !got {
		t.Fatalf("alice's member list changed while its read model was frozen: %q", eval[string](alice, "members", `Array.from(document.querySelectorAll("#members li")).map(li => li.textContent).join("|")`))
	}
	srv.gate.thawMembers("alice")
	alice.waitFor("bob on alice's list", memberList("alice (you) owner", "bob member"))
}

// TestABurstOfJoinsCostsAFewMemberLoads: when twelve users join a group within a moment, the
// owner's page shows them all after a few reloads of the member list, not a few per join.
func TestABurstOfJoinsCostsAFewMemberLoads(t *testing.T) {
	srv := newChatServer(t)
	browser := newBrowser(t)
	alice := newPage(t, browser, "alice", "imledger-browser-test alice")
	alice.register(srv.url, "alice", "alice-password-1")
	link := createGroup(t, alice)
	alice.waitFor("alice's member list", memberList("alice (you) owner"))
	gid := link[strings.Index(link, "#grp")+len("#grp"):]

	const joiners = 12
	tokens := make([]string, joiners)
	for i := range tokens {
		tokens[i] = restLogin(t, srv.url, fmt.Sprintf("joiner%02d", i), "joiner-password-1")
	}
	before := srv.gate.memberLoads("alice")
	errs := make(chan error, joiners)
	for _, token := range tokens {
		go func() {
			_, err := restCall(srv.url, token, http.MethodPost, "/v1/im/groups/"+gid+"/join", nil)
			errs <- err
		}()
	}
	for range joiners {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	alice.waitFor("every joiner on alice's list", `document.querySelectorAll('#members li').length === `+strconv.Itoa(joiners+1))
	time.Sleep(4 * time.Second) // the reloads a refresh per join would still make
	if n := srv.gate.memberLoads("alice") - before; n > 8 {
		t.Fatalf("alice's page asked for the member list %d times for %d joins", n, joiners)
	} else {
		t.Logf("%d joins, %d member list loads", joiners, n)
	}
}

// restLogin registers login in the demo tenant through the REST API and returns a token of it.
func restLogin(t *testing.T, baseURL, login, password string) string {
	t.Helper()
	token, _ := restSignUp(t, baseURL, login, password)
	return token
}

// restCall makes one REST request as the page does and returns the data of its answer.
func restCall(baseURL, token, method, path string, body any) (map[string]any, error) {
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, baseURL+path, in)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", uuid.NewString())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var env struct {
		Data map[string]any `json:"data"`
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return env.Data, nil
}

// aliceAndBob starts a chat server and registers alice and bob, each in a browser context of
// their own.
func aliceAndBob(t *testing.T) (srv *chatServer, alice, bob *page) {
	t.Helper()
	srv = newChatServer(t)
	browser := newBrowser(t)
	alice = newPage(t, browser, "alice", "imledger-browser-test alice")
	bob = newPage(t, browser, "bob", "imledger-browser-test bob")
	alice.register(srv.url, "alice", "alice-password-1")
	bob.register(srv.url, "bob", "bob-password-1")
	return srv, alice, bob
}

// userID is the id of the user logged in on p.
func (p *page) userID() string {
	p.t.Helper()
	return eval[string](p, "user id", `JSON.parse(sessionStorage.getItem('imledger.demo.session')).userId`)
}

// checkTranscript checks that p shows the test's three messages, once each, in ascending seq
// order, and that the page reported no problems.
func checkTranscript(t *testing.T, p *page) {
	t.Helper()
	got := eval[[]string](p, "messages", `Array.from(document.querySelectorAll('#messages li')).map(li => li.dataset.seq + ' ' + li.querySelector('.text').textContent)`)
	if len(got) != 3 || !strings.HasSuffix(got[0], " hello bob") || !strings.HasSuffix(got[1], " "+xss) ||
		!strings.HasSuffix(got[2], " while you were away") {
		t.Fatalf("%s shows %q, want the three messages in order", p.name, got)
	}
	for i := 1; i < len(got); i++ {
		a, _ := strconv.Atoi(strings.Fields(got[i-1])[0])
		b, _ := strconv.Atoi(strings.Fields(got[i])[0])
		if b <= a {
			t.Fatalf("%s: seqs not ascending: %q", p.name, got)
		}
	}
	if problems := p.problemsSeen(); len(problems) > 0 {
		t.Fatalf("%s: the page reported problems: %q", p.name, problems)
	}
}

// memberList is a JavaScript condition: the page's member list holds exactly these entries
// (name, space, role), in order.
func memberList(entries ...string) string {
	return `Array.from(document.querySelectorAll('#members li')).map(li => li.querySelector('.grow').textContent + ' ' + li.querySelector('.role').textContent).join('\n') === ` +
		strconv.Quote(strings.Join(entries, "\n"))
}

// onlineDot is a JavaScript condition: a presence dot of user uid shows them online.
func onlineDot(uid string) string {
	return `document.querySelector('.dot.on[data-user="` + uid + `"]') !== null`
}

// TestStalePresenceAnswer: a presence lookup answered after a pres frame about the same user does
// not undo the frame. Alice's page asks for Bob's presence while Bob is offline, and the answer
// (offline) is held back until Bob has come back and his pres frame has shown him online.
func TestStalePresenceAnswer(t *testing.T) {
	srv, alice, bob := aliceAndBob(t)
	meetInAGroup(t, alice, bob)
	bobID := bob.userID()
	if n := srv.gate.cut("bob"); n == 0 {
		t.Fatal("found no WebSocket connection of bob to cut")
	}
	bob.waitFor("bob notices", `document.getElementById('conn').textContent.startsWith('Disconnected')`)

	srv.gate.holdPresence("alice")
	defer srv.gate.releasePresence("alice")
	alice.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("room-open")))
	alice.waitForLong("alice back in the group", `document.getElementById('conn').textContent === 'Connected' && `+
		memberList("alice (you) owner", "bob member")+` && !(`+onlineDot(bobID)+`)`)
	waitUntil(t, "alice's presence lookup of bob, answered offline and held", func() bool { held, done := srv.gate.presenceHeld("alice"); return held > done })

	srv.gate.open("bob")
	alice.waitForLong("bob's pres frame shows him online", onlineDot(bobID))
	srv.gate.releasePresence("alice")
	waitUntil(t, "the held presence answers written", func() bool { held, done := srv.gate.presenceHeld("alice"); return done == held })
	time.Sleep(500 * time.Millisecond) // the page's turn to handle the answers
	if !eval[bool](alice, "bob's dot", onlineDot(bobID)) {
		t.Fatalf("an older presence answer showed bob offline after his pres frame: %s", alice.state())
	}
}

// waitUntil polls cond for up to 15 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 15 s for %s", what)
		}
	}
}

// TestTheFirstListLeavesTheFieldBeingTypedIn: the page moves the focus to its first step (the
// first conversation, or naming a new group) when the conversation list first comes in, which
// may be after the user has started typing elsewhere: the field being typed in keeps the focus
// and every key.
func TestTheFirstListLeavesTheFieldBeingTypedIn(t *testing.T) {
	srv := newChatServer(t)
	browser := newBrowser(t)
	bob := newPage(t, browser, "bob", "imledger-browser-test bob")
	srv.gate.holdLists("bob")
	bob.register(srv.url, "bob", "bob-password-1")
	bob.do("start typing a friend's id",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('friends-box').open = true`),
		chromedp.SendKeys(chromedp.ID("friend-id"), "12"))
	srv.gate.releaseLists("bob")
	bob.waitFor("the first list (the page opens the groups box for a user without conversations)",
		`document.getElementById('groups-box').open`)
	if got := eval[string](bob, "the focused field", `document.activeElement.id + ' ' + document.getElementById('friend-id').value`); got != "friend-id 12" {
		t.Fatalf("after the first list the focus and the typed id are %q, want \"friend-id 12\"", got)
	}
}
