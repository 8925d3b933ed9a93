package rest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/telemetry"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/rest"
)

// panickyPresence panics when asked for user 666 and answers offline for anyone else.
type panickyPresence struct{}

func (panickyPresence) Get(_ context.Context, _ domain.TenantID, user domain.UserID) (presence.Presence, error) {
	if user == 666 {
		panic("injected handler panic")
	}
	return presence.Presence{Status: presence.StatusOffline}, nil
}

// everyone lets anyone read anyone's presence.
type everyone struct{}

func (everyone) CanSeePresence(context.Context, domain.TenantID, domain.UserID, domain.UserID) error {
	return nil
}

// TestHandlerPanicIsAnswered500AndCounted: a handler that panics is answered with the 500
// envelope, the panic is counted under component rest, and the server keeps serving.
func TestHandlerPanicIsAnswered500AndCounted(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	panics, err := telemetry.NewPanics(reg)
	if err != nil {
		t.Fatal(err)
	}
	signer := newSigner(t, time.Now)
	mux := http.NewServeMux()
	if _, err := rest.New(mux, rest.Config{Panics: panics}, rest.Handlers{Presence: panickyPresence{}, PresencePolicy: everyone{}, Tokens: signer}); err != nil {
		t.Fatal(err)
	}
	s := &stack{srv: httptest.NewServer(mux), signer: signer}
	t.Cleanup(s.srv.Close)
	tok := s.token(t, domain.MustTenantID("acme"), 1)
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/users/666/presence", token: tok})
	if a.Status != http.StatusInternalServerError || a.Body.Reason != rest.ReasonInternal || a.Header.Get(rest.HeaderRequestID) != a.Body.RequestID {
		t.Fatalf("panicking handler answered %d %s", a.Status, a.Raw)
	}
	if n := panics.Count("rest"); n != 1 {
		t.Errorf("imledger_panics_total{component=rest} = %v, want 1", n)
	}
	if a := s.do(t, req{method: http.MethodGet, path: "/v1/im/users/2/presence", token: tok}); a.Status != http.StatusOK {
		t.Fatalf("after the panic: %d %s", a.Status, a.Raw)
	}
}
