// Package catalog is the inference plane's model catalog: it searches a model hub (the
// Hugging Face API), shows a model's installable variants with RAM fit badges, and runs
// download-and-install jobs that register a logical id with a local-engine binding.
package catalog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
)

// Registry is the model registry as the catalog needs it (modules/models, adapted in cmd).
type Registry interface {
	// Exists reports whether a logical id is registered.
	Exists(ctx context.Context, id string) (bool, error)
	// RegisterLocal registers id with a local-engine binding serving modelPath.
	RegisterLocal(ctx context.Context, id, engine, modelPath, modality string) error
}

// Options configure the service; DB, DataDir and Registry are required.
type Options struct {
	DB       *database.DB
	Registry Registry
	// DataDir is $SERVICE_DATA_DIR; files land in DataDir/models/<owner>/<name>/.
	DataDir string
	// HubURL is the hub's base URL (default https://huggingface.co).
	HubURL string
	// Curated is the curated catalog JSON (configs/catalog.json), the fallback when the hub
	// is unreachable.
	Curated []byte
	// FreeSpace returns the bytes free under a folder (default: FreeBytes, statfs).
	FreeSpace func(dir string) (int64, error)
	// RAM returns the machine's memory in bytes (default: MemTotal of /proc/meminfo).
	RAM func() (int64, error)
	// HTTPClient talks to the hub (default: one without an overall timeout, so large
	// downloads can take their time; metadata requests carry their own deadline).
	HTTPClient *http.Client
	// MaxConcurrent bounds downloads running at once (default 2).
	MaxConcurrent int
	// StallTimeout ends a download whose hub sends nothing for this long (default 60s).
	StallTimeout time.Duration
	// CacheTTL is how long search answers are reused (default 60s).
	CacheTTL time.Duration
	Logger   zerolog.Logger
}

// Service is the catalog.
type Service struct {
	opts    Options
	hub     *hub
	curated []curatedEntry
	slots   chan struct{}

	cacheMu sync.Mutex
	cache   map[string]cached

	mu     sync.Mutex
	active map[string]*activeJob
	closed bool
	wg     sync.WaitGroup
}

type cached struct {
	at     time.Time
	models []hubModel
}

// curatedEntry is one model of configs/catalog.json.
type curatedEntry struct {
	ID          string `json:"id"`
	Engine      string `json:"engine"`
	Modality    string `json:"modality"`
	Description string `json:"description"`
}

// New builds the service and fails jobs left in flight by a previous process (interrupted).
func New(ctx context.Context, opts Options) (*Service, error) {
	if opts.DB == nil || opts.Registry == nil || opts.DataDir == "" {
		return nil, errors.New("catalog.New: DB, Registry and DataDir are required")
	}
	if opts.HubURL == "" {
		opts.HubURL = "https://huggingface.co"
	}
	if opts.RAM == nil {
		opts.RAM = MemTotal
	}
	if opts.FreeSpace == nil {
		opts.FreeSpace = FreeBytes
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 2
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = time.Minute
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = time.Minute
	}
	s := &Service{
		opts:   opts,
		hub:    &hub{base: strings.TrimRight(opts.HubURL, "/"), client: opts.HTTPClient},
		slots:  make(chan struct{}, opts.MaxConcurrent),
		cache:  map[string]cached{},
		active: map[string]*activeJob{},
	}
	if len(opts.Curated) > 0 {
		var doc struct {
			Models []curatedEntry `json:"models"`
		}
		if err := json.Unmarshal(opts.Curated, &doc); err != nil {
			return nil, fmt.Errorf("curated catalog: %w", err)
		}
		for _, e := range doc.Models {
			if !ValidRepo(e.ID) || !slices.Contains(KnownEngines(), e.Engine) || !validModality(e.Modality) {
				return nil, fmt.Errorf("curated catalog: entry %q: bad id, engine or modality", e.ID)
			}
		}
		s.curated = doc.Models
	}
	return s, nil
}

// Start ends the jobs a previous process left live (as failed "interrupted"). It runs once the
// schema exists: the plane starts its modules after migrations, never at construction.
func (s *Service) Start(ctx context.Context) error { return s.recover(ctx) }

// Close cancels running jobs (they end failed "interrupted") and waits for them.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	for _, j := range s.active {
		j.cancel(errShutdown)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

