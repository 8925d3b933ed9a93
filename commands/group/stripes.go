package group

import (
	"context"
	"hash/maphash"
)

// stripes serialises commands on the same stream within this process: a fixed set of
// one-slot semaphores picked by key hash. Two keys may share a stripe; that only costs some
// parallelism. Waiting respects the context.
type stripes struct {
	seed  maphash.Seed
	slots []chan struct{}
}

func newStripes(n int) *stripes {
	s := &stripes{seed: maphash.MakeSeed(), slots: make([]chan struct{}, n)}
	for i := range s.slots {
		s.slots[i] = make(chan struct{}, 1)
	}
	return s
}

// lock takes key's stripe and returns its release.
func (s *stripes) lock(ctx context.Context, key string) (func(), error) {
	slot := s.slots[maphash.String(s.seed, key)%uint64(len(s.slots))]
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
