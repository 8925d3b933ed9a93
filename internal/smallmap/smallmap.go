// Package smallmap is a map for the few entries one connection holds (its topics, a user's
// sessions on a node): a Go map takes a group of eight slots from its first entry, a few hundred
// bytes each time, which 10,000 idle connections pay several times over.
package smallmap

import "iter"

// Inline is how many entries a Map keeps in a slice before it moves them to a Go map.
const Inline = 8

// Map maps K to V. Up to Inline entries live in a slice sized to them and are found by a linear
// search; with more it becomes a Go map and stays one. The zero Map is empty and ready to use,
// and a nil *Map reads as empty (Len, Get, Has, All). A Map is not safe for concurrent use, and
// must not be changed while All is being ranged over.
type Map[K comparable, V any] struct {
	few  []entry[K, V]
	many map[K]V
}

type entry[K comparable, V any] struct {
	k K
	v V
}

// Len returns the number of entries.
func (m *Map[K, V]) Len() int {
	if m == nil {
		return 0
	}
	if m.many != nil {
		return len(m.many)
	}
	return len(m.few)
}

// Get returns k's value and whether k is in the map.
func (m *Map[K, V]) Get(k K) (V, bool) {
	var zero V
	if m == nil {
		return zero, false
	}
	if m.many != nil {
		v, ok := m.many[k]
		return v, ok
	}
	for i := range m.few {
		if m.few[i].k == k {
			return m.few[i].v, true
		}
	}
	return zero, false
}

// Has reports whether k is in the map.
func (m *Map[K, V]) Has(k K) bool {
	_, ok := m.Get(k)
	return ok
}

// Set sets k's value, adding k when it is not in the map.
func (m *Map[K, V]) Set(k K, v V) {
	if m.many != nil {
		m.many[k] = v
		return
	}
	for i := range m.few {
		if m.few[i].k == k {
			m.few[i].v = v
			return
		}
	}
	if len(m.few) < Inline {
		m.few = append(m.few, entry[K, V]{k, v})
		return
	}
	m.many = make(map[K]V, len(m.few)+1)
	for _, e := range m.few {
		m.many[e.k] = e.v
	}
	m.many[k] = v
	m.few = nil
}

// Delete removes k and reports whether it was there.
func (m *Map[K, V]) Delete(k K) bool {
	if m.many != nil {
		_, ok := m.many[k]
		delete(m.many, k)
		return ok
	}
	for i := range m.few {
		if m.few[i].k == k {
			last := len(m.few) - 1
			m.few[i] = m.few[last]
			m.few[last] = entry[K, V]{} // drop what the removed entry pointed to
			m.few = m.few[:last]
			if last == 0 {
				m.few = nil
			}
			return true
		}
	}
	return false
}

// All yields every entry once, in no particular order.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m == nil {
			return
		}
		if m.many != nil {
			for k, v := range m.many {
				if !yield(k, v) {
					return
				}
			}
			return
		}
		for _, e := range m.few {
			if !yield(e.k, e.v) {
				return
			}
		}
	}
}