var memTotalLine = regexp.MustCompile(`^MemTotal:\s+(\d+)\s+kB`)

// MemTotal reads the machine's memory from /proc/meminfo.
func MemTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := memTotalLine.FindStringSubmatch(sc.Text()); m != nil {
			kb, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("MemTotal not found in /proc/meminfo")
}

func (s *Service) ram() int64 {
	n, err := s.opts.RAM()
	if err != nil {
		return 0
	}
	return n
}

var modalities = []string{"chat", "embeddings", "transcription", "speech", "images"}

func validModality(m string) bool { return slices.Contains(modalities, m) }

// Query is a validated search.
type Query struct {
	Search   string
	Sort     string
	Limit    int
	Engines  []string
	Size     string
	Modality string
}

// Sort keys and their hub names.
var sortKeys = map[string]string{"downloads": "downloads", "likes": "likes", "lastModified": "lastModified"}

// Summary is one search result.
type Summary struct {
	ID           string     `json:"id"`
	Engine       string     `json:"engine"`
	Modality     string     `json:"modality"`
	Downloads    int64      `json:"downloads"`
	Likes        int64      `json:"likes"`
	PipelineTag  string     `json:"pipelineTag,omitempty"`
	LastModified *time.Time `json:"lastModified,omitempty"`
	Parameters   int64      `json:"parameters,omitempty"`
	Size         string     `json:"size,omitempty"`
	Description  string     `json:"description,omitempty"`
}

// SearchResult is the answer of GET /admin/catalog/models.
type SearchResult struct {
	Models []Summary `json:"models"`
	// Source is hub, or curated when the hub could not be reached.
	Source string `json:"source"`
	// HubError says why the curated list was used.
	HubError string `json:"hubError,omitempty"`
}

func (q *Query) keep(sm Summary) bool {
	if len(q.Engines) > 0 && !slices.Contains(q.Engines, sm.Engine) {
		return false
	}
	if q.Modality != "" && q.Modality != sm.Modality {
		return false
	}
	if q.Size != "" && sm.Size != q.Size {
		return false
	}
	return true
}

func summarize(m *hubModel) (Summary, bool) {
	eng := engineOf(m)
	if eng == "" || !ValidRepo(m.ID) {
		return Summary{}, false
	}
	p := Parameters(m.ID)
	return Summary{
		ID: m.ID, Engine: eng, Modality: modalityOf(eng, m.PipelineTag), Downloads: m.Downloads, Likes: m.Likes,
		PipelineTag: m.PipelineTag, LastModified: parseTime(m.LastModified), Parameters: p, Size: sizeClass(p),
	}, true
}

// Search asks the hub (cached briefly) and filters by engine, modality and size; when the
// hub cannot be reached it answers from the curated list.
func (s *Service) Search(ctx context.Context, q Query) (*SearchResult, error) {
	// Our engines run GGUF files, except whisper.cpp's ggml .bin files, which carry no
	// gguf tag: the hub's gguf filter is dropped only when speech models are asked for.
	gguf := !(q.Modality == "transcription" || slices.Equal(q.Engines, []string{EngineWhisper}))
	// Ask for more than the limit: results no engine of ours runs are dropped.
	ask := min(100, q.Limit*3)
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%t", q.Search, q.Sort, ask, gguf)
	ms, err := s.searchCached(ctx, key, q, ask, gguf)
	if err != nil {
		s.opts.Logger.Warn().Err(err).Msg("catalog: hub search failed; answering from the curated list")
		return s.searchCurated(q, err), nil
	}
	out := &SearchResult{Models: []Summary{}, Source: "hub"}
	for i := range ms {
		sm, ok := summarize(&ms[i])
		if !ok || !q.keep(sm) {
			continue
		}
		out.Models = append(out.Models, sm)
		if len(out.Models) == q.Limit {
			break
		}
	}
	return out, nil
}

func (s *Service) searchCached(ctx context.Context, key string, q Query, ask int, gguf bool) ([]hubModel, error) {
	s.cacheMu.Lock()
	if c, ok := s.cache[key]; ok && time.Since(c.at) < s.opts.CacheTTL {
		s.cacheMu.Unlock()
		return c.models, nil
	}
	s.cacheMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ms, err := s.hub.search(ctx, q.Search, sortKeys[q.Sort], ask, gguf)
	if err != nil {
		return nil, err
	}
	s.cacheMu.Lock()
	// Bounded: a full cache starts over rather than tracking ages per entry.
	if len(s.cache) >= 128 {
		clear(s.cache)
	}
	s.cache[key] = cached{at: time.Now(), models: ms}
	s.cacheMu.Unlock()
	return ms, nil
}

