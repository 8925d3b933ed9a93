package account

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
)

// ProjectionAPIKeys is the replay name of tenant_api_keys, the read model of the API key events.
const ProjectionAPIKeys = "tenant-api-keys"

// apiKeysLock is the transaction-scoped advisory lock of one tenant's rows of tenant_api_keys:
// every append of an API key event takes it before it writes the rows, and a rebuild or a
// verification holds it while it reads the log, so none sees the other half done.
const apiKeysLock = "SELECT pg_advisory_xact_lock(hashtextextended('imledger-api-keys:' || $1, 0))"

// errBadAPIKeyEvent marks an API key event that does not decode or does not match its stream:
// no retry can apply it.
var errBadAPIKeyEvent = errors.New("bad API key event")

// logErr wraps an error of a rebuild or verification for op: a bad event as it is, a database
// failure as dbErr does.
func logErr(op string, err error) error {
	if errors.Is(err, errBadAPIKeyEvent) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return dbErr(op, err)
}

// applyAPIKeys is the hook of every append of API key events: it writes their rows of
// tenant_api_keys in the append's transaction (eventstore.TxHook).
func applyAPIKeys(ctx context.Context, tx pgx.Tx, stored []domain.Envelope) error {
	if len(stored) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, apiKeysLock, stored[0].TenantID.String()); err != nil {
		return err
	}
	return foldAPIKeys(ctx, tx, stored)
}

// apiKeyRow is what tenant_api_keys holds of a key.
type apiKeyRow struct {
	hash    string // hex
	created time.Time
	revoked time.Time // zero: valid
}

// decodeAPIKeyEvent returns the hash of the key an API key event is about and the time it says,
// after checking it against its stream. ok is false for another event type.
func decodeAPIKeyEvent(e domain.Envelope) (hash string, at time.Time, ok bool, err error) {
	switch e.EventType {
	case domain.EventTenantAPIKeyCreated:
		var p domain.TenantAPIKeyCreated
		if err := e.Decode(&p); err != nil {
			return "", time.Time{}, false, err
		}
		return p.KeySHA256, p.CreatedAt, true, domain.CheckAPIKeyEvent(e.StreamID, p.KeyID, p.KeySHA256)
	case domain.EventTenantAPIKeyRevoked:
		var p domain.TenantAPIKeyRevoked
		if err := e.Decode(&p); err != nil {
			return "", time.Time{}, false, err
		}
		return p.KeySHA256, p.RevokedAt, true, domain.CheckAPIKeyEvent(e.StreamID, p.KeyID, p.KeySHA256)
	}
	return "", time.Time{}, false, nil
}

// foldAPIKeys writes the rows of events: a creation inserts the key's row (a row there already
// stays), a revocation sets its revoked_at unless it is set. Applying an event twice changes
// nothing the second time.
func foldAPIKeys(ctx context.Context, tx pgx.Tx, events []domain.Envelope) error {
	for _, e := range events {
		h, at, ok, err := decodeAPIKeyEvent(e)
		if err != nil {
			return fmt.Errorf("%w %s: %w", errBadAPIKeyEvent, e.EventID, err)
		}
		if !ok {
			continue
		}
		sum, _ := hex.DecodeString(h)
		if e.EventType == domain.EventTenantAPIKeyCreated {
			_, err = tx.Exec(ctx, `INSERT INTO tenant_api_keys (key_hash, tenant_id, created_at) VALUES ($1, $2, $3)
				ON CONFLICT (key_hash) DO NOTHING`, sum, e.TenantID.String(), at)
		} else {
			_, err = tx.Exec(ctx, `UPDATE tenant_api_keys SET revoked_at = $3 WHERE key_hash = $1 AND tenant_id = $2 AND revoked_at IS NULL`,
				sum, e.TenantID.String(), at)
		}
		if err != nil {
			return fmt.Errorf("write API key row: %w", err)
		}
	}
	return nil
}

// EventLog is what an APIKeyRebuilder reads of the event store (*eventstore.Store).
type EventLog interface {
	ReadAll(ctx context.Context, f domain.EventFilter, afterPosition int64, limit int) ([]domain.Envelope, error)
}

// APIKeyRebuilder rebuilds and verifies one tenant's rows of tenant_api_keys from its API key
// events. It is safe for concurrent use.
type APIKeyRebuilder struct {
	pool *pgxpool.Pool
	log  EventLog
	logr *slog.Logger
}

