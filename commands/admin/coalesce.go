package admin

import (
	"bytes"
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/imledger/imledger/internal/coalesce"
)

// ledgerCall is one batch's claim or finish on its way through a coalesce.Group: every
// partition of im.admin.command is its own batch (of one command, mostly: with commands spread
// over many partitions, few arrive on one while its batch runs), so without coalescing each
// command was claimed and finished with a transaction of its own, two of its three PostgreSQL
// commits. The claims (finishes) of the partitions that arrive while one statement runs go
// together in the next.
type ledgerCall struct {
	items []*item
	ids   map[uuid.UUID]bool // the answer: the ids of items the statement reported
	err   error
}

// newLedgerGroup coalesces the calls of run, a statement over items that reports ids.
func newLedgerGroup(run func(ctx context.Context, items []*item) (map[uuid.UUID]bool, error)) *coalesce.Group[*ledgerCall] {
	return &coalesce.Group[*ledgerCall]{
		Run: func(ctx context.Context, round []*ledgerCall) {
			var all []*item
			for _, c := range round {
				all = append(all, c.items...)
			}
			// Rows in the order of their keys: two consumers that claim or finish some of the
			// same commands (a rebalance) never wait for each other's rows in opposite orders.
			slices.SortFunc(all, func(a, b *item) int { return bytes.Compare(a.cmd.EventID[:], b.cmd.EventID[:]) })
			ids, err := run(ctx, all)
			for _, c := range round {
				c.err = err
				if err != nil {
					continue
				}
				c.ids = make(map[uuid.UUID]bool, len(c.items))
				for _, it := range c.items {
					if ids[it.cmd.EventID] {
						c.ids[it.cmd.EventID] = true
					}
				}
			}
		},
		// No command twice in a statement: each is claimed or finished by one row and reported
		// to the call that holds it; a call that holds a command of the round waits for the next.
		Admit: func() func(*ledgerCall) bool {
			seen := map[uuid.UUID]bool{}
			return func(c *ledgerCall) bool {
				for _, it := range c.items {
					if seen[it.cmd.EventID] {
						return false
					}
				}
				for _, it := range c.items {
					seen[it.cmd.EventID] = true
				}
				return true
			}
		},
	}
}

// doLedger runs items through g and returns the statement's answer for them.
func doLedger(ctx context.Context, g *coalesce.Group[*ledgerCall], items []*item) (map[uuid.UUID]bool, error) {
	c := &ledgerCall{items: items}
	if err := g.Do(ctx, c); err != nil {
		return nil, err
	}
	return c.ids, c.err
}
