package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"sort"
	"strings"
)

// Sentinels are marshalled as plain strings and then swapped for bytes encoding/json would
// never produce (invalid UTF-8, lone surrogates), so bodies carry them exactly.
var sentinels = map[string]string{
	`"@@BADUTF8@@"`: "\"a\xff\xfeb\"",
	`"@@SURR@@"`:    `"\ud800x"`,
	`"@@BADKEY@@"`:  "\"\xff\xc0\"",
	`"@@NULKEY@@"`:  `"\u0000"`,
}

func withSentinels(b []byte) []byte {
	for k, v := range sentinels {
		b = bytes.ReplaceAll(b, []byte(k), []byte(v))
	}
	return b
}

// hostileValues replace one field of a valid body at a time; below the top level only the
// values a database or a type switch is likeliest to choke on, to bound the battery.
func hostileValues(depth int) []struct {
	what string
	v    any
} {
	storage := []struct {
		what string
		v    any
	}{
		// What a database column or a number conversion is likeliest to choke on.
		{"invalid UTF-8", "@@BADUTF8@@"},
		{"NUL escape", "a\x00b"},
		{"object with invalid UTF-8 key", map[string]any{"@@BADKEY@@": 1}},
		{"huge string", strings.Repeat("x", 64<<10)},
		{"int64 overflow", json.Number("-9223372036854775809")},
		{"out-of-range float", json.Number("1e400")},
		{"object", map[string]any{}},
	}
	if depth >= 1 {
		return storage
	}
	return append(storage, []struct {
		what string
		v    any
	}{
		{"lone surrogate", "@@SURR@@"},
		{"object with NUL key", map[string]any{"@@NULKEY@@": "v"}},
		{"unicode", "\u00e9\U0001F642\u202e\ufeff"},
		{"path traversal", "../../../../etc/passwd"},
		{"negative", -1},
		{"uint64 overflow", json.Number("18446744073709551616")},
		{"fraction", 0.5},
		{"bool", true},
		{"null", nil},
		{"array", []any{}},
		{"string", "str"},
		{"deep nesting", json.RawMessage(strings.Repeat("[", 400) + strings.Repeat("]", 400))},
	}...)
}

// mutate calls emit with the body where the value at every field path (objects by key,
// arrays at index 0, up to depth 4) is replaced by each hostile value.
func mutate(seed any, emit func(what string, body any)) {
	var walk func(cur any, set func(any) any, path string, depth int)
	walk = func(cur any, set func(any) any, path string, depth int) {
		switch c := cur.(type) {
		case map[string]any:
			keys := make([]string, 0, len(c))
			for k := range c {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				k := k
				child := c[k]
				setChild := func(v any) any {
					cp := make(map[string]any, len(c))
					for kk, vv := range c {
						cp[kk] = vv
					}
					cp[k] = v
					return set(cp)
				}
				for _, hv := range hostileValues(depth) {
					emit(path+"."+k+"="+hv.what, setChild(hv.v))
				}
				if depth < 3 {
					walk(child, setChild, path+"."+k, depth+1)
				}
			}
		case []any:
			if len(c) == 0 {
				return
			}
			setChild := func(v any) any {
				cp := append([]any{}, c...)
				cp[0] = v
				return set(cp)
			}
			for _, hv := range hostileValues(depth) {
				emit(path+"[0]="+hv.what, setChild(hv.v))
			}
			if depth < 3 {
				walk(c[0], setChild, path+"[0]", depth+1)
			}
		}
	}
	walk(seed, func(v any) any { return v }, "", 0)
}

