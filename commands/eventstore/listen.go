package eventstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen calls wake whenever an append commits (a NOTIFY on Config.NotifyChannel), and once
// after each (re)connection, since notifications sent while it was not listening are lost. It
// is a hint only: wake may be called for nothing, and several commits may give one call. Listen
// uses a dedicated connection outside the pool; on an error it logs a warning, waits with
// doubling backoff between Config.ListenMinBackoff and ListenMaxBackoff, and reconnects. It
// returns nil when ctx ends. wake runs on Listen's goroutine and should not block for long.
func (s *Store) Listen(ctx context.Context, wake func()) error {
	backoff := s.cfg.ListenMinBackoff
	for ctx.Err() == nil {
		listened, err := s.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			break
		}
		if listened {
			backoff = s.cfg.ListenMinBackoff
		}
		s.cfg.Logger.WarnContext(ctx, "event notifications interrupted, reconnecting",
			"channel", s.cfg.NotifyChannel, "backoff", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, s.cfg.ListenMaxBackoff)
	}
	return nil
}

// listenOnce connects, listens and forwards notifications until an error. listened reports
// whether LISTEN succeeded, which resets the backoff.
func (s *Store) listenOnce(ctx context.Context, wake func()) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return false, err
	}
	defer func() {
		// The connection is closed even when ctx has ended.
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.cfg.NotifyChannel}.Sanitize()); err != nil {
		return false, err
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		wake()
	}
}

// Notifications returns a channel that receives a value after appends commit, as Listen
// describes; pending wake-ups are coalesced into one. The channel is closed when ctx ends.
func (s *Store) Notifications(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		_ = s.Listen(ctx, func() {
			select {
			case ch <- struct{}{}:
			default:
			}
		})
	}()
	return ch
}
