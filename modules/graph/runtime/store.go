package runtime

import (
	"context"
	"maps"
	"sync"
)

// MemoryStore is an in-memory NodeResultStore, for tests and for callers that only need
// resume within one process.
type MemoryStore struct {
	mu      sync.Mutex
	results map[string]NodeResult
	saves   map[string]int
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{results: map[string]NodeResult{}, saves: map[string]int{}}
}

// Load returns a copy of every stored result.
func (s *MemoryStore) Load(ctx context.Context) (map[string]NodeResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.results), nil
}

// Save stores (or replaces) one result.
func (s *MemoryStore) Save(ctx context.Context, nodeID string, r NodeResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[nodeID] = r
	s.saves[nodeID]++
	return nil
}

// Saves reports how many times nodeID was saved (tests use it to prove nodes ran once).
func (s *MemoryStore) Saves(nodeID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves[nodeID]
}
