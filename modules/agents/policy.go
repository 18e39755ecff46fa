package agents

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Capture levels of an agent's I/O policy.
const (
	// CaptureOff records nothing about a run's input and output beyond its status.
	CaptureOff = "off"
	// CaptureMetadata records sizes, types and timings of inputs and outputs, never their content.
	CaptureMetadata = "metadata"
	// CaptureFull records inputs and outputs, after the redact rules.
	CaptureFull = "full"
)

// DefaultCapture is the level of an agent that never set a policy: no payloads are kept
// unless someone asks for them.
const DefaultCapture = CaptureMetadata

// Policy limits.
const (
	maxRetentionSeconds = 10 * 365 * 24 * 3600
	maxRedactRules      = 64
	maxPatternLength    = 1024
	// DefaultRedactReplacement replaces redacted values and pattern matches.
	DefaultRedactReplacement = "[REDACTED]"
)

// IOPolicy is an agent's I/O capture policy.
type IOPolicy struct {
	IOCapture string `json:"io_capture"`
	// IORetentionSeconds bounds how long captured payloads are kept; nil keeps them as long as
	// the run record.
	IORetentionSeconds *int64       `json:"io_retention_seconds"`
	RedactRules        []RedactRule `json:"redact_rules"`
}

// RedactRule hides part of captured I/O: either a field path or a pattern, not both.
//
// Path is a dot path from the root of the captured value; each segment is a key, a list index,
// or "*" for every key / element (e.g. "user.email", "messages.*.content"). The value found is
// replaced whole. Pattern is a Go (RE2) regular expression applied to every string in the
// captured value; matches are replaced.
type RedactRule struct {
	Path        string `json:"path,omitempty"`
	Pattern     string `json:"pattern,omitempty"`
	Replacement string `json:"replacement,omitempty"`
}

var pathSegment = regexp.MustCompile(`^(\*|[A-Za-z0-9_$-]+)$`)

// Validate checks the policy and returns a 400 naming the first bad field.
func (p IOPolicy) Validate() error {
	switch p.IOCapture {
	case CaptureOff, CaptureMetadata, CaptureFull:
	case "":
		return invalid("io_capture", "is required: one of off, metadata, full")
	default:
		return invalid("io_capture", "must be one of off, metadata, full, not %q", p.IOCapture)
	}
	if r := p.IORetentionSeconds; r != nil && (*r < 1 || *r > maxRetentionSeconds) {
		return invalid("io_retention_seconds", "must be from 1 to %d seconds (omit it to keep captured I/O as long as the run)", maxRetentionSeconds)
	}
	if len(p.RedactRules) > maxRedactRules {
		return invalid("redact_rules", "may hold at most %d rules", maxRedactRules)
	}
	for i, r := range p.RedactRules {
		field := "redact_rules[" + strconv.Itoa(i) + "]"
		switch {
		case r.Path == "" && r.Pattern == "":
			return invalid(field, "needs a path or a pattern")
		case r.Path != "" && r.Pattern != "":
			return invalid(field, "takes a path or a pattern, not both")
		case r.Path != "":
			if len(r.Path) > maxPatternLength {
				return invalid(field+".path", "is longer than %d characters", maxPatternLength)
			}
			for _, seg := range strings.Split(strings.TrimPrefix(r.Path, "$."), ".") {
				if !pathSegment.MatchString(seg) {
					return invalid(field+".path", "has an invalid segment %q: use keys, list indexes or * separated by dots", seg)
				}
			}
		default:
			if len(r.Pattern) > maxPatternLength {
				return invalid(field+".pattern", "is longer than %d characters", maxPatternLength)
			}
			if _, err := regexp.Compile(r.Pattern); err != nil {
				return invalid(field+".pattern", "is not a valid regular expression: %v", err)
			}
		}
	}
	return nil
}

// normalized returns the policy with defaults filled in (non-nil rule list).
func (p IOPolicy) normalized() IOPolicy {
	if p.IOCapture == "" {
		p.IOCapture = DefaultCapture
	}
	if p.RedactRules == nil {
		p.RedactRules = []RedactRule{}
	}
	return p
}

// Redact returns a copy of v (a decoded JSON value) with the policy's redact rules applied.
// The policy must have passed Validate. v itself is not modified.
func (p IOPolicy) Redact(v any) any {
	out := deepCopy(v)
	for _, r := range p.RedactRules {
		repl := r.Replacement
		if repl == "" {
			repl = DefaultRedactReplacement
		}
		if r.Path != "" {
			out = redactPath(out, strings.Split(strings.TrimPrefix(r.Path, "$."), "."), repl)
			continue
		}
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			continue // Validate refuses these; never fail a run over a stored rule
		}
		out = redactPattern(out, re, repl)
	}
	return out
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

func redactPath(v any, segs []string, repl string) any {
	if len(segs) == 0 {
		return repl
	}
	seg, rest := segs[0], segs[1:]
	switch x := v.(type) {
	case map[string]any:
		if seg == "*" {
			for k, e := range x {
				x[k] = redactPath(e, rest, repl)
			}
		} else if e, ok := x[seg]; ok {
			x[seg] = redactPath(e, rest, repl)
		}
	case []any:
		if seg == "*" {
			for i, e := range x {
				x[i] = redactPath(e, rest, repl)
			}
		} else if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(x) {
			x[i] = redactPath(x[i], rest, repl)
		}
	}
	return v
}

func redactPattern(v any, re *regexp.Regexp, repl string) any {
	switch x := v.(type) {
	case string:
		return re.ReplaceAllLiteralString(x, repl)
	case map[string]any:
		for k, e := range x {
			x[k] = redactPattern(e, re, repl)
		}
	case []any:
		for i, e := range x {
			x[i] = redactPattern(e, re, repl)
		}
	}
	return v
}

// String describes the policy for logs (rules are counted, not shown).
func (p IOPolicy) String() string {
	return fmt.Sprintf("io_capture=%s rules=%d", p.IOCapture, len(p.RedactRules))
}
