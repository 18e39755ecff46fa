package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/svc-dev/svc/platform/apperr"
)

// ErrAdminUnreachable is a plane that could not be reached by the admin client.
var ErrAdminUnreachable = apperr.Unavailable("unreachable", "service unreachable")

// maxAdminBody bounds an admin answer; listings are small.
const maxAdminBody = 16 << 20

// Admin is a small JSON client of a plane's admin API, used by the CLI.
type Admin struct {
	baseURL string
	http    *http.Client
}

// NewAdmin builds a client of the plane at baseURL (e.g. http://127.0.0.1:8081). A nil
// httpClient uses one with a 2-minute timeout (capabilities probes make several upstream calls).
func NewAdmin(baseURL string, httpClient *http.Client) *Admin {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 2 * time.Minute}
	}
	return &Admin{baseURL: strings.TrimRight(baseURL, "/"), http: httpClient}
}

// Do sends a request (body JSON-encoded unless nil) and decodes a 2xx answer into out
// (unless out is nil or the answer is empty). An error answer becomes an *apperr.Error with
// the envelope's status, code and message.
func (a *Admin) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.baseURL+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrAdminUnreachable.Msg("cannot reach %s (is the service running? set the URL with the flag or environment variable)", a.baseURL).Wrap(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminBody))
	if err != nil {
		return fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return adminError(resp.StatusCode, raw)
	}
	if out == nil || len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("the answer of %s %s is not the expected JSON: %w", method, path, err)
	}
	return nil
}

// adminError reads our envelope {"error":{"code","message"}} (or the OpenAI-style one).
func adminError(status int, raw []byte) error {
	var env struct {
		Error *errorEnvelope `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error != nil {
		code := env.Error.code()
		if code == "" {
			code = env.Error.Type
		}
		if code != "" {
			msg := env.Error.Message
			if msg == "" {
				msg = http.StatusText(status)
			}
			// Keep details (e.g. invalid_ir's problem list) so the CLI can show them.
			var det struct {
				Error struct {
					Details any `json:"details"`
				} `json:"error"`
			}
			_ = json.Unmarshal(raw, &det)
			return apperr.New(status, code, msg).WithDetails(det.Error.Details)
		}
	}
	return apperr.New(status, "http_"+fmt.Sprint(status), fmt.Sprintf("the service answered %d %s", status, http.StatusText(status)))
}

// AsAPIError returns err's code and message when it is an answer of the service.
func AsAPIError(err error) (code, message string, ok bool) {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return ae.Code, ae.Message, true
	}
	return "", "", false
}
