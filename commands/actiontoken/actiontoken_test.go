package actiontoken_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/actiontoken"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/readmodels/tokendb"
)

var tenant = domain.MustTenantID("acme")

func newService(t *testing.T, rdb redis.UniversalClient, prefix string) (*actiontoken.Service, *tenantdb.Router) {
	t.Helper()
	svc, router, _ := newServiceWithStore(t, rdb, prefix)
	return svc, router
}

// newServiceWithStore is newService that also returns the event store the tokens' streams are in.
func newServiceWithStore(t *testing.T, rdb redis.UniversalClient, prefix string) (*actiontoken.Service, *tenantdb.Router, *eventstore.Store) {
	t.Helper()
	ctx := testenv.Context(t)
	_, store := storetest.EventStore(t, 32)
	testenv.MySQLServer(t)
	dbPrefix := testenv.UniqueName("imt_at")
	testenv.DropMySQLDatabasesAtCleanup(t, dbPrefix+"_")
	router, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN, DatabaseTemplate: dbPrefix + "_" + tenantdb.TenantPlaceholder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = router.Close() })
	if err := router.Provision(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	svc, err := actiontoken.New(actiontoken.Config{KeyPrefix: prefix}, actiontoken.Deps{Redis: rdb, Events: store, Rows: tokendb.New(router)})
	if err != nil {
		t.Fatal(err)
	}
	return svc, router, store
}

func denied(err error, reason string) bool {
	var d *domain.DeniedError
	return errors.As(err, &d) && d.Reason == reason
}

func TestTwentyConcurrentConsumersExactlyOneSucceeds(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	svc, router := newService(t, rdb, prefix)
	iss, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionJoinGroup, Subject: "grp42", By: 7})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  []domain.UserID
		other []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			by := domain.UserID(100 + i)
			c, err := svc.Consume(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, by)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if c.Subject != "grp42" || c.TokenID != iss.TokenID {
					other = append(other, errors.New("wrong token consumed"))
				}
				wins = append(wins, by)
			case denied(err, actiontoken.ReasonTokenUsed), denied(err, actiontoken.ReasonTokenInvalid):
			default:
				other = append(other, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("unexpected outcomes: %v", other)
	}
	if len(wins) != 1 {
		t.Fatalf("%d of %d concurrent consumers succeeded, want exactly 1", len(wins), n)
	}
	db, err := router.DB(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	var state string
	var by int64
	if err := db.QueryRow(`SELECT state, consumed_by FROM im_action_tokens WHERE token_id = ?`, iss.TokenID).Scan(&state, &by); err != nil {
		t.Fatal(err)
	}
	if state != actiontoken.StateConsumed || domain.UserID(by) != wins[0] {
		t.Fatalf("MySQL says %s by %d, want consumed by %d", state, by, wins[0])
	}
	if _, err := svc.Consume(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, 1); !denied(err, actiontoken.ReasonTokenUsed) {
		t.Fatalf("consume after the winner: %v, want action_token_used", err)
	}
}

func TestTokenStateMachine(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	svc, _ := newService(t, rdb, prefix)

	// A token Redis lost (restart, eviction) is still served from MySQL, once.
	lost, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionResetPassword, Subject: "42"})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := rdb.Keys(ctx, prefix+"*atoken*").Result()
	if len(keys) != 1 {
		t.Fatalf("redis keys %v, want the one token", keys)
	}
	rdb.Del(ctx, keys...)
	if _, err := svc.Consume(ctx, tenant, lost.Token, actiontoken.ActionJoinGroup, 1); !denied(err, actiontoken.ReasonTokenInvalid) {
		t.Fatalf("wrong action: %v, want action_token_invalid", err)
	}
	if c, err := svc.Consume(ctx, tenant, lost.Token, actiontoken.ActionResetPassword, 1); err != nil || c.Subject != "42" {
		t.Fatalf("consume from MySQL: %+v, %v", c, err)
	}

	revoked, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionResetPassword, Subject: "ent-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Revoke(ctx, tenant, revoked.TokenID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Consume(ctx, tenant, revoked.Token, actiontoken.ActionResetPassword, 1); !denied(err, actiontoken.ReasonTokenUsed) {
		t.Fatalf("revoked: %v, want action_token_used", err)
	}
	if err := svc.Revoke(ctx, tenant, revoked.TokenID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("revoke twice: %v", err)
	}

	short, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionJoinGroup, Subject: "grp1", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := svc.Consume(ctx, tenant, short.Token, actiontoken.ActionJoinGroup, 1); !denied(err, actiontoken.ReasonTokenExpired) {
		t.Fatalf("expired: %v, want action_token_expired", err)
	}
	if _, err := svc.Consume(ctx, tenant, "at_nope", actiontoken.ActionJoinGroup, 1); !denied(err, actiontoken.ReasonTokenInvalid) {
		t.Fatalf("unknown: %v", err)
	}
	var ve *domain.ValidationError
	if _, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: "nuke", Subject: "x"}); !errors.As(err, &ve) {
		t.Fatalf("unknown action: %v", err)
	}
}

func TestRedisDownFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	private := testenv.StartPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: private.Addr(), MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	svc, _ := newService(t, rdb, "im:")
	iss, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionJoinGroup, Subject: "grp9"})
	if err != nil {
		t.Fatal(err)
	}
	private.Stop()
	if _, err := svc.Consume(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, 1); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("consume with Redis down: %v, want retryable", err)
	}
	if _, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionJoinGroup, Subject: "grp9"}); !errors.Is(err, domain.ErrRetryable) {
		t.Fatalf("issue with Redis down: %v, want retryable", err)
	}
}

// TestConsumeIfLeavesARefusedTokenActive: a precondition that refuses keeps the token active for
// a later consumer; the precondition sees the issuer, also for an entry cached without it (cached
// before the issuer was kept there), which is read from MySQL instead.
func TestConsumeIfLeavesARefusedTokenActive(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	svc, _ := newService(t, rdb, prefix)
	iss, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionJoinGroup, Subject: "grp42", By: 7})
	if err != nil {
		t.Fatal(err)
	}
	refuse := domain.Deny("banned")
	var seen []actiontoken.Consumed
	check := func(ok bool) func(actiontoken.Consumed) error {
		return func(c actiontoken.Consumed) error {
			seen = append(seen, c)
			if !ok {
				return refuse
			}
			return nil
		}
	}
	if _, err := svc.ConsumeIf(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, 5, check(false)); !errors.Is(err, refuse) {
		t.Fatalf("refused precondition: %v", err)
	}
	// The cached entry as an earlier version wrote it: no issuer.
	keys, _ := rdb.Keys(ctx, prefix+"*atoken*").Result()
	if len(keys) != 1 {
		t.Fatalf("redis keys %v, want the one token", keys)
	}
	old := fmt.Sprintf(`{"id":%q,"action":"join_group","subject":"grp42","exp":%d}`, iss.TokenID, iss.ExpiresAt.UnixMilli())
	if err := rdb.Set(ctx, keys[0], old, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	c, err := svc.ConsumeIf(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, 6, check(true))
	if err != nil || c.Subject != "grp42" || c.IssuedBy != 7 {
		t.Fatalf("consume after a refusal: %+v, %v", c, err)
	}
	if len(seen) != 2 || seen[0].IssuedBy != 7 || seen[1].IssuedBy != 7 || seen[1].TokenID != iss.TokenID {
		t.Fatalf("the precondition saw %+v, want the token issued by 7 twice", seen)
	}
	if _, err := svc.ConsumeIf(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, 8, check(true)); !denied(err, actiontoken.ReasonTokenUsed) {
		t.Fatalf("consume after the success: %v, want action_token_used", err)
	}
	if len(seen) != 2 {
		t.Fatal("the precondition ran for a used token")
	}
}

// TestUnconsumeGivesBackTheConsumersToken: a token given back by its consumer serves the next
// consumer (read from MySQL, Redis no longer holding it); nobody else gives it back, nor a token
// not consumed.
func TestUnconsumeGivesBackTheConsumersToken(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	svc, _ := newService(t, rdb, prefix)
	iss, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionJoinGroup, Subject: "grp42", By: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Unconsume(ctx, tenant, iss.TokenID, 5); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("give back an active token: %v, want not found", err)
	}
	c, err := svc.Consume(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Unconsume(ctx, tenant, c.TokenID, 6); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("give back another user's token: %v, want not found", err)
	}
	if err := svc.Unconsume(ctx, tenant, c.TokenID, 5); err != nil {
		t.Fatal(err)
	}
	if c, err := svc.Consume(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, 6); err != nil || c.IssuedBy != 7 {
		t.Fatalf("consume a token given back: %+v, %v", c, err)
	}
	if _, err := svc.Consume(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, 8); !denied(err, actiontoken.ReasonTokenUsed) {
		t.Fatalf("consume it again: %v, want action_token_used", err)
	}
}