func (s *Service) searchCurated(q Query, cause error) *SearchResult {
	out := &SearchResult{Models: []Summary{}, Source: "curated", HubError: hubReason(cause)}
	needle := strings.ToLower(q.Search)
	for _, e := range s.curated {
		if needle != "" && !strings.Contains(strings.ToLower(e.ID), needle) {
			continue
		}
		p := Parameters(e.ID)
		sm := Summary{ID: e.ID, Engine: e.Engine, Modality: e.Modality, Description: e.Description, Parameters: p, Size: sizeClass(p)}
		if !q.keep(sm) {
			continue
		}
		out.Models = append(out.Models, sm)
		if len(out.Models) == q.Limit {
			break
		}
	}
	return out
}

// hubReason is a short, secret-free account of a hub failure.
func hubReason(err error) string {
	var ue interface{ Timeout() bool }
	switch {
	case errors.As(err, &ue) && ue.Timeout():
		return "the hub did not answer in time"
	case strings.HasPrefix(err.Error(), "hub answered"):
		return err.Error()
	case strings.HasPrefix(err.Error(), "hub answer:"):
		return "the hub answered something that is not the expected JSON"
	}
	return "the hub could not be reached"
}

// Detail is the answer of GET /admin/catalog/models/{repo}.
type Detail struct {
	Summary
	Tags        []string  `json:"tags"`
	RAMBytes    int64     `json:"ramBytes"`
	Variants    []Variant `json:"variants"`
	Recommended string    `json:"recommended,omitempty"`
	Source      string    `json:"source"`
	HubError    string    `json:"hubError,omitempty"`
}

// Model reads one repository with its variants and fit badges. When the hub cannot be
// reached a curated repository is answered without variants (source curated).
func (s *Service) Model(ctx context.Context, repo string) (*Detail, error) {
	if !ValidRepo(repo) {
		return nil, ErrInvalidRepo.Msg("repository must be owner/name (letters, digits, . _ -; no ..)")
	}
	m, err := s.info(ctx, repo)
	if err != nil {
		if errors.Is(err, ErrHubUnavailable) {
			for _, e := range s.curated {
				if strings.EqualFold(e.ID, repo) {
					p := Parameters(e.ID)
					return &Detail{
						Summary: Summary{ID: e.ID, Engine: e.Engine, Modality: e.Modality, Description: e.Description, Parameters: p, Size: sizeClass(p)},
						Tags:    []string{}, RAMBytes: s.ram(), Variants: []Variant{}, Source: "curated", HubError: apperrMessage(err),
					}, nil
				}
			}
		}
		return nil, err
	}
	sm, ok := summarize(m)
	if !ok {
		return nil, ErrRepoNotFound.Msg("repository %s has no model files an engine here runs (GGUF, or whisper.cpp ggml .bin)", repo)
	}
	ram := s.ram()
	d := &Detail{Summary: sm, Tags: m.Tags, RAMBytes: ram, Variants: Variants(m.files(), ram), Source: "hub"}
	if d.Tags == nil {
		d.Tags = []string{}
	}
	for _, v := range d.Variants {
		if v.Recommended {
			d.Recommended = v.ID
		}
	}
	return d, nil
}

func apperrMessage(err error) string {
	if e := apperr.From(err); e != nil {
		return e.Message
	}
	return "the hub could not be reached"
}

// info reads a repository from the hub: ErrRepoNotFound or ErrHubUnavailable on failure.
func (s *Service) info(ctx context.Context, repo string) (*hubModel, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	m, found, err := s.hub.info(ctx, repo)
	if err != nil {
		return nil, ErrHubUnavailable.Msg("%s", hubReason(err)).Wrap(err)
	}
	if !found {
		return nil, ErrRepoNotFound.Msg("repository %s is not on the hub", repo)
	}
	if !strings.EqualFold(m.ID, repo) {
		m.ID = repo
	}
	return m, nil
}