func (h *harness) bodyBattery(pl *plane, op operation) {
	path := h.fill(op, nil)
	if op.method == "DELETE" {
		return
	}
	send := func(what string, body []byte, ctype string, headers map[string]string) {
		rq := h.decorate(request{plane: pl, method: op.method, route: op.route, path: path, body: body, ctype: ctype, headers: headers, what: what})
		h.checkNothingStored(op, rq)
		if op.route == "/runs/{id}/resume" && h.lastStatus == http.StatusAccepted {
			// The body was accepted and the run resumed: the next body gets a new waiting run.
			h.vals[op.route] = h.newWaitingRun()
			path = h.fill(op, nil)
			h.snapshots = map[string]string{}
		}
	}
	switch {
	case op.route == "/artifacts":
		h.artifactBattery(pl, op)
		return
	case strings.Contains(op.method+" "+op.route, "/v1/audio/transcriptions"):
		h.multipartBattery(pl, op)
		return
	}
	seed := h.seedBody(op)
	if seed == nil {
		seed = []byte("{}")
	}
	over := append([]byte(`{"x":"`), bytes.Repeat([]byte("y"), bodyLimit+1024)...)
	over = append(over, `"}`...)
	generic := []struct {
		what, body, ctype string
	}{
		{"no body", "", ""},
		{"empty JSON body", "", "application/json"},
		{"truncated object", "{", "application/json"},
		{"truncated member", `{"a":`, "application/json"},
		{"array", "[]", "application/json"},
		{"null", "null", "application/json"},
		{"string", `"s"`, "application/json"},
		{"number", "123", "application/json"},
		{"empty object", "{}", "application/json"},
		{"unknown field", `{"zz_unknown_field":1}`, "application/json"},
		{"NUL escape", `{"x":"\u0000"}`, "application/json"},
		{"raw NUL byte", "{\"x\":\"a\x00b\"}", "application/json"},
		{"invalid UTF-8", "{\"\xff\":\"\xfe\"}", "application/json"},
		{"lone surrogate", `{"x":"\udc00"}`, "application/json"},
		{"deep arrays", strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "application/json"},
		{"deep objects", strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000), "application/json"},
		{"BOM then seed", "\xef\xbb\xbf" + string(seed), "application/json"},
		{"seed then garbage", string(seed) + "garbage", "application/json"},
		{"seed as text/plain", string(seed), "text/plain"},
		{"seed as XML", string(seed), "application/xml"},
		{"seed as multipart without boundary", string(seed), "multipart/form-data"},
		{"seed as form", string(seed), "application/x-www-form-urlencoded"},
		{"seed with a garbage content type", string(seed), "\xff/\xfe"},
		{"over the body limit", string(over), "application/json"},
	}
	for _, g := range generic {
		var b []byte
		if g.what != "no body" {
			b = []byte(g.body)
		}
		send(g.what, b, g.ctype, nil)
	}
	if s, ok := h.seeds[op.method+" "+op.route]; ok {
		// Invalid UTF-8 and NUL first: they are what a database refuses, and a valid
		// variant later may consume a one-shot resource (the waiting run).
		mutate(s, func(what string, body any) {
			b, err := json.Marshal(body)
			if err != nil {
				h.t.Fatalf("%s: %v", what, err)
			}
			send("field "+what, withSentinels(b), "application/json", nil)
		})
	}
	if m, ok := h.seeds[op.method+" "+op.route].(map[string]any); ok && m["model"] != nil {
		// A legitimately unavailable upstream: the only 5xx the exceptions allow.
		dead := map[string]any{}
		for k, v := range m {
			dead[k] = v
		}
		dead["model"] = deadModel
		b, _ := json.Marshal(dead)
		send("dead model", b, "application/json", nil)
	}
	switch op.route {
	case "/agents/{id}/invoke":
		for _, a := range []string{"", "Bearer", "Bearer ", "Bearer x", "Basic " + invokeToken, "bearer " + invokeToken + "x", "Bearer " + strings.Repeat("t", 10000), "Bearer \xff\xfe"} {
			send("authorization "+short(a), seed, "application/json", map[string]string{"Authorization": a})
		}
	case "/hooks/{id}":
		for _, s := range []string{"", "sha256=", "sha256=zz", "sha256=" + strings.Repeat("0", 64), strings.Repeat("a", 10000), "sha512=" + strings.Repeat("0", 128), "\xff\xfe"} {
			send("signature "+short(s), seed, "application/json", map[string]string{"X-Service-Signature": s})
		}
	}
}

