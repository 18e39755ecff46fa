package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// hubModel is a model as the Hugging Face API returns it (GET /api/models with full=true,
// and GET /api/models/{repo} with blobs=true, which adds size and lfs to each sibling).
type hubModel struct {
	ID           string       `json:"id"`
	Downloads    int64        `json:"downloads"`
	Likes        int64        `json:"likes"`
	Tags         []string     `json:"tags"`
	PipelineTag  string       `json:"pipeline_tag"`
	LibraryName  string       `json:"library_name"`
	LastModified string       `json:"lastModified"`
	Gated        any          `json:"gated"`
	Siblings     []hubSibling `json:"siblings"`
}

type hubSibling struct {
	RFilename string `json:"rfilename"`
	Size      int64  `json:"size"`
	LFS       *struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	} `json:"lfs"`
}

// hub is a client of the Hugging Face API at base.
type hub struct {
	base   string
	client *http.Client
}

// repoPattern is a hub repository id, owner/name; ".." anywhere is refused separately.
var repoPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)

// ValidRepo reports whether repo is owner/name and safe as a folder path.
func ValidRepo(repo string) bool {
	return repoPattern.MatchString(repo) && !strings.Contains(repo, "..")
}

// metaLimit bounds a hub JSON answer (model lists of full=true carry every file name).
const metaLimit = 32 << 20

func (h *hub) getJSON(ctx context.Context, p string, q url.Values, out any) (int, error) {
	u := h.base + p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, fmt.Errorf("hub answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, metaLimit)).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("hub answer: %w", err)
	}
	return resp.StatusCode, nil
}

// search lists models: GET /api/models?search=…&sort=…&direction=-1&limit=…&full=true.
func (h *hub) search(ctx context.Context, search, sortKey string, limit int, gguf bool) ([]hubModel, error) {
	q := url.Values{}
	if search != "" {
		q.Set("search", search)
	}
	if gguf {
		q.Set("filter", "gguf")
	}
	q.Set("sort", sortKey)
	q.Set("direction", "-1")
	q.Set("limit", strconv.Itoa(limit))
	q.Set("full", "true")
	var out []hubModel
	if _, err := h.getJSON(ctx, "/api/models", q, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// info reads one model with file sizes and LFS hashes: GET /api/models/{repo}?blobs=true.
// found is false on 401/404 (the hub answers 401 for repositories it does not show).
func (h *hub) info(ctx context.Context, repo string) (m *hubModel, found bool, err error) {
	var out hubModel
	status, err := h.getJSON(ctx, "/api/models/"+repo, url.Values{"blobs": {"true"}}, &out)
	if status == http.StatusNotFound || status == http.StatusUnauthorized {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &out, true, nil
}

// fileURL is where a file downloads from: GET /{repo}/resolve/main/{file} (redirects to
// the CDN; the client follows them).
func (h *hub) fileURL(repo, name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return h.base + "/" + repo + "/resolve/main/" + strings.Join(segs, "/")
}

// files turns siblings into files (size from lfs when the plain size is absent).
func (m *hubModel) files() []File {
	out := make([]File, 0, len(m.Siblings))
	for _, s := range m.Siblings {
		f := File{Name: s.RFilename, Size: s.Size}
		if s.LFS != nil {
			if f.Size == 0 {
				f.Size = s.LFS.Size
			}
			if sha := strings.ToLower(s.LFS.SHA256); len(sha) == 64 && isHex(sha) {
				f.SHA256 = sha
			}
		}
		out = append(out, f)
	}
	return out
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

func hasTag(tags []string, want ...string) bool {
	for _, t := range tags {
		for _, w := range want {
			if strings.EqualFold(t, w) {
				return true
			}
		}
	}
	return false
}

// engineOf picks the engine that runs a hub model, from its tags, pipeline and files;
// "" when none of ours does.
func engineOf(m *hubModel) string {
	var gguf, ggmlBin bool
	for _, s := range m.Siblings {
		b := strings.ToLower(s.RFilename[strings.LastIndex(s.RFilename, "/")+1:])
		if strings.HasSuffix(b, ".gguf") {
			gguf = true
		}
		if strings.HasPrefix(b, "ggml-") && strings.HasSuffix(b, ".bin") {
			ggmlBin = true
		}
	}
	if hasTag(m.Tags, "gguf") {
		gguf = true
	}
	speech := m.PipelineTag == "automatic-speech-recognition" || hasTag(m.Tags, "whisper", "automatic-speech-recognition")
	image := m.PipelineTag == "text-to-image" || hasTag(m.Tags, "stable-diffusion", "text-to-image", "diffusers")
	switch {
	case speech && (gguf || ggmlBin):
		return EngineWhisper
	case image && gguf:
		return EngineSD
	case gguf:
		return EngineLlama
	}
	return ""
}

// modalityOf is the data-plane modality an engine serves for a hub model.
func modalityOf(engine, pipeline string) string {
	switch engine {
	case EngineWhisper:
		return "transcription"
	case EngineSD:
		return "images"
	}
	if pipeline == "feature-extraction" || pipeline == "sentence-similarity" {
		return "embeddings"
	}
	return "chat"
}

func parseTime(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}
