package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts headless Chromium for the test and returns its context; it is stopped at
// cleanup. The flags keep Chromium off the network except for the pages it is sent to: without
// them it tries Google services, which this machine's network refuses, and stalls.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if st, err := os.Stat(chromiumPath); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("the browser test needs Chromium at %s; install it: apt-get update && apt-get install -y chromium", chromiumPath)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium leaves a singleton socket directory in TMPDIR; keep it in the test's.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancel)
	// The first action starts the browser, which lives as long as the context of that action:
	// it must be ctx itself, not a context with a deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	return ctx
}

// page is one tab in its own browser context (its own cookies and storage): one user.
type page struct {
	t    *testing.T
	name string
	ctx  context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions, console errors, browser log errors
}

// newPage opens a tab in a fresh browser context of browser whose requests carry userAgent.
// Uncaught exceptions, console errors and browser log errors other than failed requests (CSP
// violations among them) are collected for problemsSeen.
func newPage(t *testing.T, browser context.Context, name, userAgent string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	p := &page{t: t, name: name, ctx: ctx}
	// The first action opens the tab, which lives as long as that action's context.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("%s: open a tab: %v", name, err)
	}
	p.call("user agent", func(ctx context.Context) error {
		_, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: userAgent})
		return err
	})
	// The window size the layout promises to fit without scrolling.
	p.do("viewport", chromedp.EmulateViewport(viewportWidth, viewportHeight))
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// Failed requests are logged by the network source; the page handles those
			// answers itself (a read model that trails a command answers 403 or 404 for a
			// moment). Everything else at error level is a problem: exceptions, the page's own
			// console.error, CSP violations.
			if (m.Type == chromedp.ConsoleError && m.Source != "network") || m.IsException() {
				p.mu.Lock()
				p.problems = append(p.problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// problemsSeen returns what went wrong in the page so far.
func (p *page) problemsSeen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// The viewport every tab gets: the page must show the conversation and the composer in it
// without scrolling.
const (
	viewportWidth  = 1280
	viewportHeight = 900
)

// artifactsDir is where screenshots go: $IMLEDGER_ARTIFACTS/<test name> when set, else a
// directory of the test's own (logged, and kept only while the test runs).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if root := os.Getenv("IMLEDGER_ARTIFACTS"); root != "" {
		dir = filepath.Join(root, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// screenshot writes what the tab shows to dir/<page>-<name>.png.
func (p *page) screenshot(dir, name string) {
	p.t.Helper()
	var png []byte
	p.call("screenshot "+name, func(ctx context.Context) (err error) {
		png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
		return err
	})
	if err := os.WriteFile(filepath.Join(dir, p.name+"-"+name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// fitsViewport fails the test unless the page needs no scrolling and the message list, the
// message box and its button lie inside the viewport.
func (p *page) fitsViewport() {
	p.t.Helper()
	got := eval[string](p, "layout", `(() => {
		const out = [];
		const se = document.scrollingElement;
		if (se.scrollHeight > innerHeight || se.scrollWidth > innerWidth) out.push('page scrolls: ' + se.scrollWidth + 'x' + se.scrollHeight);
		for (const id of ['messages', 'message', 'send-btn', 'convs']) {
			const r = document.getElementById(id).getBoundingClientRect();
			if (r.height === 0 || r.top < 0 || r.bottom > innerHeight || r.right > innerWidth) out.push(id + ' at ' + JSON.stringify(r));
		}
		return out.join('; ');
	})()`)
	if got != "" {
		p.t.Fatalf("%s: at %dx%d: %s", p.name, viewportWidth, viewportHeight, got)
	}
}

// accessible fails the test unless every visible control has a name a screen reader can say
// (a label, text or aria-label), the message list announces new messages, and each visible
// conversation and message action is reachable by Tab (a button, not tabindex -1).
func (p *page) accessible() {
	p.t.Helper()
	got := eval[string](p, "accessibility", `(() => {
		const out = [];
		const visible = e => e.getClientRects().length > 0;
		for (const e of document.querySelectorAll('input, textarea, select')) {
			if (visible(e) && e.labels.length === 0 && !e.getAttribute('aria-label')) out.push('unlabelled ' + e.id);
		}
		for (const b of document.querySelectorAll('button, summary')) {
			if (visible(b) && !(b.getAttribute('aria-label') || b.textContent.trim())) out.push('nameless button in ' + b.parentElement.id);
			if (visible(b) && b.tabIndex < 0) out.push('button out of the tab order: ' + b.textContent);
		}
		const log = document.getElementById('messages');
		if (log.getAttribute('role') !== 'log' || log.getAttribute('aria-live') !== 'polite') out.push('the message list is not a live log');
		for (const b of document.querySelectorAll('#convs button')) {
			if (!/unread|Last:|No messages|^[^,]+$/.test(b.getAttribute('aria-label') || '')) out.push('conversation without a spoken summary');
		}
		return out.join('; ');
	})()`)
	if got != "" {
		p.t.Fatalf("%s: %s", p.name, got)
	}
}

// stepTimeout bounds one step of a page.
const stepTimeout = 15 * time.Second

// call runs f with the tab's context, bounded by stepTimeout, and fails the test with the page's
// visible state when it fails.
func (p *page) call(what string, f func(ctx context.Context) error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	if err := f(ctx); err != nil {
		p.t.Fatalf("%s: %s: %v\n  page state: %s\n  problems: %q", p.name, what, err, p.state(), p.problemsSeen())
	}
}

// state describes what the page shows: connection, errors and the messages, for failures.
func (p *page) state() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		conn: document.getElementById('conn').textContent,
		loginError: document.getElementById('login-error').textContent,
		sideError: document.getElementById('side-error').textContent,
		hash: location.hash,
		room: document.getElementById('room-name').textContent,
		sendStatus: document.getElementById('send-status').textContent,
		account: document.getElementById('account-status').textContent + ' ' + document.getElementById('account-error').textContent,
		conversations: Array.from(document.querySelectorAll('#convs li')).map(li => li.textContent),
		members: Array.from(document.querySelectorAll('#members li')).map(li => li.textContent),
		messages: Array.from(document.querySelectorAll('#messages li')).map(li => li.textContent)})`))
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return s
}

// do runs actions in the tab.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	p.call(what, func(ctx context.Context) error { return chromedp.Do(ctx, actions...) })
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](p *page, what, expr string) T {
	p.t.Helper()
	var v T
	p.call(what, func(ctx context.Context) (err error) {
		v, err = chromedp.Run(ctx, chromedp.Evaluate[T](expr))
		return err
	})
	return v
}

// waitFor polls a JavaScript expression until it is true.
func (p *page) waitFor(what, expr string) {
	p.t.Helper()
	p.do("wait for "+what, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(stepTimeout))(ctx, t)
	})
}

// reconnectTimeout bounds a reconnect: the page's backoff grows to 15 s between attempts.
const reconnectTimeout = 45 * time.Second

// waitForLong is waitFor with reconnectTimeout.
func (p *page) waitForLong(what, expr string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, reconnectTimeout)
	defer cancel()
	err := chromedp.Do(ctx, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond),
			chromedp.WithPollingTimeout(reconnectTimeout))(ctx, t)
	})
	if err != nil {
		p.t.Fatalf("%s: wait for %s: %v\n  page state: %s\n  problems: %q", p.name, what, err, p.state(), p.problemsSeen())
	}
}

// text reads the text content of the first node that the CSS selector sel matches.
func (p *page) text(sel string) string {
	p.t.Helper()
	return eval[string](p, "read "+sel, `document.querySelector(`+strconv.Quote(sel)+`).textContent`)
}

// count counts the nodes that the CSS selector sel matches.
func (p *page) count(sel string) int {
	p.t.Helper()
	return eval[int](p, "count "+sel, `document.querySelectorAll(`+strconv.Quote(sel)+`).length`)
}

// register opens the page and registers login with password.
func (p *page) register(baseURL, login, password string) {
	p.t.Helper()
	p.do("register "+login,
		chromedp.Navigate(baseURL+"/"),
		chromedp.WaitVisible(chromedp.ID("login-name")),
		chromedp.SendKeys(chromedp.ID("login-name"), login),
		chromedp.SendKeys(chromedp.ID("login-password"), password),
		chromedp.Click(chromedp.ID("register-btn")),
		chromedp.WaitVisible(chromedp.ID("chat-view")),
	)
	p.waitFor("connected", `document.getElementById('conn').textContent === 'Connected'`)
}

// pressEnter presses Enter in the element with id, as a keyboard does: one keyDown that carries
// the text, so a handler that cancels the keydown also cancels the newline. (SendKeys sends the
// text in a separate char event, which a cancelled keydown does not stop.)
func (p *page) pressEnter(id string) {
	p.t.Helper()
	enter := input.DispatchKeyEventParams{Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13}
	down, up := enter, enter
	down.Type, down.Text, down.UnmodifiedText = kb.KeyDown, "\r", "\r"
	up.Type = kb.KeyUp
	p.do("press Enter in #"+id, chromedp.Focus(chromedp.ID(id)), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, ev := range []input.DispatchKeyEventParams{down, up} {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
				return err
			}
		}
		return nil
	}))
}
