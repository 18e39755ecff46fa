package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
)

// Job states.
const (
	StateQueued      = "queued"
	StateDownloading = "downloading"
	StateVerifying   = "verifying"
	StateCompleted   = "completed"
	StateFailed      = "failed"
	StateCanceled    = "canceled"
)

var liveStates = []string{StateQueued, StateDownloading, StateVerifying}

var (
	errCanceled = errors.New("canceled")
	errShutdown = errors.New("interrupted")
	errStalled  = errors.New("stalled")
)

type jobRow struct {
	ID         string `gorm:"primaryKey"`
	Repo       string
	Engine     string
	VariantID  string
	LogicalID  string
	Modality   string
	State      string
	Error      string
	Files      string
	BytesDone  int64
	BytesTotal int64
	ModelPath  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

func (jobRow) TableName() string { return "catalog_downloads" }

// Job is a download-and-install job as the API shows it.
type Job struct {
	JobID      string `json:"job_id"`
	Repo       string `json:"repo"`
	Engine     string `json:"engine"`
	VariantID  string `json:"variantId"`
	LogicalID  string `json:"logicalId"`
	Modality   string `json:"modality"`
	State      string `json:"state"`
	Error      string `json:"error,omitempty"`
	Files      []File `json:"files"`
	BytesDone  int64  `json:"bytesDone"`
	BytesTotal int64  `json:"bytesTotal"`
	// BytesPerSecond is the average rate of the running download.
	BytesPerSecond int64      `json:"bytesPerSecond,omitempty"`
	ModelPath      string     `json:"modelPath,omitempty"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
	FinishedAt     *time.Time `json:"finishedAt,omitempty"`
}

// activeJob is a job running in this process.
type activeJob struct {
	cancel  context.CancelCauseFunc
	done    chan struct{}
	bytes   atomic.Int64
	started atomic.Int64 // unix nanos of the first byte request
}

// InstallRequest is the body of POST /admin/catalog/install.
type InstallRequest struct {
	Repo      string `json:"repo"`
	Engine    string `json:"engine"`
	VariantID string `json:"variantId"`
	LogicalID string `json:"logicalId"`
}

// logicalIDPattern is the model registry's id format (modules/models idPattern).
var logicalIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:/-]{0,127}$`)

// Install validates a request against the hub and starts a job; it answers the queued job.
func (s *Service) Install(ctx context.Context, r InstallRequest) (*Job, error) {
	if !ValidRepo(r.Repo) {
		return nil, ErrInvalidRepo.Msg("repo must be owner/name (letters, digits, . _ -; no ..)")
	}
	if r.Engine != "" && !slices.Contains(KnownEngines(), r.Engine) {
		return nil, ErrUnknownEngine.Msg("engine must be one of %s", strings.Join(KnownEngines(), ", "))
	}
	if !logicalIDPattern.MatchString(r.LogicalID) {
		return nil, ErrInvalidLogicalID.Msg("logicalId must match [a-zA-Z0-9][a-zA-Z0-9._:/-]{0,127}")
	}
	if strings.TrimSpace(r.VariantID) == "" {
		return nil, ErrVariantNotFound.Msg("variantId is required (see GET /admin/catalog/models/{repo})")
	}
	if err := s.logicalIDFree(ctx, r.LogicalID); err != nil {
		return nil, err
	}
	d, err := s.Model(ctx, r.Repo)
	if err != nil {
		return nil, err
	}
	if d.Source != "hub" {
		return nil, ErrHubUnavailable.Msg("%s: installing needs the hub", d.HubError)
	}
	var v *Variant
	for i := range d.Variants {
		if d.Variants[i].ID == r.VariantID {
			v = &d.Variants[i]
		}
	}
	if v == nil {
		ids := make([]string, 0, len(d.Variants))
		for _, x := range d.Variants {
			ids = append(ids, x.ID)
		}
		return nil, ErrVariantNotFound.Msg("repository %s has no variant %q", r.Repo, clip(r.VariantID)).WithDetails(map[string]any{"variants": ids})
	}
	// Room for the files plus the bytes other live jobs are still to write; unknown free
	// space (statfs failed) is not a reason to refuse.
	if free, err := s.opts.FreeSpace(s.opts.DataDir); err == nil && v.SizeBytes > 0 {
		pending, err := s.pendingBytes(ctx)
		if err != nil {
			return nil, err
		}
		if need := v.SizeBytes + pending; need > free {
			return nil, ErrInsufficientStorage.Msg("variant %s needs %d bytes (plus %d for downloads in progress); %d are free under the data folder", v.ID, v.SizeBytes, pending, free).
				WithDetails(map[string]any{"needBytes": v.SizeBytes, "pendingBytes": pending, "freeBytes": free})
		}
	}
	engine := r.Engine
	if engine == "" {
		engine = d.Engine
	}
	modality := d.Modality
	if engine != d.Engine {
		modality = modalityOf(engine, d.PipelineTag)
	}
	files, _ := json.Marshal(v.Files)
	now := time.Now().UTC()
	row := &jobRow{
		ID: uuid.NewString(), Repo: d.ID, Engine: engine, VariantID: v.ID, LogicalID: r.LogicalID, Modality: modality,
		State: StateQueued, Files: string(files), BytesTotal: v.SizeBytes, CreatedAt: now, UpdatedAt: now,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, apperr.ErrUnavailable.Msg("the inference plane is shutting down")
	}
	// Checked again under the lock: two installs of one logical id must not both start.
	if err := s.logicalIDFree(ctx, r.LogicalID); err != nil {
		return nil, err
	}
	if err := s.opts.DB.WithContext(ctx).Create(row).Error; err != nil {
		return nil, err
	}
	jctx, cancel := context.WithCancelCause(context.Background())
	aj := &activeJob{cancel: cancel, done: make(chan struct{})}
	s.active[row.ID] = aj
	s.wg.Add(1)
	go s.run(jctx, row, v.Files, aj)
	return row.job(), nil
}

// pendingBytes is what live jobs have yet to write.
func (s *Service) pendingBytes(ctx context.Context) (int64, error) {
	var rows []jobRow
	if err := s.opts.DB.WithContext(ctx).Select("id", "bytes_done", "bytes_total").Where("state IN ?", liveStates).Find(&rows).Error; err != nil {
		return 0, err
	}
	var n int64
	for _, r := range rows {
		done := r.BytesDone
		s.mu.Lock()
		if aj := s.active[r.ID]; aj != nil {
			done = max(done, aj.bytes.Load())
		}
		s.mu.Unlock()
		n += max(0, r.BytesTotal-done)
	}
	return n, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// logicalIDFree is 409 logical_id_exists when id is registered or a live job installs it.
func (s *Service) logicalIDFree(ctx context.Context, id string) error {
	ok, err := s.opts.Registry.Exists(ctx, id)
	if err != nil {
		return err
	}
	if ok {
		return ErrLogicalIDExists.Msg("logical id %q is already registered (DELETE /admin/models/{id} first, or pick another)", id)
	}
	var n int64
	if err := s.opts.DB.WithContext(ctx).Model(&jobRow{}).Where("logical_id = ? AND state IN ?", id, liveStates).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return ErrLogicalIDExists.Msg("logical id %q is being installed by another job", id)
	}
	return nil
}

func (r *jobRow) job() *Job {
	j := &Job{
		JobID: r.ID, Repo: r.Repo, Engine: r.Engine, VariantID: r.VariantID, LogicalID: r.LogicalID, Modality: r.Modality,
		State: r.State, Error: r.Error, BytesDone: r.BytesDone, BytesTotal: r.BytesTotal, ModelPath: r.ModelPath,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Files: []File{},
	}
	if r.FinishedAt != nil {
		t := r.FinishedAt.UTC()
		j.FinishedAt = &t
	}
	_ = json.Unmarshal([]byte(r.Files), &j.Files)
	return j
}

// update writes fields of a job that is still live; a job that already ended (canceled,
// or failed "interrupted" by a restarted process) is left as it is.
func (s *Service) update(id string, fields map[string]any) error {
	fields["updated_at"] = time.Now().UTC()
	return s.opts.DB.Model(&jobRow{}).Where("id = ? AND state IN ?", id, liveStates).Updates(fields).Error
}

func (s *Service) finish(id, state, msg string, done int64) {
	now := time.Now().UTC()
	if err := s.update(id, map[string]any{"state": state, "error": msg, "bytes_done": done, "finished_at": now}); err != nil {
		s.opts.Logger.Error().Err(err).Str("job", id).Msg("catalog: recording the end of a job")
	}
}

// modelDir is DataDir/models/<owner>/<name>.
func (s *Service) modelDir(repo string) string {
	return filepath.Join(s.opts.DataDir, "models", filepath.FromSlash(repo))
}

// target is where a hub file lands, checked to stay inside the repository folder.
func (s *Service) target(repo, name string) (string, error) {
	if !ValidRepo(repo) || !SafeFileName(name) {
		return "", fmt.Errorf("unsafe file name %q", name)
	}
	dir := s.modelDir(repo)
	p := filepath.Join(dir, filepath.FromSlash(name))
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("unsafe file name %q", name)
	}
	return p, nil
}