func (h *harness) artifactBattery(pl *plane, op operation) {
	cases := []struct {
		what, ctype string
		body        []byte
	}{
		{"no body", "application/octet-stream", nil},
		{"empty body", "image/png", []byte{}},
		{"invalid UTF-8 bytes", "text/plain", []byte("\xff\xfe\x00\x00")},
		{"no content type", "", []byte("abc")},
		{"garbage content type", "\xff/\xfe", []byte("abc")},
		{"content type with NUL escape", "text/plain; x=\\u0000", []byte("abc")},
		{"content type with unicode", "image/\u00e9\U0001F642", []byte("abc")},
		{"huge content type", "text/" + strings.Repeat("x", 6000), []byte("abc")},
		{"malformed content type", ";;;==", []byte("abc")},
		{"content type params", "text/plain; charset=\"\xff\"; a=b", []byte("abc")},
		{"over the artifact limit", "application/octet-stream", bytes.Repeat([]byte("z"), bodyLimit+1024)},
	}
	for _, c := range cases {
		rq := request{plane: pl, method: op.method, route: op.route, path: op.route, body: c.body, ctype: c.ctype, what: c.what}
		if c.ctype == "" {
			rq.headers = map[string]string{"Content-Type": ""}
		}
		h.check(rq)
	}
}

func (h *harness) multipartBattery(pl *plane, op operation) {
	form := func(fields map[string]string, file []byte, fileField string) ([]byte, string) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			_ = w.WriteField(k, fields[k])
		}
		if file != nil {
			fw, _ := w.CreateFormFile(fileField, "a.wav")
			_, _ = fw.Write(file)
		}
		_ = w.Close()
		return buf.Bytes(), w.FormDataContentType()
	}
	audio := []byte("RIFF\x00\x00\x00\x00WAVEfmt ")
	cases := []struct {
		what   string
		fields map[string]string
		file   []byte
		field  string
	}{
		{"valid", map[string]string{"model": "chat"}, audio, "file"},
		{"dead model", map[string]string{"model": deadModel}, audio, "file"},
		{"no file", map[string]string{"model": "chat"}, nil, "file"},
		{"no model", map[string]string{}, audio, "file"},
		{"file under another name", map[string]string{"model": "chat"}, audio, "other"},
		{"model with NUL", map[string]string{"model": "ch\x00at"}, audio, "file"},
		{"model with invalid UTF-8", map[string]string{"model": "\xff\xfe"}, audio, "file"},
		{"huge model", map[string]string{"model": strings.Repeat("m", 100_000)}, audio, "file"},
		{"hostile extras", map[string]string{"model": "chat", "temperature": "abc", "response_format": "\xff", "language": strings.Repeat("l", 5000)}, audio, "file"},
		{"empty file", map[string]string{"model": "chat"}, []byte{}, "file"},
		{"over the limit", map[string]string{"model": "chat"}, bytes.Repeat([]byte("a"), bodyLimit+1024), "file"},
	}
	for _, c := range cases {
		body, ctype := form(c.fields, c.file, c.field)
		h.check(request{plane: pl, method: op.method, route: op.route, path: op.route, body: body, ctype: ctype, what: c.what})
	}
	for _, raw := range []struct{ what, ctype, body string }{
		{"JSON instead of multipart", "application/json", `{"model":"chat"}`},
		{"boundary mismatch", "multipart/form-data; boundary=abc", "--xyz\r\n\r\n--xyz--"},
		{"truncated multipart", "multipart/form-data; boundary=abc", "--abc\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nchat"},
		{"empty multipart", "multipart/form-data; boundary=abc", ""},
		{"huge boundary", "multipart/form-data; boundary=" + strings.Repeat("b", 70), "--x"},
	} {
		h.check(request{plane: pl, method: op.method, route: op.route, path: op.route, body: []byte(raw.body), ctype: raw.ctype, what: raw.what})
	}
}

// runCreators are the routes that store a run; 422 from them is an execution failure that
// is recorded as a failed run, not a rejection.
var runCreators = map[string]bool{
	"POST /runs": true, "POST /graphs/runs": true, "POST /agents/{id}/runs": true,
	"POST /agents/{id}/invoke": true, "POST /agents/{id}/durable-runs": true, "POST /hooks/{id}": true,
}

