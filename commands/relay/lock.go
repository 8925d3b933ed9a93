package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
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
			c, err := r.connectLock(ctx)
			if err == nil {
				conn = c
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

// connectLock opens the connection that takes and holds the lock, outside the pool, with the
// pool's connection settings plus TCP keepalives and TCP_USER_TIMEOUT on the client socket, and
// the same on the server's side of the session: a holder that vanished from the network loses its
// session, and with it the lock, within Config.ServerDetection instead of hours, and a relay
// whose server vanished notices within Config.ClientDetection.
func (r *Relay) connectLock(ctx context.Context) (*pgx.Conn, error) {
	cc := r.pool.Config().ConnConfig.Copy()
	d := &net.Dialer{
		Timeout: r.cfg.LockTimeout + 5*time.Second,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: r.cfg.KeepaliveIdle, Interval: r.cfg.KeepaliveInterval, Count: r.cfg.KeepaliveCount,
		},
		Control: userTimeoutControl(r.cfg.UserTimeout),
	}
	cc.DialFunc = d.DialContext
	cctx, cancel := context.WithTimeout(ctx, r.cfg.LockTimeout+10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cc)
	if err != nil {
		return nil, err
	}
	// Integers are spelled into the statement: SET takes no parameters.
	_, err = conn.Exec(cctx, "SET tcp_keepalives_idle = "+seconds(r.cfg.KeepaliveIdle)+
		"; SET tcp_keepalives_interval = "+seconds(r.cfg.KeepaliveInterval)+
		"; SET tcp_keepalives_count = "+strconv.Itoa(r.cfg.KeepaliveCount)+
		"; SET tcp_user_timeout = "+strconv.FormatInt(r.cfg.UserTimeout.Milliseconds(), 10))
	if err != nil {
		closeConn(ctx, conn)
		return nil, fmt.Errorf("set keepalives on the lock session: %w", err)
	}
	return conn, nil
}

// seconds formats d as whole seconds, at least 1.
func seconds(d time.Duration) string { return strconv.FormatInt(max(int64(d/time.Second), 1), 10) }

// watch pings the lock's connection every Config.LockCheck, each ping bounded by
// Config.LockTimeout, until work ends; a failed ping ends work with errLockLost, since the
// session and with it the lock may be gone.
func (l *advisoryLock) watch(work context.Context, cancel context.CancelCauseFunc, every, timeout time.Duration) {
	defer close(l.watchDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-work.Done():
			return
		case <-t.C:
		}
		pctx, pcancel := context.WithTimeout(work, timeout)
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
