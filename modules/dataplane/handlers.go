package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/httpx"
)

// modelObject is a logical id in the OpenAI model-object shape.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func toModelObject(t Target) modelObject {
	var created int64
	if !t.CreatedAt.IsZero() {
		created = t.CreatedAt.Unix()
	}
	return modelObject{ID: t.LogicalID, Object: "model", Created: created, OwnedBy: "svc"}
}

func (m *Module) listModels(c echo.Context) error {
	targets, err := m.models.List(c.Request().Context())
	if err != nil {
		return err
	}
	data := make([]modelObject, 0, len(targets))
	for _, t := range targets {
		data = append(data, toModelObject(t))
	}
	sort.Slice(data, func(i, j int) bool { return data[i].ID < data[j].ID })
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (m *Module) getModel(c echo.Context) error {
	// Ids may hold "/" (org/model), sent percent-encoded; echo hands the raw segment over.
	id, err := url.PathUnescape(c.Param("id"))
	if err != nil {
		return apperr.Invalid("model id in the path is not validly percent-encoded")
	}
	t, err := m.models.Lookup(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toModelObject(t))
}

// forwardJSON reads a JSON request, binds its model and sends it upstream with the model
// rewritten (and max_tokens capped when capTokens). Every other member is sent as the
// client wrote it.
func (m *Module) forwardJSON(c echo.Context, path, modality string, capTokens bool) (*exchange, error) {
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, m.jsonLimit)
	raw, err := httpx.ReadBody(c)
	if err != nil {
		return nil, err
	}
	obj, err := parseObject(raw)
	if err != nil {
		return nil, err
	}
	id, err := obj.stringField("model")
	if err != nil {
		return nil, err
	}
	if capTokens {
		if err := obj.checkTokens(); err != nil {
			return nil, err
		}
	}
	t, up, err := m.bind(c.Request().Context(), id, modality)
	if err != nil {
		return nil, err
	}
	obj.set("model", encodeString(up.Model))
	if capTokens {
		_ = obj.capTokens(up.MaxTokens) // types were checked above
	}
	return m.send(c, t, up, path, "application/json", bytes.NewReader(obj.bytes()))
}

// chatCompletions relays streaming and non-streaming completions; message content (text
// and image_url parts alike) is passed through untouched.
func (m *Module) chatCompletions(c echo.Context) error {
	x, err := m.forwardJSON(c, "/chat/completions", ModalityChat, true)
	if err != nil {
		return err
	}
	defer x.close()
	return m.relay(c, x)
}

func (m *Module) embeddings(c echo.Context) error {
	x, err := m.forwardJSON(c, "/embeddings", ModalityEmbeddings, false)
	if err != nil {
		return err
	}
	defer x.close()
	return m.relay(c, x)
}

// speech answers the upstream's audio bytes with its content type. The audio is read
// whole before answering so that an empty or aborted synthesis becomes a 502
// speech_failed instead of a truncated 200.
func (m *Module) speech(c echo.Context) error {
	x, err := m.forwardJSON(c, "/audio/speech", ModalitySpeech, false)
	if err != nil {
		if ae := upstreamFailure(err); ae != nil {
			return ErrSpeechFailed.Msg("speech synthesis failed upstream: %s; try rephrasing the input (shorter sentences, plain words)", ae.Message).WithDetails(ae.Details)
		}
		return err
	}
	defer x.close()
	audio, rerr := io.ReadAll(io.LimitReader(x.body, m.mediaLimit+1))
	switch {
	case rerr != nil && x.wd.timedOut():
		return ErrUpstreamTimeout.Msg("the upstream of model %s stopped sending audio for %s (SERVICE_UPSTREAM_TIMEOUT)", quote(x.target.LogicalID), m.timeout).Wrap(rerr)
	case rerr != nil:
		if c.Request().Context().Err() != nil {
			return ErrClientGone.Wrap(rerr)
		}
		return ErrSpeechFailed.Msg("speech synthesis for model %s was aborted after %d bytes; try rephrasing the input (shorter sentences, plain words)", quote(x.target.LogicalID), len(audio)).Wrap(rerr)
	case len(audio) == 0:
		return ErrSpeechFailed.Msg("speech synthesis for model %s produced no audio; try rephrasing the input (shorter sentences, plain words)", quote(x.target.LogicalID))
	case int64(len(audio)) > m.mediaLimit:
		return ErrUpstream.Msg("the speech audio of model %s is larger than %d bytes", quote(x.target.LogicalID), m.mediaLimit)
	}
	ct := x.resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/octet-stream"
	}
	c.Response().Header().Set("Content-Length", fmt.Sprint(len(audio)))
	return c.Blob(http.StatusOK, ct, audio)
}

// upstreamFailure returns the error when it is an upstream 5xx (the engine failed), nil
// otherwise.
func upstreamFailure(err error) *apperr.Error {
	if !errors.Is(err, ErrUpstream) {
		return nil
	}
	e := apperr.From(err)
	if e == nil || e.Status < 500 {
		return nil
	}
	return e
}
