package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
)

// retryAfterFirstTry does what watermill's Retry does with every record: the same number of
// handler calls, the same ShouldRetry consultations, the same answer and the same context on
// each call, whether the first try succeeds, a later one does, none does, or the error is final.
func TestRetryAfterFirstTryBehavesAsRetry(t *testing.T) {
	t.Parallel()
	transient, final := errors.New("transient"), errors.New("final")
	produced := []*message.Message{message.NewMessage("out", nil)}
	type key struct{}
	for _, c := range []struct {
		name     string
		failures int   // calls that fail before one succeeds (-1: every call fails)
		err      error // what a failing call returns
		canceled bool  // the record's context ended before the handler ran
	}{
		{"first try", 0, transient, false},
		{"second try", 1, transient, false},
		{"fourth try", 3, transient, false},
		{"never", -1, transient, false},
		{"final error", -1, final, false},
		{"canceled", 0, transient, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			type run struct {
				calls    int
				asked    []int // RetryNum of each ShouldRetry call
				ctxOK    bool  // every call saw the record's own context
				out      []*message.Message
				err      error
				finalErr bool
			}
			try := func(wrap func(middleware.Retry) message.HandlerMiddleware) run {
				var r run
				r.ctxOK = true
				retry := middleware.Retry{MaxRetries: 3, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond,
					Multiplier: 2, ResetContextOnRetry: true,
					ShouldRetry: func(p middleware.RetryParams) bool {
						r.asked = append(r.asked, p.RetryNum)
						return !errors.Is(p.Err, final)
					}}
				ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "record"))
				defer cancel()
				if c.canceled {
					cancel()
				}
				msg := message.NewMessage("in", nil)
				msg.SetContext(ctx)
				h := func(m *message.Message) ([]*message.Message, error) {
					r.calls++
					if m.Context().Value(key{}) != "record" {
						r.ctxOK = false
					}
					// A handler may replace the record's context; a retry starts from the original.
					m.SetContext(context.WithValue(m.Context(), key{}, "changed"))
					if c.failures < 0 || r.calls <= c.failures {
						return nil, fmt.Errorf("call %d: %w", r.calls, c.err)
					}
					return produced, nil
				}
				r.out, r.err = wrap(retry)(h)(msg)
				r.finalErr = errors.Is(r.err, final)
				return r
			}
			want := try(func(r middleware.Retry) message.HandlerMiddleware { return r.Middleware })
			got := try(retryAfterFirstTry)
			if got.calls != want.calls || !slices.Equal(got.asked, want.asked) || got.ctxOK != want.ctxOK ||
				len(got.out) != len(want.out) || fmt.Sprint(got.err) != fmt.Sprint(want.err) || got.finalErr != want.finalErr {
				t.Fatalf("retryAfterFirstTry: %+v\nRetry: %+v", got, want)
			}
			if !want.ctxOK {
				t.Fatal("a call saw a context other than the record's")
			}
		})
	}
}
