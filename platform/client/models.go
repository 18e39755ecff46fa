package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// Model checks that id is a registered logical id: nil when the inference plane knows it,
// an *apperr.Error with the plane's code (model_not_found, 404) when it does not, and
// inference_unavailable when the plane cannot be reached.
func (c *Inference) Model(ctx context.Context, id string) error {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/v1/models/"+url.PathEscape(id), nil)
	if err != nil {
		return ErrInferenceUnavailable.Msg("bad inference plane address").Wrap(err)
	}
	hreq.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrInferenceUnavailable.Wrap(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return errorFromResponse(resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}
