package projections_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/tokendb"
	"github.com/imledger/imledger/replay"
)

// TestActionTokensProjectAndRebuild: the action-tokens projection folds the token events from
// im.audit.event into im_action_tokens; verify matches, names the table after a consumed token is
// made active again by hand, and a rebuild restores it.
func TestActionTokensProjectAndRebuild(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("atokens")
	store := projtest.NewEventStore(t, h.Pool)
	rows := tokendb.New(m.Router)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	token := func(n int) (string, []domain.Envelope) {
		id := uuid.NewString()
		s := domain.ActionTokenStreamID(id)
		return id, []domain.Envelope{
			projtest.MustEnvelope(tn, s, 1, domain.EventActionTokenIssued, domain.ActionTokenIssued{TokenID: id, Action: "join_group",
				Subject: fmt.Sprintf("grp%d", n), CreatedBy: 7, TokenSHA256: fmt.Sprintf("%064x", n), IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)}),
			projtest.MustEnvelope(tn, s, 2, domain.EventActionTokenConsumed, domain.ActionTokenConsumed{TokenID: id, By: 8, ConsumedAt: t0.Add(time.Minute)}),
		}
	}
	consumed, history := token(1)
	issued, more := token(2)
	history = append(history, more[0]) // issued only
	history = projtest.AppendAll(t, store, history)
	p := projections.ActionTokens(rows, "")
	if p.ConsumerGroup != projections.GroupActionTokens || p.Topics[0] != "im.audit.event" || p.Accept(domain.EventFileCreated) {
		t.Fatalf("projection %+v", p)
	}
	h.Run(h.Config(), p)
	h.Publish(history...)
	db, err := m.Router.DB(projtest.Ctx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	state := func(id string) string {
		var s string
		_ = db.QueryRowContext(projtest.Ctx(t), "SELECT state FROM im_action_tokens WHERE token_id = ?", id).Scan(&s)
		return s
	}
	projtest.Eventually(t, 30*time.Second, func() error {
		if s := state(consumed); s != "consumed" {
			return fmt.Errorf("the consumed token's row says %q", s)
		}
		if s := state(issued); s == "" { // its event may come in another partition, later
			return errors.New("the issued token has no row yet")
		}
		return nil
	})
	rb, err := replay.NewActionTokenRebuilder(rows, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() || res.Live["im_action_tokens"].Rows != 2 {
		t.Fatalf("verify of the projected tokens: %+v %v", res, err)
	}
	if _, err := db.ExecContext(projtest.Ctx(t), "UPDATE im_action_tokens SET state = 'active', consumed_by = NULL WHERE token_id = ?", consumed); err != nil {
		t.Fatal(err)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || len(res.Diffs) != 1 || res.Diffs[0].Part != "im_action_tokens" {
		t.Fatalf("verify after a token was made active by hand: %+v %v", res, err)
	}
	if _, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	if s := state(consumed); s != "consumed" {
		t.Fatalf("after the rebuild the token's row says %q", s)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() {
		t.Fatalf("verify after the rebuild: %+v %v", res, err)
	}
}
