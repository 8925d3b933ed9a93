package admin

import (
	"context"
	"encoding/json"
	"time"

	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
)

// TenantData is the result data of the tenant commands.
type TenantData struct {
	TenantID  string                `json:"tenant_id"`
	Status    string                `json:"status"`
	Settings  domain.TenantSettings `json:"settings"`
	Version   int64                 `json:"version,string"`
	Unchanged bool                  `json:"unchanged"`
}

func tenantData(res tenant.Result) TenantData {
	return TenantData{TenantID: res.Info.Tenant.String(), Status: string(res.Info.Status), Settings: res.Info.Settings,
		Version: res.Info.Version, Unchanged: res.Unchanged}
}

func (r run) tenantMeta() tenant.Meta {
	return tenant.Meta{Actor: r.actor(), TraceID: r.TraceID, CausationID: r.causation()}
}

func (d *dispatcher) tenantProvision(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.TenantProvisionPayload)
	res, err := d.h.Tenants.Provision(ctx, r.tenant, p.Settings, r.tenantMeta())
	if err != nil {
		return nil, err
	}
	return tenantData(res), nil
}

func (d *dispatcher) tenantSuspend(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.TenantSuspendPayload)
	res, err := d.h.Tenants.Suspend(ctx, r.tenant, p.Reason, r.tenantMeta())
	if err != nil {
		return nil, err
	}
	return tenantData(res), nil
}

func (d *dispatcher) tenantResume(ctx context.Context, r run) (any, error) {
	res, err := d.h.Tenants.Resume(ctx, r.tenant, r.tenantMeta())
	if err != nil {
		return nil, err
	}
	return tenantData(res), nil
}

func (d *dispatcher) tenantConfigSet(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.TenantConfigSetPayload)
	res, err := d.h.Tenants.SetConfig(ctx, r.tenant, p.Settings, r.tenantMeta())
	if err != nil {
		return nil, err
	}
	return tenantData(res), nil
}

// BroadcastData is the result data of message.broadcast to a whole tenant.
type BroadcastData struct {
	Scope  string `json:"scope"`
	SentAt string `json:"sent_at"`
}

// broadcastTenant records tenant.broadcast_sent.v1 and delivers the message to the tenant's
// online sessions on every node. A redelivered command that already recorded it is answered from
// the ledger or, after a crash, found by its causation id, so it is not recorded twice.
func (d *dispatcher) broadcastTenant(ctx context.Context, r run, content domain.Content) (any, error) {
	now := time.Now().UTC()
	payload := domain.TenantBroadcastSent{Content: content.Raw(), SentAt: now}
	for attempt := 1; ; attempt++ {
		v, err := d.h.Events.LastVersion(ctx, r.tenant, domain.TenantBroadcastStreamID)
		if err != nil {
			return nil, err
		}
		env, err := domain.NewEnvelope(r.tenant, domain.TenantBroadcastStreamID, v+1, domain.EventTenantBroadcastSent, r.actor(), payload)
		if err != nil {
			return nil, err
		}
		env.TraceID, env.CausationID, env.BizID = r.TraceID, r.causation(), r.tenant.String()
		_, err = d.h.Events.Append(ctx, r.tenant, domain.TenantBroadcastStreamID, v, []domain.Envelope{env})
		if err == nil {
			break
		}
		if !isConcurrency(err) || attempt >= 5 {
			return nil, err
		}
	}
	if err := d.h.Broadcaster.BroadcastTenant(context.WithoutCancel(ctx), r.tenant, json.RawMessage(content.Raw()), now); err != nil {
		// Recorded; the realtime delivery is best effort, as for every message.
		d.log.WarnContext(ctx, "tenant broadcast recorded but not delivered to other nodes", "tenant_id", r.tenant.String(),
			"event_id", r.EventID.String(), "err", err)
	}
	return BroadcastData{Scope: "tenant", SentAt: now.Format(time.RFC3339Nano)}, nil
}