func (s *Service) run(ctx context.Context, row *jobRow, files []File, aj *activeJob) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.active, row.ID)
		s.mu.Unlock()
		close(aj.done)
	}()
	log := s.opts.Logger.With().Str("job", row.ID).Str("repo", row.Repo).Logger()
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		s.ended(row.ID, ctx, nil, 0)
		return
	}
	if err := s.update(row.ID, map[string]any{"state": StateDownloading}); err != nil {
		log.Error().Err(err).Msg("catalog: job state")
	}
	aj.started.Store(time.Now().UnixNano())
	var written []string
	var first string
	for i, f := range files {
		if i > 0 {
			// The next part of a split model: back from verifying to downloading.
			_ = s.update(row.ID, map[string]any{"state": StateDownloading})
		}
		dst, err := s.target(row.Repo, f.Name)
		if err == nil {
			err = s.fetch(ctx, row, f, dst, aj)
		}
		if err != nil {
			for _, p := range written {
				_ = os.Remove(p)
			}
			s.ended(row.ID, ctx, err, aj.bytes.Load())
			if ctx.Err() == nil {
				log.Warn().Err(err).Msg("catalog: download failed")
			}
			return
		}
		written = append(written, dst)
		if first == "" {
			first = dst
		}
	}
	// The first file is what the engine loads (llama.cpp finds the other split parts).
	abs, err := filepath.Abs(first)
	if err != nil {
		abs = first
	}
	if err := s.update(row.ID, map[string]any{"model_path": abs, "bytes_done": aj.bytes.Load()}); err != nil {
		log.Error().Err(err).Msg("catalog: job path")
	}
	if err := s.register(ctx, row, abs); err != nil {
		s.ended(row.ID, ctx, err, aj.bytes.Load())
		return
	}
	s.finish(row.ID, StateCompleted, "", aj.bytes.Load())
	log.Info().Str("logical_id", row.LogicalID).Msg("catalog: model installed")
}

