package schemaapi

import (
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/schemas"
	"github.com/imledger/imledger/internal/kafka"
)

// EventType is one entry of the index.
type EventType struct {
	EventType    string `json:"event_type"`
	Version      int    `json:"version"`
	Category     string `json:"category"`
	BizType      string `json:"biz_type"`
	Topic        string `json:"topic,omitempty"`
	Current      bool   `json:"current"`
	SupersededBy string `json:"superseded_by,omitempty"`
	Upcast       string `json:"upcast,omitempty"`
	Schema       string `json:"schema"`
}

// Index is the answer of GET /v1/schemas/.
type Index struct {
	Envelope   string      `json:"envelope"`
	EventTypes []EventType `json:"event_types"`
}

// NewIndex lists the embedded schemas with where each event type travels under topics (the
// configured prefix applies), linking each schema under base (e.g. "/v1/schemas/").
func NewIndex(topics kafka.Config, base string) Index {
	ups := map[domain.EventType]domain.Upcaster{}
	for _, u := range domain.Upcasters() {
		ups[u.From] = u
	}
	idx := Index{Envelope: base + schemas.Envelope + ".json"}
	for _, info := range domain.EventTypes() {
		e := EventType{EventType: string(info.Type), Version: info.SchemaVersion, Category: string(info.Category),
			BizType: info.BizType, Current: !domain.IsSuperseded(info.Type), Schema: base + string(info.Type) + ".json"}
		if t, ok := topics.CategoryTopic(string(info.Category)); ok {
			e.Topic = t
		}
		if u, ok := ups[info.Type]; ok {
			e.SupersededBy, e.Upcast = string(u.To), u.Note
		}
		idx.EventTypes = append(idx.EventTypes, e)
	}
	return idx
}
