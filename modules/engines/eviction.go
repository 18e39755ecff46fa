package engines

import "time"

// Running is a resident engine as the eviction choice sees it.
type Running struct {
	Model    string
	Ready    bool // false while starting: a starting engine is never evicted
	InFlight int
	LastUsed time.Time
}

// EvictionFor chooses which resident engine to stop so that target can start: the least
// recently used one that is ready and idle (no request in flight), never target itself.
// ok is false when every engine is busy or starting (the caller answers no_capacity).
// Ties on LastUsed go to the smaller model id, so the choice is deterministic.
func EvictionFor(target string, running []Running) (victim string, ok bool) {
	var best *Running
	for i := range running {
		r := &running[i]
		if r.Model == target || !r.Ready || r.InFlight > 0 {
			continue
		}
		if best == nil || r.LastUsed.Before(best.LastUsed) || (r.LastUsed.Equal(best.LastUsed) && r.Model < best.Model) {
			best = r
		}
	}
	if best == nil {
		return "", false
	}
	return best.Model, true
}