func (s *Service) register(ctx context.Context, row *jobRow, path string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	ok, err := s.opts.Registry.Exists(ctx, row.LogicalID)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("logical id %q was registered while downloading; the files are kept at %s", row.LogicalID, path)
	}
	if err := s.opts.Registry.RegisterLocal(ctx, row.LogicalID, row.Engine, path, row.Modality); err != nil {
		return fmt.Errorf("registering %q: %w", row.LogicalID, err)
	}
	return nil
}

// ended records a job that stopped before completing: canceled, interrupted or failed.
func (s *Service) ended(id string, ctx context.Context, err error, done int64) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCanceled):
		s.finish(id, StateCanceled, "", done)
	case errors.Is(cause, errShutdown):
		s.finish(id, StateFailed, "interrupted", done)
	default:
		msg := "failed"
		if err != nil {
			msg = err.Error()
		}
		s.finish(id, StateFailed, msg, done)
	}
}

// progressEvery is how often the running byte count is written to the database.
const progressEvery = time.Second

// fetch streams one file to dst.part, checks its size and hash, and renames it into place;
// the partial file is removed on any failure.
func (s *Service) fetch(ctx context.Context, row *jobRow, f File, dst string, aj *activeJob) (err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("creating the model folder: %w", err)
	}
	part := dst + ".part"
	out, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Base(part), err)
	}
	defer func() {
		if out != nil {
			_ = out.Close()
		}
		if err != nil {
			_ = os.Remove(part)
		}
	}()
	// A hub that stops sending (before answering or mid-body) ends the transfer after
	// StallTimeout instead of holding a download slot forever.
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	stall := time.AfterFunc(s.opts.StallTimeout, func() { stop(errStalled) })
	defer stall.Stop()
	stalled := func() error {
		if errors.Is(context.Cause(rctx), errStalled) && ctx.Err() == nil {
			return fmt.Errorf("downloading %s: the hub sent nothing for %s", f.Name, s.opts.StallTimeout)
		}
		return nil
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, s.hub.fileURL(row.Repo, f.Name), nil)
	if err != nil {
		return err
	}
	resp, err := s.hub.client.Do(req)
	if err != nil {
		if e := stalled(); e != nil {
			return e
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("downloading %s: the hub could not be reached", f.Name)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("downloading %s: the hub answered %d", f.Name, resp.StatusCode)
	}
	h := sha256.New()
	var n int64
	buf := make([]byte, 256<<10)
	last := time.Now()
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			stall.Reset(s.opts.StallTimeout)
			if f.Size > 0 && n+int64(k) > f.Size {
				return fmt.Errorf("downloading %s: larger than the %d bytes the hub announced", f.Name, f.Size)
			}
			if _, werr := out.Write(buf[:k]); werr != nil {
				return fmt.Errorf("writing %s: %w", filepath.Base(part), werr)
			}
			h.Write(buf[:k])
			n += int64(k)
			aj.bytes.Add(int64(k))
			if time.Since(last) >= progressEvery {
				last = time.Now()
				_ = s.update(row.ID, map[string]any{"bytes_done": aj.bytes.Load()})
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if e := stalled(); e != nil {
				return e
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("downloading %s: the transfer broke off after %d bytes", f.Name, n)
		}
	}
	if err := s.update(row.ID, map[string]any{"state": StateVerifying, "bytes_done": aj.bytes.Load()}); err != nil {
		return err
	}
	if f.Size > 0 && n != f.Size {
		return fmt.Errorf("verifying %s: got %d bytes, the hub announced %d", f.Name, n, f.Size)
	}
	if f.SHA256 != "" {
		if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
			return fmt.Errorf("verifying %s: sha256 %s does not match the hub's %s", f.Name, got, f.SHA256)
		}
	}
	if err := out.Sync(); err != nil {
		return err
	}
	cerr := out.Close()
	out = nil
	if cerr != nil {
		return cerr
	}
	if err := os.Rename(part, dst); err != nil {
		return fmt.Errorf("moving %s into place: %w", f.Name, err)
	}
	return nil
}