// probes returns the GET paths whose answers a rejected request must leave unchanged.
func (h *harness) probes(pl *plane, op operation) []string {
	if op.method == http.MethodGet || op.method == http.MethodHead {
		return nil
	}
	key := op.method + " " + op.route
	if runCreators[key] {
		// Newest first: a stored run would be on top (a short page keeps the probe cheap).
		return []string{"/runs?limit=3"}
	}
	var out []string
	// The nearest collection listing above the route.
	segs := strings.Split(strings.TrimPrefix(op.route, "/"), "/")
	for i := len(segs); i >= 1; i-- {
		p := "/" + strings.Join(segs[:i], "/")
		if strings.Contains(p, "{") {
			continue
		}
		if m, ok := pl.spec[p]; ok {
			if _, ok := m["get"]; ok {
				if p == "/agents" || p == "/sessions" || p == "/connections" || p == "/triggers" || p == "/runs" || strings.HasPrefix(p, "/bench/") {
					// Newest first: something stored would be on top; a short page keeps the probe cheap.
					p += "?limit=5"
				}
				out = append(out, p)
				break
			}
		}
	}
	// The resource the valid path names, when it has a detail view.
	for _, detail := range []string{op.route, strings.TrimSuffix(op.route, "/turns"), strings.TrimSuffix(op.route, "/versions"), strings.TrimSuffix(op.route, "/resume")} {
		if detail == op.route && op.method == http.MethodPost && !strings.Contains(op.route, "{") {
			continue
		}
		if m, ok := pl.spec[detail]; ok && strings.Contains(detail, "{") {
			if _, ok := m["get"]; ok {
				out = append(out, h.fill(operation{method: "GET", route: detail, pathParams: paramRE.FindAllString(detail, -1)}, nil))
				break
			}
		}
	}
	return out
}

func rejected(key string, status int) bool {
	switch status {
	case 400, 401, 404, 405, 409, 413, 415:
		return true
	case 422:
		return !runCreators[key]
	}
	return false
}

// snapshot is what a probe answered: the sorted ids of a listing, or a detail's raw body.
func (h *harness) snapshot(pl *plane, path string) string {
	resp, err := h.send(request{plane: pl, method: "GET", path: path})
	if err != nil {
		return "error: " + err.Error()
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(resp.body, &doc) != nil {
		// Some listings are a bare array.
		doc = map[string]json.RawMessage{"": resp.body}
	}
	var ids []string
	listing := false
	for _, raw := range doc {
		var items []map[string]any
		if json.Unmarshal(raw, &items) != nil {
			continue
		}
		for _, it := range items {
			id, ok := it["id"]
			if !ok {
				id = it["name"]
			}
			if id != nil {
				listing = true
				ids = append(ids, fmt.Sprint(id))
			}
		}
	}
	if !listing {
		return fmt.Sprintf("%d %s", resp.status, resp.body)
	}
	sort.Strings(ids)
	return fmt.Sprintf("%d %s", resp.status, strings.Join(ids, ","))
}

// checkNothingStored sends rq and, when it was rejected, asserts the probes are unchanged.
// Snapshots are cached per probe and refreshed after every request, so each request costs
// one GET per probe.
func (h *harness) checkNothingStored(op operation, rq request) {
	probes := h.probes(rq.plane, op)
	for _, p := range probes {
		if _, ok := h.snapshots[rq.plane.name+p]; !ok {
			h.snapshots[rq.plane.name+p] = h.snapshot(rq.plane, p)
		}
	}
	resp := h.check(rq)
	h.lastStatus = resp.status
	key := op.method + " " + op.route
	for _, p := range probes {
		before := h.snapshots[rq.plane.name+p]
		after := h.snapshot(rq.plane, p)
		h.snapshots[rq.plane.name+p] = after
		if rejected(key, resp.status) && after != before {
			h.fail(fmt.Sprintf("%s %s: rejected with %d but GET %s changed", rq.plane.name, key, resp.status, strings.SplitN(p, "?", 2)[0]),
				"%s (%s): before %s / after %s", short(rq.path), rq.what, short(before), short(after))
		}
	}
}
