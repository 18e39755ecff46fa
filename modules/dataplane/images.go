package dataplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// images answers {created, data: [{b64_json, ...}]}. Upstreams that answer with URLs have
// each image fetched and base64-encoded, so clients always get the bytes.
func (m *Module) images(c echo.Context) error {
	x, err := m.forwardJSON(c, "/images/generations", ModalityImages, false)
	if err != nil {
		return err
	}
	defer x.close()
	raw, rerr := io.ReadAll(io.LimitReader(x.body, m.mediaLimit+1))
	if rerr != nil {
		if c.Request().Context().Err() != nil {
			return ErrClientGone.Wrap(rerr)
		}
		if x.wd.timedOut() {
			return ErrUpstreamTimeout.Msg("the upstream of model %s stopped sending for %s (SERVICE_UPSTREAM_TIMEOUT)", quote(x.target.LogicalID), m.timeout).Wrap(rerr)
		}
		return ErrUpstream.Msg("the upstream of model %s broke off its response", quote(x.target.LogicalID)).Wrap(rerr)
	}
	if int64(len(raw)) > m.mediaLimit {
		return ErrUpstream.Msg("the image response of model %s is larger than %d bytes", quote(x.target.LogicalID), m.mediaLimit)
	}
	var body map[string]json.RawMessage
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil || json.Unmarshal(body["data"], &items) != nil {
		return ErrUpstreamProtocol.Msg("the upstream of model %s answered an image response without a data list", quote(x.target.LogicalID))
	}
	for i, item := range items {
		if b64 := item["b64_json"]; len(b64) > 0 && string(b64) != "null" {
			delete(item, "url")
			continue
		}
		var u string
		if json.Unmarshal(item["url"], &u) != nil || u == "" {
			return ErrUpstreamProtocol.Msg("image %d of model %s has neither b64_json nor url", i, quote(x.target.LogicalID))
		}
		data, err := m.fetchImage(c.Request().Context(), x, u)
		if err != nil {
			return err
		}
		enc, _ := json.Marshal(base64.StdEncoding.EncodeToString(data))
		item["b64_json"] = enc
		delete(item, "url")
	}
	if _, ok := body["created"]; !ok {
		body["created"] = json.RawMessage(fmt.Sprint(time.Now().Unix()))
	}
	out, err := json.Marshal(items)
	if err != nil {
		return err
	}
	body["data"] = out
	return c.JSON(http.StatusOK, body)
}

// fetchImage downloads one generated image. data: URLs are decoded in place. The bearer
// token goes only to the upstream's own origin, never to a storage host named in a URL.
func (m *Module) fetchImage(ctx context.Context, x *exchange, raw string) ([]byte, error) {
	id := quote(x.target.LogicalID)
	if strings.HasPrefix(raw, "data:") {
		meta, payload, ok := strings.Cut(strings.TrimPrefix(raw, "data:"), ",")
		if !ok || !strings.HasSuffix(meta, ";base64") {
			return nil, ErrUpstreamProtocol.Msg("model %s returned an image data URL that is not base64", id)
		}
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return nil, ErrUpstreamProtocol.Msg("model %s returned an image data URL with invalid base64", id)
		}
		return b, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, ErrUpstreamProtocol.Msg("model %s returned an image URL that is not http(s)", id)
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, ErrUpstreamProtocol.Msg("model %s returned an unusable image URL", id).Wrap(err)
	}
	if base, err := url.Parse(x.up.BaseURL); err == nil && x.up.Bearer != "" && base.Scheme == u.Scheme && base.Host == u.Host {
		req.Header.Set("Authorization", "Bearer "+x.up.Bearer)
	}
	resp, err := m.fetcher.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, ErrUpstreamTimeout.Msg("fetching an image of model %s from %s timed out", id, redactURL(raw)).Wrap(err)
		}
		return nil, ErrUpstreamUnreachable.Msg("cannot fetch an image of model %s from %s", id, redactURL(raw)).Wrap(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, ErrUpstream.Msg("fetching an image of model %s from %s answered HTTP %d", id, redactURL(raw), resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, m.mediaLimit+1))
	if err != nil {
		return nil, ErrUpstream.Msg("fetching an image of model %s from %s broke off", id, redactURL(raw)).Wrap(err)
	}
	if int64(len(b)) > m.mediaLimit {
		return nil, ErrUpstream.Msg("an image of model %s is larger than %d bytes", id, m.mediaLimit)
	}
	if len(b) == 0 {
		return nil, ErrUpstream.Msg("an image of model %s at %s is empty", id, redactURL(raw))
	}
	return b, nil
}
