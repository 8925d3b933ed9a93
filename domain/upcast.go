package domain

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Upcasting (DESIGN §3): a published event type is never renamed and a stored event is never
// rewritten. When a payload must change, the type gets a new version ("….v2"), writers emit the
// new version from then on, and an upcaster turns an event of the old version into the new one
// when it is read. Every place that decodes stored or consumed events calls Upcast first (the
// event store's reads, the projectors' decoding of Kafka records, the read models' batch
// decoding, the aggregates' folds and the export), so the rest of the code only ever sees current
// versions. The relay publishes events as stored: an old version stays old on Kafka, and
// consumers upcast, with this registry or with the rule documented in the stream contract.

// UpcastFunc turns the payload of an event of the upcaster's From type into the payload of its To
// type. It must be pure: the result depends on the envelope alone, so upcasting an event gives
// exactly what a writer of the new version would have stored for it. An error means the old
// payload cannot be read; the event is then as broken as one that does not decode.
type UpcastFunc func(env Envelope) (json.RawMessage, error)

// Upcaster is a step from one version of an event type to the next, listed in upcasterTable
// (registry.go).
type Upcaster struct {
	From EventType
	To   EventType
	Fn   UpcastFunc
	// Note says in a sentence what the step adds, for the stream contract.
	Note string
}

// upcasters is upcasterTable by From, built once when the package is initialised.
var upcasters = indexUpcasters(upcasterTable)

// indexUpcasters returns steps by From. It panics when either type of a step is unregistered, the
// types differ in category (an event's versions must travel on the same Kafka topic, or a
// conversation's order would break), To's schema version is not above From's, a step has no
// function, two steps start from the same type, or the steps close a loop.
func indexUpcasters(steps []Upcaster) map[EventType]Upcaster {
	m := make(map[EventType]Upcaster, len(steps))
	for _, u := range steps {
		checkUpcaster(u)
		if _, dup := m[u.From]; dup {
			panic("domain: two upcasters from " + string(u.From))
		}
		for t, ok := u.To, true; ok; t = m[t].To {
			if t == u.From {
				panic("domain: upcaster loop through " + string(u.From))
			}
			_, ok = m[t]
		}
		m[u.From] = u
	}
	return m
}

// checkUpcaster panics when u alone is not a valid step (see indexUpcasters).
func checkUpcaster(u Upcaster) {
	from, ok := LookupEventType(u.From)
	if !ok {
		panic("domain: upcaster from unregistered event type " + string(u.From))
	}
	to, ok := LookupEventType(u.To)
	if !ok {
		panic("domain: upcaster to unregistered event type " + string(u.To))
	}
	switch {
	case u.Fn == nil:
		panic("domain: upcaster " + string(u.From) + " without a function")
	case from.Category != to.Category:
		panic(fmt.Sprintf("domain: upcaster %s → %s changes the category from %s to %s", u.From, u.To, from.Category, to.Category))
	case to.SchemaVersion <= from.SchemaVersion:
		panic(fmt.Sprintf("domain: upcaster %s → %s does not raise the schema version", u.From, u.To))
	}
}

// Upcasters lists the steps of upcasterTable, sorted by From.
func Upcasters() []Upcaster {
	out := make([]Upcaster, 0, len(upcasters))
	for _, u := range upcasters {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}

// CurrentType returns the version of t that writers emit today: t itself, or the end of its chain
// of upcasters.
func CurrentType(t EventType) EventType {
	for {
		u, ok := upcasters[t]
		if !ok {
			return t
		}
		t = u.To
	}
}

// IsSuperseded reports whether t is an old version that Upcast turns into a newer one.
func IsSuperseded(t EventType) bool {
	_, ok := upcasters[t]
	return ok
}

// Upcast returns env as the current version of its event type: each registered step replaces the
// payload and sets event_type and version to the step's target; every other field, event_id
// included, is kept. An event of a current (or unknown) type comes back unchanged, so Upcast is
// safe to call on any event and more than once. An old payload a step cannot read fails with a
// *ValidationError (reason bad_event): no retry can make it readable.
func Upcast(env Envelope) (Envelope, error) {
	u, ok := upcasters[env.EventType]
	for ok {
		payload, err := u.Fn(env)
		if err != nil {
			return env, fmt.Errorf("upcast event %s of type %s: %w", env.EventID, env.EventType,
				&ValidationError{Field: "payload", Reason: "bad_event", Detail: err.Error()})
		}
		info, _ := LookupEventType(u.To)
		env.EventType, env.Version, env.Payload = u.To, info.SchemaVersion, payload
		u, ok = upcasters[env.EventType]
	}
	return env, nil
}

// Versions returns every registered version of t's event type that upcasts to the same current
// type, t's own included, sorted: what a reader that selects stored events by type must ask for
// to see the old versions too.
func Versions(t EventType) []EventType {
	cur := CurrentType(t)
	out := []EventType{}
	for _, info := range EventTypes() {
		if CurrentType(info.Type) == cur {
			out = append(out, info.Type)
		}
	}
	if len(out) == 0 {
		out = append(out, t)
	}
	return out
}
