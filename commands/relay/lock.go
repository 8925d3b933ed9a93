package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// advisoryLock is a held session-level advisory lock: it lasts as long as conn's session.
type advisoryLock struct {
	conn      *pgx.Conn
	watchDone chan struct{}
}

// acquireLock takes the relay's advisory lock on a connection of its own, trying every
// Config.LockRetry while another session holds it. It fails only when ctx ends.
func (r *Relay) acquireLock(ctx context.Context) (*advisoryLock, error) {
	var conn *pgx.Conn
	waiting := false
	for {
		if conn == nil {
			pc, err := r.pool.Acquire(ctx)
			if err == nil {
				conn = pc.Hijack() // the lock lives as long as this session, outside the pool
			} else if ctx.Err() == nil {
				r.log.Warn("connect for the relay lock", "err", err)
			}
		}
		if conn != nil {
			var ok bool
			err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", r.cfg.LockID).Scan(&ok)
			switch {
			case err == nil && ok:
				return &advisoryLock{conn: conn, watchDone: make(chan struct{})}, nil
			case err != nil:
				if ctx.Err() == nil {
					r.log.Warn("take the relay lock", "err", err)
				}
				closeConn(ctx, conn)
				conn = nil
			case !waiting:
				r.log.Info("another process holds the relay lock; standing by", "lock_id", r.cfg.LockID)
				waiting = true
			}
		}
		timer := time.NewTimer(r.cfg.LockRetry)
		select {
		case <-ctx.Done():
			timer.Stop()
			if conn != nil {
				closeConn(ctx, conn)
			}
			return nil, fmt.Errorf("relay: wait for lock: %w", ctx.Err())
		case <-timer.C:
		}
	}
}

// watch pings the lock's connection every interval until work ends; a failed ping ends work
// with errLockLost, since the session and with it the lock may be gone.
func (l *advisoryLock) watch(work context.Context, cancel context.CancelCauseFunc, every time.Duration) {
	defer close(l.watchDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-work.Done():
			return
		case <-t.C:
		}
		pctx, pcancel := context.WithTimeout(work, max(every, 5*time.Second))
		err := l.conn.Ping(pctx)
		pcancel()
		if err != nil && work.Err() == nil {
			cancel(errors.Join(errLockLost, err))
			return
		}
	}
}

// release ends the lock's session, which releases the lock. The caller must have ended the
// work context given to watch.
func (l *advisoryLock) release(ctx context.Context) {
	<-l.watchDone
	closeConn(ctx, l.conn)
}

func closeConn(ctx context.Context, conn *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = conn.Close(cctx)
}
