package catalog

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Engines the catalog installs for; the value is the model registry's binding name.
const (
	EngineLlama   = "llama.cpp"
	EngineWhisper = "whisper.cpp"
	EngineSD      = "stable-diffusion.cpp"
)

// KnownEngines lists the engines in a stable order.
func KnownEngines() []string { return []string{EngineLlama, EngineWhisper, EngineSD} }

// Fit badges.
const (
	FitFits     = "fits"
	FitTight    = "tight"
	FitTooLarge = "too_large"
	FitUnknown  = "unknown"
)

// Memory estimate: a model's resident memory is its weights (the file, memory-mapped) plus
// runtime buffers proportional to them, plus the KV cache and scratch of a default context.
const (
	// OverheadPercent is the share of the file size added for runtime buffers.
	OverheadPercent = 10
	// ContextAllowance is added for the KV cache and scratch buffers of a default context.
	ContextAllowance = 512 << 20
	// ComfortPercent of RAM: an estimate at or below it fits comfortably.
	ComfortPercent = 60
	// SafePercent of RAM: an estimate above it is too large (between the two it is tight).
	SafePercent = 75
)

// EstimateMemory is the estimated resident memory of a model file of size bytes:
// size × 1.10 + 512 MiB.
func EstimateMemory(size int64) int64 {
	return size + size*OverheadPercent/100 + ContextAllowance
}

// Fit returns the memory estimate of a variant of size bytes and its badge on a machine
// with ram bytes: fits when the estimate is at most 60% of RAM, tight up to 75%, too_large
// above; unknown when either number is unknown (≤ 0).
func Fit(size, ram int64) (estimate int64, badge string) {
	if size <= 0 {
		return 0, FitUnknown
	}
	estimate = EstimateMemory(size)
	if ram <= 0 {
		return estimate, FitUnknown
	}
	switch {
	case estimate <= ram/100*ComfortPercent:
		return estimate, FitFits
	case estimate <= ram/100*SafePercent:
		return estimate, FitTight
	default:
		return estimate, FitTooLarge
	}
}

// File is one file of a variant.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// Variant is one installable form of a model: usually one quantization, possibly split
// into several files.
type Variant struct {
	ID             string `json:"id"`
	Quantization   string `json:"quantization,omitempty"`
	Files          []File `json:"files"`
	SizeBytes      int64  `json:"sizeBytes,omitempty"`
	EstimatedBytes int64  `json:"estimatedMemoryBytes,omitempty"`
	Fit            string `json:"fit"`
	Recommended    bool   `json:"recommended"`
}

var (
	splitSuffix = regexp.MustCompile(`(?i)-(\d{5})-of-(\d{5})\.gguf$`)
	// quantPattern finds a quantization label between separators (Q4_K_M, IQ2_XXS, Q8_0, F16…).
	quantPattern = regexp.MustCompile(`(?i)(?:^|[-_.])(I?Q[1-8](?:_[0-9A-Z]+)*|BF16|F16|F32|FP16|FP32)(?:[-_.]|$)`)
	// segmentPattern is one path segment of a hub file name that we are willing to write.
	segmentPattern = regexp.MustCompile(`^[A-Za-z0-9_+][A-Za-z0-9._+-]{0,254}$`)
)

// SafeFileName reports whether a hub file name is a relative path whose segments stay
// inside the repository folder (no "..", no absolute path, no odd characters).
func SafeFileName(name string) bool {
	if name == "" || len(name) > 1024 || strings.HasPrefix(name, "/") {
		return false
	}
	for _, seg := range strings.Split(name, "/") {
		if !segmentPattern.MatchString(seg) || seg == "." || seg == ".." || strings.Contains(seg, "..") {
			return false
		}
	}
	return true
}

// modelFile reports whether name is a weights file an engine loads: any .gguf (projector
// files for vision, mmproj-*, are auxiliary and left out) or a whisper.cpp ggml-*.bin.
func modelFile(name string) bool {
	base := strings.ToLower(path.Base(name))
	if strings.HasPrefix(base, "mmproj") {
		return false
	}
	return strings.HasSuffix(base, ".gguf") || (strings.HasPrefix(base, "ggml-") && strings.HasSuffix(base, ".bin"))
}

// Quantization returns the quantization label of a file name, upper-cased, or "".
func Quantization(name string) string {
	base := path.Base(name)
	base = splitSuffix.ReplaceAllString(base, "")
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".gguf"), ".bin")
	ms := quantPattern.FindAllStringSubmatch(base, -1)
	if len(ms) == 0 {
		return ""
	}
	return strings.ToUpper(ms[len(ms)-1][1])
}

