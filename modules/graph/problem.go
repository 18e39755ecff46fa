package graph

import (
	"sort"
	"strconv"
	"strings"
)

// Problem is one validation finding: where (a JSON pointer into the IR), which node, and what.
type Problem struct {
	Path    string `json:"path"`
	Node    string `json:"node,omitempty"`
	Message string `json:"message"`
}

// Problems is every finding of one validation, in a deterministic order.
type Problems []Problem

// Error joins the problems into one line, so Problems can be logged as an error text.
func (ps Problems) Error() string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Path + ": " + p.Message
	}
	return "invalid IR: " + strings.Join(parts, "; ")
}

// sortProblems orders by path (numeric segments compared as numbers), then message, and drops
// exact duplicates.
func sortProblems(ps Problems) Problems {
	sort.SliceStable(ps, func(i, j int) bool {
		if c := comparePointers(ps[i].Path, ps[j].Path); c != 0 {
			return c < 0
		}
		if ps[i].Message != ps[j].Message {
			return ps[i].Message < ps[j].Message
		}
		return ps[i].Node < ps[j].Node
	})
	out := ps[:0]
	for i, p := range ps {
		if i > 0 && p == ps[i-1] {
			continue
		}
		out = append(out, p)
	}
	return out
}

func comparePointers(a, b string) int {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] == bs[i] {
			continue
		}
		ai, aerr := strconv.Atoi(as[i])
		bi, berr := strconv.Atoi(bs[i])
		if aerr == nil && berr == nil {
			if ai < bi {
				return -1
			}
			return 1
		}
		if as[i] < bs[i] {
			return -1
		}
		return 1
	}
	return len(as) - len(bs)
}
