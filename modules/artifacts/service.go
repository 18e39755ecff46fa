// Package artifacts stores uploaded blobs (audio, images, …) on the filesystem under
// $SERVICE_DATA_DIR/artifacts with their metadata in the database, and serves them back.
// Bodies are streamed in and out; no blob is ever held whole in memory.
package artifacts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/database"
)

// DefaultContentType is stored when an upload carries no Content-Type.
const DefaultContentType = "application/octet-stream"

// RefPrefix starts every artifact ref.
const RefPrefix = "art_"

// maxContentTypeLen bounds the stored media type (with its parameters).
const maxContentTypeLen = 255

// refPattern is the exact shape of a ref we mint: only such refs ever reach the filesystem,
// which is what rules out path traversal whatever the client sends.
var refPattern = regexp.MustCompile(`^art_[0-9a-f]{32}$`)

// staleTemp is how old an unfinished upload's temp file must be before a start sweeps it
// (younger ones may belong to another replica sharing the directory).
const staleTemp = 24 * time.Hour

// Artifact is the metadata of a stored blob.
type Artifact struct {
	Ref         string    `json:"ref"`
	ContentType string    `json:"contentType"`
	Bytes       int64     `json:"bytes"`
	SHA256      string    `json:"-"`
	CreatedAt   time.Time `json:"-"`
}

type artifactRow struct {
	Ref         string `gorm:"primaryKey"`
	ContentType string
	Bytes       int64
	Sha256      string `gorm:"column:sha256"`
	CreatedAt   time.Time
}

func (artifactRow) TableName() string { return "artifacts" }

// Service stores and opens artifacts.
type Service struct {
	db       *database.DB
	dir      string
	tmp      string
	maxBytes int64
	log      zerolog.Logger
}

// NewService prepares dir (created if missing) and removes temp files left by uploads that
// a crash interrupted long ago. maxBytes bounds one upload.
func NewService(db *database.DB, dir string, maxBytes int64, logger zerolog.Logger) (*Service, error) {
	if db == nil {
		return nil, errors.New("artifacts: nil database")
	}
	if dir == "" {
		return nil, errors.New("artifacts: empty directory")
	}
	if maxBytes <= 0 {
		return nil, errors.New("artifacts: size limit must be positive")
	}
	s := &Service{db: db, dir: dir, tmp: filepath.Join(dir, "tmp"), maxBytes: maxBytes, log: logger}
	if err := os.MkdirAll(s.tmp, 0o750); err != nil {
		return nil, fmt.Errorf("artifacts: create %s: %w", s.tmp, err)
	}
	s.sweepTemp()
	return s, nil
}

// MaxBytes is the upload size limit.
func (s *Service) MaxBytes() int64 { return s.maxBytes }

func (s *Service) sweepTemp() {
	entries, err := os.ReadDir(s.tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleTemp {
			continue
		}
		if err := os.Remove(filepath.Join(s.tmp, e.Name())); err == nil {
			s.log.Info().Str("file", e.Name()).Msg("removed stale artifact upload")
		}
	}
}

// ParseContentType validates an upload's Content-Type header and returns the media type to
// store: empty → application/octet-stream; otherwise it must parse as a media type.
func ParseContentType(header string) (string, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return DefaultContentType, nil
	}
	if len(header) > maxContentTypeLen {
		return "", ErrInvalidContentType.Msg("Content-Type is longer than %d characters", maxContentTypeLen)
	}
	mt, params, err := mime.ParseMediaType(header)
	if err != nil || !strings.Contains(mt, "/") {
		return "", ErrInvalidContentType
	}
	out := mime.FormatMediaType(mt, params)
	if out == "" {
		return "", ErrInvalidContentType
	}
	return out, nil
}

// ValidRef reports whether ref has the exact shape of a ref this service mints.
func ValidRef(ref string) bool { return refPattern.MatchString(ref) }

func newRef() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return RefPrefix + hex.EncodeToString(b[:])
}

