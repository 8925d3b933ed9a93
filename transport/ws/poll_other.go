//go:build !linux

package ws

import (
	"errors"
	"net"
)

// poller is epoll's readiness notification, which this system lacks: newPoller fails and every
// session reads on a goroutine of its own.
type poller struct{}

func newPoller() (*poller, error) { return nil, errors.New("ws: readiness notification needs Linux") }

func (p *poller) add(*session, net.Conn) error { return errors.New("ws: no poller") }
func (p *poller) arm(*session) error           { return errors.New("ws: no poller") }
func (p *poller) remove(*session)              {}
func (p *poller) close()                       {}
