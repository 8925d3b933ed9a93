package rest_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/imledger/imledger/transport/rest"
)

// TestPushChangesSayWhetherTheyChangedAnything: a device removal or a mute change answers
// changed true only when it changed something, and only then is an event recorded; registering a
// device with the token it holds records nothing either.
func TestPushChangesSayWhetherTheyChangedAnything(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, more: true})
	tok := s.token(t, s.tenant, 1)
	const device = `{"provider":"webhook","token":"https://example.com/hook","platform":"web"}`
	steps := []struct {
		name, method, path, body string
		changed                  *bool // nil: a registration, which answers the device
		events                   int   // events of the tenant after the step
	}{
		{"remove a device never registered", http.MethodDelete, "/v1/im/push/devices/d1", "", ptr(false), 0},
		{"register it", http.MethodPut, "/v1/im/push/devices/d1", device, nil, 1},
		{"register it again, unchanged", http.MethodPut, "/v1/im/push/devices/d1", device, nil, 1},
		{"register another token", http.MethodPut, "/v1/im/push/devices/d1", `{"provider":"jpush","token":"reg-2"}`, nil, 2},
		{"remove it", http.MethodDelete, "/v1/im/push/devices/d1", "", ptr(true), 3},
		{"remove it again", http.MethodDelete, "/v1/im/push/devices/d1", "", ptr(false), 3},
		{"unmute a conversation never muted", http.MethodDelete, "/v1/im/push/mutes/p2p1_2", "", ptr(false), 3},
		{"mute it", http.MethodPut, "/v1/im/push/mutes/p2p1_2", "", ptr(true), 4},
		{"mute it again", http.MethodPut, "/v1/im/push/mutes/p2p1_2", "", ptr(false), 4},
		{"unmute it", http.MethodDelete, "/v1/im/push/mutes/p2p1_2", "", ptr(true), 5},
		{"unmute it again", http.MethodDelete, "/v1/im/push/mutes/p2p1_2", "", ptr(false), 5},
	}
	for i, st := range steps {
		a := s.do(t, req{method: st.method, path: st.path, body: st.body, token: tok, key: "k" + strconv.Itoa(i)})
		expect(t, st.name, a, http.StatusOK, "ok")
		if st.changed != nil {
			if got := a.data(t)["changed"]; got != *st.changed {
				t.Errorf("%s: changed %v, want %v", st.name, got, *st.changed)
			}
		} else if a.data(t)["device_id"] != "d1" {
			t.Errorf("%s: %s", st.name, a.Raw)
		}
		if n := s.count(t, "SELECT count(*) FROM events WHERE tenant_id = $1 AND event_type LIKE 'push.%'", s.tenant.String()); n != st.events {
			t.Errorf("%s: %d push events recorded, want %d", st.name, n, st.events)
		}
	}
	// The device token is in the event the push-settings projection folds, under the device's stream.
	if n := s.count(t, "SELECT count(*) FROM events WHERE tenant_id = $1 AND stream_id = 'user:1/push/device/d1' AND payload->>'token' = 'reg-2'",
		s.tenant.String()); n != 1 {
		t.Errorf("%d registrations of token reg-2 on the device's stream, want 1", n)
	}
}

func ptr[T any](v T) *T { return &v }
