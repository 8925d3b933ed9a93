package smallmap_test

import (
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/imledger/imledger/internal/smallmap"
)

// TestMatchesAGoMap applies the same random operations to a Map and a Go map, across the switch
// from the slice to a map, and compares them after each.
func TestMatchesAGoMap(t *testing.T) {
	t.Parallel()
	for _, keys := range []int{3, smallmap.Inline, smallmap.Inline + 1, 40} {
		r := rand.New(rand.NewPCG(uint64(keys), 7))
		var m smallmap.Map[int, string]
		want := map[int]string{}
		for op := range 2000 {
			k := r.IntN(keys)
			switch r.IntN(3) {
			case 0, 1:
				v := string(rune('a' + op%26))
				m.Set(k, v)
				want[k] = v
			case 2:
				_, in := want[k]
				if got := m.Delete(k); got != in {
					t.Fatalf("keys %d op %d: Delete(%d) = %v, want %v", keys, op, k, got, in)
				}
				delete(want, k)
			}
			if m.Len() != len(want) {
				t.Fatalf("keys %d op %d: Len %d, want %d", keys, op, m.Len(), len(want))
			}
			got := maps.Collect(m.All())
			if !maps.Equal(got, want) {
				t.Fatalf("keys %d op %d: All %v, want %v", keys, op, got, want)
			}
			for q := range keys {
				v, ok := m.Get(q)
				wv, wok := want[q]
				if v != wv || ok != wok || m.Has(q) != wok {
					t.Fatalf("keys %d op %d: Get(%d) = %q %v, want %q %v", keys, op, q, v, ok, wv, wok)
				}
			}
		}
	}
}

func TestNilReadsAsEmpty(t *testing.T) {
	t.Parallel()
	var m *smallmap.Map[string, int]
	if m.Len() != 0 || m.Has("a") {
		t.Fatal("a nil Map has entries")
	}
	for k := range m.All() {
		t.Fatalf("a nil Map yielded %q", k)
	}
}

func TestAllStopsWhenAsked(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4, 20} {
		var m smallmap.Map[int, int]
		for i := range n {
			m.Set(i, i)
		}
		seen := 0
		for range m.All() {
			seen++
			if seen == 2 {
				break
			}
		}
		if seen != 2 {
			t.Fatalf("%d entries: ranged over %d, want 2", n, seen)
		}
	}
}

// TestFewEntriesCostTheirSize checks what the package is for: one entry costs one small
// allocation, not a map's group of slots.
func TestFewEntriesCostTheirSize(t *testing.T) {
	type topic struct {
		name  string
		group int64
	}
	var sink *smallmap.Map[string, topic]
	small := testing.AllocsPerRun(100, func() {
		m := &smallmap.Map[string, topic]{}
		m.Set("grp1", topic{name: "grp1", group: 1})
		sink = m
	})
	_ = sink
	if small > 2 {
		t.Fatalf("one entry: %.0f allocations, want at most 2 (the Map and its slice)", small)
	}
	perSmall := bytesPer(func() any {
		m := &smallmap.Map[string, topic]{}
		m.Set("grp1", topic{name: "grp1", group: 1})
		return m
	})
	perGo := bytesPer(func() any {
		m := map[string]topic{}
		m["grp1"] = topic{name: "grp1", group: 1}
		return m
	})
	t.Logf("one entry: %d bytes in a Map, %d in a Go map", perSmall, perGo)
	if perSmall*3 > perGo {
		t.Fatalf("one entry: %d bytes in a Map, %d in a Go map; want a third or less", perSmall, perGo)
	}
}

// bytesPer returns the heap bytes allocated per value build makes, over 1,000 values kept alive.
func bytesPer(build func() any) uint64 {
	const n = 1000
	keep := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = build()
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return (after.TotalAlloc - before.TotalAlloc) / n
}
