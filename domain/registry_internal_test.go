package domain

import (
	"reflect"
	"testing"
)

// knownCategories are the categories the relay maps to Kafka topics.
var knownCategories = map[Category]bool{
	CategoryGroupMessage:  true,
	CategoryDirectMessage: true,
	CategoryBusiness:      true,
	CategorySession:       true,
	CategoryAudit:         true,
	CategoryConfig:        true,
}

// Every row of the event table names a new type, builds a pointer payload and travels in a known
// category.
func TestEventTableRows(t *testing.T) {
	t.Parallel()
	seen := map[EventType]bool{}
	for _, info := range eventTable {
		if seen[info.Type] {
			t.Errorf("%s is listed twice", info.Type)
		}
		seen[info.Type] = true
		if !knownCategories[info.Category] {
			t.Errorf("%s: unknown category %q", info.Type, info.Category)
		}
		if info.BizType == "" {
			t.Errorf("%s: no biz type", info.Type)
		}
		if info.Payload == nil {
			t.Errorf("%s: no payload constructor", info.Type)
			continue
		}
		p := info.Payload()
		if v := reflect.ValueOf(p); v.Kind() != reflect.Pointer || v.IsNil() {
			t.Errorf("%s: payload constructor returns %T, not a pointer", info.Type, p)
		}
	}
	if len(registry) != len(eventTable) {
		t.Errorf("registry holds %d types, the table %d", len(registry), len(eventTable))
	}
}

// Every message action has its group and direct type in the table, each on its conversation's
// category, as MessageEventType names them.
func TestEventTableCoversMessageActions(t *testing.T) {
	t.Parallel()
	actions := []MessageAction{ActionSent, ActionRecalled, ActionEdited, ActionDeleted, ActionReadMarked, ActionSeqSkipped}
	kinds := map[TopicKind]Category{TopicGroup: CategoryGroupMessage, TopicDirect: CategoryDirectMessage}
	for kind, cat := range kinds {
		for _, a := range actions {
			typ := MessageEventType(kind, a)
			info, ok := registry[typ]
			if !ok {
				t.Errorf("%s is not in the table", typ)
				continue
			}
			if info.Category != cat || info.BizType != string(cat) {
				t.Errorf("%s: category %s, biz type %s, want %s", typ, info.Category, info.BizType, cat)
			}
		}
	}
}

// Every upcaster of the table is indexed, and the table's steps pass the checks.
func TestUpcasterTable(t *testing.T) {
	t.Parallel()
	if got := indexUpcasters(upcasterTable); len(got) != len(upcasterTable) || len(upcasters) != len(upcasterTable) {
		t.Errorf("%d upcasters indexed from a table of %d", len(got), len(upcasterTable))
	}
}