// groupKey is the file name without its split suffix and extension: the parts of one
// split model share it.
func groupKey(name string) (key string, part, of int) {
	if m := splitSuffix.FindStringSubmatchIndex(name); m != nil {
		part, _ = strconv.Atoi(name[m[2]:m[3]])
		of, _ = strconv.Atoi(name[m[4]:m[5]])
		return name[:m[0]], part, of
	}
	return strings.TrimSuffix(strings.TrimSuffix(name, ".gguf"), ".bin"), 1, 1
}

// Variants groups a repository's files into variants with fit badges for ram bytes of
// memory, and marks the largest comfortably fitting one recommended. Files with unsafe
// names or that are not model weights are left out; a split model missing a part is too.
func Variants(files []File, ram int64) []Variant {
	type group struct {
		key   string
		of    int
		files []File
		parts map[int]bool
	}
	groups := map[string]*group{}
	for _, f := range files {
		if !SafeFileName(f.Name) || !modelFile(f.Name) {
			continue
		}
		key, part, of := groupKey(f.Name)
		g := groups[key]
		if g == nil {
			g = &group{key: key, of: of, parts: map[int]bool{}}
			groups[key] = g
		}
		if g.of != of || g.parts[part] {
			g.of = -1 // inconsistent split: dropped below
			continue
		}
		g.parts[part] = true
		g.files = append(g.files, f)
	}
	// A quantization label is the variant id when exactly one group carries it; otherwise
	// the file stem (without directories) keeps ids unique.
	quantCount := map[string]int{}
	for _, g := range groups {
		if q := Quantization(g.key + ".gguf"); q != "" {
			quantCount[q]++
		}
	}
	var out []Variant
	seen := map[string]bool{}
	for _, g := range groups {
		if g.of < 1 || len(g.parts) != g.of {
			continue
		}
		sort.Slice(g.files, func(i, j int) bool { return g.files[i].Name < g.files[j].Name })
		q := Quantization(g.key + ".gguf")
		id := q
		if id == "" || quantCount[q] > 1 || strings.HasPrefix(path.Base(g.key), "ggml-") {
			id = strings.TrimPrefix(path.Base(g.key), "ggml-")
		}
		if seen[id] {
			id = g.key
		}
		seen[id] = true
		v := Variant{ID: id, Quantization: q, Files: g.files}
		known := true
		for _, f := range g.files {
			if f.Size <= 0 {
				known = false
			}
			v.SizeBytes += f.Size
		}
		if !known {
			v.SizeBytes = 0
		}
		v.EstimatedBytes, v.Fit = Fit(v.SizeBytes, ram)
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SizeBytes != out[j].SizeBytes {
			return out[i].SizeBytes < out[j].SizeBytes
		}
		return out[i].ID < out[j].ID
	})
	best := -1
	for i, v := range out {
		if v.Fit == FitFits {
			best = i // sorted by size: the last that fits is the largest
		}
	}
	if best >= 0 {
		out[best].Recommended = true
	}
	return out
}

// paramPattern finds a parameter count in a repository name (7B, 0.5B, 1.5b, 135M, 8x7B).
var paramPattern = regexp.MustCompile(`(?i)(?:^|[-_./])(?:(\d+)x)?(\d+(?:\.\d+)?)([BM])(?:[-_.]|$)`)

// Parameters estimates a model's parameter count from its repository name, or 0.
func Parameters(repo string) int64 {
	m := paramPattern.FindStringSubmatch(path.Base(repo))
	if m == nil {
		return 0
	}
	n, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return 0
	}
	mult := 1e9
	if strings.EqualFold(m[3], "M") {
		mult = 1e6
	}
	if m[1] != "" {
		k, _ := strconv.Atoi(m[1])
		n *= float64(k)
	}
	return int64(n * mult)
}

// Size classes of the size query parameter, by parameter count.
var sizeClasses = []struct {
	name     string
	min, max int64
}{
	{"tiny", 1, 1e9 - 1},
	{"small", 1e9, 4e9 - 1},
	{"medium", 4e9, 14e9 - 1},
	{"large", 14e9, 1 << 62},
}

func sizeClass(params int64) string {
	for _, c := range sizeClasses {
		if params >= c.min && params <= c.max {
			return c.name
		}
	}
	return ""
}

func validSize(s string) error {
	for _, c := range sizeClasses {
		if c.name == s {
			return nil
		}
	}
	return fmt.Errorf("size must be one of tiny, small, medium, large")
}