// path is where a (validated) ref's bytes live; two-character fan-out keeps folders small.
func (s *Service) path(ref string) string {
	return filepath.Join(s.dir, ref[len(RefPrefix):len(RefPrefix)+2], ref)
}

// Put streams r into a new artifact of contentType (already validated). More than
// MaxBytes bytes gives payload_too_large and leaves nothing behind.
func (s *Service) Put(ctx context.Context, contentType string, r io.Reader) (Artifact, error) {
	tmp, err := os.CreateTemp(s.tmp, "upload-*")
	if err != nil {
		return Artifact{}, fmt.Errorf("artifacts: temp file: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := copyLimited(ctx, tmp, h, r, s.maxBytes)
	if err != nil {
		return Artifact{}, err
	}
	if err := tmp.Sync(); err != nil {
		return Artifact{}, fmt.Errorf("artifacts: sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Artifact{}, fmt.Errorf("artifacts: close: %w", err)
	}
	a := Artifact{Ref: newRef(), ContentType: contentType, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil)), CreatedAt: time.Now().UTC()}
	final := s.path(a.Ref)
	if err := os.MkdirAll(filepath.Dir(final), 0o750); err != nil {
		return Artifact{}, fmt.Errorf("artifacts: create folder: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return Artifact{}, fmt.Errorf("artifacts: move into place: %w", err)
	}
	committed = true
	row := artifactRow{Ref: a.Ref, ContentType: a.ContentType, Bytes: a.Bytes, Sha256: a.SHA256, CreatedAt: a.CreatedAt}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		_ = os.Remove(final) // a blob without a row is unreachable: do not keep it
		return Artifact{}, fmt.Errorf("artifacts: record metadata: %w", err)
	}
	return a, nil
}

// copyLimited copies r to w (hashing it into h) and fails with payload_too_large as soon as
// more than limit bytes arrive, without reading further.
func copyLimited(ctx context.Context, w io.Writer, h hash.Hash, r io.Reader, limit int64) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	lr := io.LimitReader(r, limit+1)
	for {
		if err := ctx.Err(); err != nil {
			return n, apperr.Invalid("upload interrupted").Wrap(err)
		}
		k, rerr := lr.Read(buf)
		if k > 0 {
			n += int64(k)
			if n > limit {
				return n, apperr.ErrPayloadTooLarge.Msg("artifact is larger than the limit of %d bytes", limit)
			}
			h.Write(buf[:k])
			if _, err := w.Write(buf[:k]); err != nil {
				return n, fmt.Errorf("artifacts: write: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			var mbe *http.MaxBytesError
			if errors.As(rerr, &mbe) {
				return n, apperr.ErrPayloadTooLarge.Msg("artifact is larger than the limit of %d bytes", limit)
			}
			return n, apperr.Invalid("upload interrupted: the request body could not be read").Wrap(rerr)
		}
	}
}

// Open returns the metadata and an open file of an artifact; the caller closes it. Any
// ref that is not exactly one we mint is not found, before the filesystem is touched.
func (s *Service) Open(ctx context.Context, ref string) (Artifact, *os.File, error) {
	if !ValidRef(ref) {
		return Artifact{}, nil, ErrArtifactNotFound
	}
	var row artifactRow
	if err := s.db.WithContext(ctx).Take(&row, "ref = ?", ref).Error; err != nil {
		if database.IsNotFound(err) {
			return Artifact{}, nil, ErrArtifactNotFound
		}
		return Artifact{}, nil, err
	}
	f, err := os.Open(s.path(ref))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// The row outlived its file (restored database, wiped folder): a missing blob.
			s.log.Warn().Str("ref", ref).Msg("artifact metadata present but its file is missing")
			return Artifact{}, nil, ErrArtifactNotFound
		}
		return Artifact{}, nil, fmt.Errorf("artifacts: open: %w", err)
	}
	return Artifact{Ref: row.Ref, ContentType: row.ContentType, Bytes: row.Bytes, SHA256: row.Sha256, CreatedAt: row.CreatedAt}, f, nil
}