// recover fails the jobs a previous process left live (their transfers are gone) and
// removes the partial files a crash left behind.
func (s *Service) recover(ctx context.Context) error {
	var rows []jobRow
	if err := s.opts.DB.WithContext(ctx).Where("state IN ?", liveStates).Find(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		var files []File
		_ = json.Unmarshal([]byte(r.Files), &files)
		for _, f := range files {
			if p, err := s.target(r.Repo, f.Name); err == nil {
				_ = os.Remove(p + ".part")
			}
		}
	}
	now := time.Now().UTC()
	return s.opts.DB.WithContext(ctx).Model(&jobRow{}).Where("state IN ?", liveStates).
		Updates(map[string]any{"state": StateFailed, "error": "interrupted", "updated_at": now, "finished_at": now}).Error
}

// Jobs lists jobs, newest first (at most 200).
func (s *Service) Jobs(ctx context.Context) ([]*Job, error) {
	var rows []jobRow
	if err := s.opts.DB.WithContext(ctx).Order("created_at DESC, id DESC").Limit(200).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]*Job, 0, len(rows))
	for i := range rows {
		out = append(out, s.live(rows[i].job()))
	}
	return out, nil
}

// Job reads one job.
func (s *Service) Job(ctx context.Context, id string) (*Job, error) {
	var r jobRow
	err := s.opts.DB.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if database.IsNotFound(err) {
		return nil, ErrDownloadNotFound.Msg("no download job %q", clip(id))
	}
	if err != nil {
		return nil, err
	}
	return s.live(r.job()), nil
}

// live overlays the in-memory byte count and rate of a running job.
func (s *Service) live(j *Job) *Job {
	s.mu.Lock()
	aj := s.active[j.JobID]
	s.mu.Unlock()
	if aj == nil || !slices.Contains(liveStates, j.State) {
		return j
	}
	if b := aj.bytes.Load(); b > j.BytesDone {
		j.BytesDone = b
	}
	if st := aj.started.Load(); st > 0 {
		if el := time.Since(time.Unix(0, st)); el > 0 {
			j.BytesPerSecond = int64(float64(j.BytesDone) / el.Seconds())
		}
	}
	return j
}

// Cancel stops a live job, removes its partial file and answers it canceled.
func (s *Service) Cancel(ctx context.Context, id string) (*Job, error) {
	j, err := s.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(liveStates, j.State) {
		return nil, ErrDownloadFinished.Msg("download job %s already ended (%s)", j.JobID, j.State).WithDetails(map[string]any{"state": j.State})
	}
	s.mu.Lock()
	aj := s.active[id]
	s.mu.Unlock()
	if aj != nil {
		aj.cancel(errCanceled)
		select {
		case <-aj.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		// Live in the table but not running here (cannot outlive recover): end it anyway.
		s.finish(id, StateCanceled, "", j.BytesDone)
	}
	return s.Job(ctx, id)
}
