package dataplane

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
	"github.com/svc-dev/svc/platform/httpx"
)

// maxFormField bounds a non-file field of the transcription form (prompt, language, ...).
const maxFormField = 1 << 20

// formPart is a part read before the upstream request could start.
type formPart struct {
	header textproto.MIMEHeader
	name   string
	value  []byte   // fields
	spool  *os.File // files that arrived before the model field
}

// transcriptions forwards the multipart form with its model field rewritten. When the
// model field precedes the file (as curl -F and most SDK forms send it), the file streams
// through to the upstream as it is received; a file that arrives before the model field is
// spooled to a temporary file first, because the upstream is not known until then.
func (m *Module) transcriptions(c echo.Context) error {
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, m.uploadLimit)
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return apperr.Invalid("the request must be multipart/form-data with the fields model and file")
	}
	mr := multipart.NewReader(r.Body, params["boundary"])

	var parts []*formPart
	defer func() {
		for _, p := range parts {
			if p.spool != nil {
				p.spool.Close()
				os.Remove(p.spool.Name())
			}
		}
	}()
	var (
		model   string
		hasFile bool
		live    *multipart.Part // the file part to stream once the upstream is known
	)
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return formError(err)
		}
		name := p.FormName()
		if name == "" {
			continue // not form data; nothing to forward
		}
		if p.FileName() != "" {
			hasFile = true
			if model != "" {
				live = p
				break
			}
			fp, err := spool(p)
			if fp != nil {
				parts = append(parts, &formPart{header: p.Header, name: name, spool: fp})
			}
			if err != nil {
				return err
			}
			continue
		}
		v, err := io.ReadAll(io.LimitReader(p, maxFormField+1))
		if err != nil {
			return formError(err)
		}
		if len(v) > maxFormField {
			return apperr.Invalid("form field %q is longer than %d bytes", name, maxFormField)
		}
		if name == "model" {
			if model != "" {
				return apperr.Invalid("field \"model\" appears more than once")
			}
			if len(v) == 0 {
				return apperr.Invalid("field \"model\" must not be empty")
			}
			model = string(v)
		}
		parts = append(parts, &formPart{header: p.Header, name: name, value: v})
	}
	if model == "" {
		return apperr.Invalid("field \"model\" is required")
	}
	if !hasFile {
		return apperr.Invalid("field \"file\" (the audio file) is required")
	}
	t, up, err := m.bind(r.Context(), model, ModalityTranscription)
	if err != nil {
		return err
	}

	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan error, 1)
	go func() {
		err := writeForm(mw, parts, live, mr, up.Model)
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
		done <- err
	}()
	x, err := m.send(c, t, up, "/audio/transcriptions", mw.FormDataContentType(), pr)
	if err != nil {
		// The writer goroutine reads the client's body: it must finish before we return.
		pr.CloseWithError(errUpstreamDone)
		if werr := <-done; clientBodyError(werr) {
			return formError(werr) // the form broke off or grew too large, not the upstream
		}
		return err
	}
	defer func() {
		pr.CloseWithError(errUpstreamDone)
		<-done
		x.close()
	}()
	// The answer is relayed while the form may still be flowing (full duplex).
	return m.relay(c, x)
}

// clientBodyError reports whether the form writer failed on the client's side.
func clientBodyError(err error) bool {
	return err != nil && !errors.Is(err, errUpstreamDone) && !errors.Is(err, io.ErrClosedPipe)
}

// errUpstreamDone stops the form writer once the upstream has answered.
var errUpstreamDone = errors.New("upstream answered")

// writeForm writes the buffered parts, then the live file part and whatever follows it,
// with every model field carrying the provider-side name.
func writeForm(mw *multipart.Writer, parts []*formPart, live *multipart.Part, mr *multipart.Reader, model string) error {
	for _, p := range parts {
		w, err := mw.CreatePart(p.header)
		if err != nil {
			return err
		}
		switch {
		case p.name == "model":
			_, err = io.WriteString(w, model)
		case p.spool != nil:
			if _, err = p.spool.Seek(0, io.SeekStart); err == nil {
				_, err = io.Copy(w, p.spool)
			}
		default:
			_, err = w.Write(p.value)
		}
		if err != nil {
			return err
		}
	}
	if live == nil {
		return nil
	}
	for p := live; ; {
		w, err := mw.CreatePart(p.Header)
		if err != nil {
			return err
		}
		if p.FormName() == "model" {
			// A second model field after the file: the upstream sees ours only.
			if _, err := io.Copy(io.Discard, p); err != nil {
				return err
			}
			_, err = io.WriteString(w, model)
		} else {
			_, err = io.Copy(w, p)
		}
		if err != nil {
			return err
		}
		p, err = mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// spool copies a file part to a temporary file.
func spool(p *multipart.Part) (*os.File, error) {
	f, err := os.CreateTemp("", "svc-upload-*")
	if err != nil {
		return nil, apperr.ErrInternal.Wrap(fmt.Errorf("spool upload: %w", err))
	}
	if _, err := io.Copy(f, p); err != nil {
		return f, formError(err)
	}
	return f, nil
}

// formError names a failure to read the client's form.
func formError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return httpx.ErrTooLarge(mbe.Limit)
	}
	if ae := apperr.From(err); ae != nil {
		return ae
	}
	return apperr.Invalid("malformed multipart form: %s", clip(err.Error()))
}