// NewAPIKeyRebuilder checks its arguments; logger nil discards.
func NewAPIKeyRebuilder(pool *pgxpool.Pool, log EventLog, logger *slog.Logger) (*APIKeyRebuilder, error) {
	if pool == nil || log == nil {
		return nil, errors.New("account: API key rebuild: a pool and an event log are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &APIKeyRebuilder{pool: pool, log: log, logr: logger}, nil
}

// apiKeyFilter selects tenant's API key events.
func apiKeyFilter(tenant domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: tenant, EventTypes: []domain.EventType{domain.EventTenantAPIKeyCreated, domain.EventTenantAPIKeyRevoked}}
}

// readAPIKeyEvents hands every API key event of tenant to fn, a page at a time, and returns how
// many there were.
func (r *APIKeyRebuilder) readAPIKeyEvents(ctx context.Context, tenant domain.TenantID, fn func([]domain.Envelope) error) (int64, error) {
	var n, after int64
	for {
		page, err := r.log.ReadAll(ctx, apiKeyFilter(tenant), after, 1000)
		if err != nil {
			return n, fmt.Errorf("read API key events: %w", err)
		}
		if len(page) == 0 {
			return n, nil
		}
		if err := fn(page); err != nil {
			return n, err
		}
		n += int64(len(page))
		after = page[len(page)-1].Position
	}
}

// Rebuild replaces tenant's rows of tenant_api_keys with the fold of its API key events, in one
// transaction that holds the tenant's API key lock, so a key created or revoked meanwhile waits
// and then writes its row; readers see the old rows or the new ones. It returns the events read.
// Errors: domain.ErrRetryable when PostgreSQL failed; one wrapping the event's error for an event
// that does not decode or does not match its stream (nothing is replaced then).
func (r *APIKeyRebuilder) Rebuild(ctx context.Context, tenant domain.TenantID) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, apiKeysLock, tenant.String()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tenant_api_keys WHERE tenant_id = $1`, tenant.String()); err != nil {
			return err
		}
		var err error
		n, err = r.readAPIKeyEvents(ctx, tenant, func(page []domain.Envelope) error { return foldAPIKeys(ctx, tx, page) })
		return err
	})
	if err != nil {
		return n, logErr("rebuild "+ProjectionAPIKeys+" of tenant "+tenant.String(), err)
	}
	r.logr.InfoContext(ctx, "tenant rebuilt", "projection", ProjectionAPIKeys, "tenant_id", tenant.String(), "events", n)
	return n, nil
}

// APIKeyDiff is a key whose row differs from what the log says (a zero side: no row, or no
// event). It names the key by its id, never more.
type APIKeyDiff struct {
	KeyID     string
	Live, Log string // "valid since <t>", "created <t>, revoked <t>", or "missing"
}

func (d APIKeyDiff) String() string {
	return fmt.Sprintf("key %s: table %s; log %s", d.KeyID, d.Live, d.Log)
}

// APIKeyVerifyResult is the outcome of APIKeyRebuilder.Verify.
type APIKeyVerifyResult struct {
	Tenant   domain.TenantID
	Events   int64  // API key events read
	Keys     int    // keys compared
	Checksum uint64 // XOR of a hash of every row the log gives; order-independent
	Diffs    []APIKeyDiff
}

// OK reports whether the rows matched the log.
func (v APIKeyVerifyResult) OK() bool { return len(v.Diffs) == 0 }

// Report writes the outcome to out as `imledger replay --verify` prints it.
func (v APIKeyVerifyResult) Report(out io.Writer) {
	if v.OK() {
		fmt.Fprintf(out, "tenant %s: %s matches a rebuild from %d events (%d keys, checksum=%016x)\n", v.Tenant, ProjectionAPIKeys,
			v.Events, v.Keys, v.Checksum)
		return
	}
	fmt.Fprintf(out, "tenant %s: %d of %d %s keys differ from a rebuild from %d events\n", v.Tenant, len(v.Diffs), v.Keys,
		ProjectionAPIKeys, v.Events)
	for _, d := range v.Diffs {
		fmt.Fprintf(out, "  %s\n", d)
	}
}

// Verify compares tenant's rows of tenant_api_keys with the fold of its API key events, key by
// key (creation and revocation times), holding the tenant's API key lock so that no change is
// half seen, and changes nothing. Errors: domain.ErrRetryable when PostgreSQL failed.
func (r *APIKeyRebuilder) Verify(ctx context.Context, tenant domain.TenantID) (APIKeyVerifyResult, error) {
	res := APIKeyVerifyResult{Tenant: tenant}
	op := "verify " + ProjectionAPIKeys + " of tenant " + tenant.String()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return res, dbErr(op, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // it only held the lock
	if _, err := tx.Exec(ctx, apiKeysLock, tenant.String()); err != nil {
		return res, dbErr(op, err)
	}
	live, err := liveAPIKeys(ctx, tx, tenant)
	if err != nil {
		return res, dbErr(op, err)
	}
	want := map[string]apiKeyRow{}
	res.Events, err = r.readAPIKeyEvents(ctx, tenant, func(page []domain.Envelope) error { return foldInMemory(want, page) })
	if err != nil {
		return res, logErr(op, err)
	}
	res.Keys, res.Checksum, res.Diffs = compareAPIKeys(live, want)
	return res, nil
}

// liveAPIKeys reads tenant's rows.
func liveAPIKeys(ctx context.Context, tx pgx.Tx, tenant domain.TenantID) (map[string]apiKeyRow, error) {
	rows, err := tx.Query(ctx, `SELECT encode(key_hash, 'hex'), created_at, revoked_at FROM tenant_api_keys WHERE tenant_id = $1`, tenant.String())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]apiKeyRow{}
	for rows.Next() {
		var k apiKeyRow
		var revoked *time.Time
		if err := rows.Scan(&k.hash, &k.created, &revoked); err != nil {
			return nil, err
		}
		if revoked != nil {
			k.revoked = revoked.UTC()
		}
		k.created = k.created.UTC()
		out[k.hash] = k
	}
	return out, rows.Err()
}

// foldInMemory folds API key events into rows as foldAPIKeys writes them.
func foldInMemory(rows map[string]apiKeyRow, events []domain.Envelope) error {
	for _, e := range events {
		h, at, ok, err := decodeAPIKeyEvent(e)
		if err != nil {
			return fmt.Errorf("%w %s: %w", errBadAPIKeyEvent, e.EventID, err)
		}
		if !ok {
			continue
		}
		k, found := rows[h]
		switch {
		case e.EventType == domain.EventTenantAPIKeyCreated && !found:
			rows[h] = apiKeyRow{hash: h, created: at.UTC()}
		case e.EventType == domain.EventTenantAPIKeyRevoked && found && k.revoked.IsZero():
			k.revoked = at.UTC()
			rows[h] = k
		}
	}
	return nil
}

// compareAPIKeys compares the rows the table holds with those the log gives, key by key.
func compareAPIKeys(live, want map[string]apiKeyRow) (keys int, checksum uint64, diffs []APIKeyDiff) {
	hashes := map[string]bool{}
	for h := range live {
		hashes[h] = true
	}
	for h := range want {
		hashes[h] = true
		checksum ^= want[h].hash64()
	}
	sorted := make([]string, 0, len(hashes))
	for h := range hashes {
		sorted = append(sorted, h)
	}
	sort.Strings(sorted)
	for _, h := range sorted {
		l, lok := live[h]
		w, wok := want[h]
		if lok == wok && l.created.Equal(w.created) && l.revoked.Equal(w.revoked) {
			continue
		}
		diffs = append(diffs, APIKeyDiff{KeyID: h[:domain.APIKeyIDLen], Live: l.describe(lok), Log: w.describe(wok)})
	}
	return len(hashes), checksum, diffs
}

func (k apiKeyRow) describe(present bool) string {
	switch {
	case !present:
		return "missing"
	case k.revoked.IsZero():
		return "valid since " + k.created.Format(time.RFC3339Nano)
	}
	return "created " + k.created.Format(time.RFC3339Nano) + ", revoked " + k.revoked.Format(time.RFC3339Nano)
}

// hash64 is a 64-bit hash of the row's columns.
func (k apiKeyRow) hash64() uint64 {
	sum := sha256.Sum256([]byte(k.hash + "|" + k.created.Format(time.RFC3339Nano) + "|" + k.revoked.Format(time.RFC3339Nano)))
	return binary.BigEndian.Uint64(sum[:8])
}