// TestEveryChangeIsAnEvent: issue, consume, give back, consume and revoke are the events of the
// token's stream, which carry the token's SHA-256 and never the token, and the row the read model
// holds says what the stream says.
func TestEveryChangeIsAnEvent(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	svc, router, store := newServiceWithStore(t, rdb, prefix)
	iss, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionJoinGroup, Subject: "grp5", By: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Consume(ctx, tenant, iss.Token, actiontoken.ActionJoinGroup, 4); err != nil {
		t.Fatal(err)
	}
	if err := svc.Unconsume(ctx, tenant, iss.TokenID, 4); err != nil {
		t.Fatal(err)
	}
	other, err := svc.Issue(ctx, actiontoken.Issue{Tenant: tenant, Action: actiontoken.ActionResetPassword, Subject: "9"})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Revoke(ctx, tenant, other.TokenID); err != nil {
		t.Fatal(err)
	}
	events, err := store.ReadStream(ctx, tenant, domain.ActionTokenStreamID(iss.TokenID), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range events {
		types = append(types, string(e.EventType))
		if strings.Contains(string(e.Payload), iss.Token) {
			t.Fatalf("%s holds the token", e.EventType)
		}
	}
	if got := strings.Join(types, " "); got != "action_token.issued.v1 action_token.consumed.v1 action_token.unconsumed.v1" {
		t.Fatalf("the token's stream: %s", got)
	}
	sum := sha256.Sum256([]byte(iss.Token))
	var issued domain.ActionTokenIssued
	if err := events[0].Decode(&issued); err != nil || issued.TokenSHA256 != hex.EncodeToString(sum[:]) || issued.CreatedBy != 3 {
		t.Fatalf("issued %+v (%v)", issued, err)
	}
	db, err := router.DB(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{iss.TokenID: "active 3", other.TokenID: "revoked 2"} {
		var state string
		var version int
		if err := db.QueryRow(`SELECT state, version FROM im_action_tokens WHERE token_id = ?`, id).Scan(&state, &version); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%s %d", state, version); got != want {
			t.Errorf("row of %s: %s, want %s", id, got, want)
		}
	}
}

// TestTokensOlderThanTheLog: a token whose row was written before tokens were events (version 0)
// is recorded in its stream when it is first used, and then decided like any other: an active one
// is consumed once, a consumed one stays used, and one is revoked by its id.
func TestTokensOlderThanTheLog(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	rdb, prefix := testenv.Redis(t)
	svc, router, store := newServiceWithStore(t, rdb, prefix)
	db, err := router.DB(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	hash := func(tok string) string { s := sha256.Sum256([]byte(tok)); return hex.EncodeToString(s[:]) }
	ids := map[string]string{"at_old_active": uuid.NewString(), "at_old_used": uuid.NewString(), "at_old_revoke": uuid.NewString()}
	for tok, state := range map[string]string{"at_old_active": "active", "at_old_used": "consumed", "at_old_revoke": "active"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO im_action_tokens (token_hash, token_id, action, subject, state, created_by, created_at, expires_at)
			VALUES (?, ?, 'join_group', 'grp8', ?, 7, NOW(3), NOW(3) + INTERVAL 1 HOUR)`, hash(tok), ids[tok], state); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := svc.Consume(ctx, tenant, "at_old_active", actiontoken.ActionJoinGroup, 5); err != nil || c.TokenID != ids["at_old_active"] || c.IssuedBy != 7 {
		t.Fatalf("consume an old active token: %+v %v", c, err)
	}
	if _, err := svc.Consume(ctx, tenant, "at_old_active", actiontoken.ActionJoinGroup, 6); !denied(err, actiontoken.ReasonTokenUsed) {
		t.Fatalf("consume it again: %v", err)
	}
	if _, err := svc.Consume(ctx, tenant, "at_old_used", actiontoken.ActionJoinGroup, 5); !denied(err, actiontoken.ReasonTokenUsed) {
		t.Fatalf("consume an old used token: %v", err)
	}
	if err := svc.Revoke(ctx, tenant, ids["at_old_revoke"]); err != nil {
		t.Fatalf("revoke an old token by id: %v", err)
	}
	for tok, want := range map[string]int{"at_old_active": 2, "at_old_used": 2, "at_old_revoke": 2} {
		evs, err := store.ReadStream(ctx, tenant, domain.ActionTokenStreamID(ids[tok]), 0, 0)
		if err != nil || len(evs) != want {
			t.Errorf("stream of %s: %d events (%v), want %d", tok, len(evs), err, want)
		}
	}
}
