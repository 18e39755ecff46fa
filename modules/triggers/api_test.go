package triggers

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
)

const secret1 = "s3cr3t-webhook-key-0001"

func TestCRUD(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		sch := b.create(t, scheduleBody("*/5 * * * *", map[string]any{"name": "Ada"}))
		if !idPattern.MatchString(sch.ID) || sch.Kind != KindSchedule || sch.Version != "1" || sch.ContentHash != "" || !sch.Enabled {
			t.Fatalf("schedule: %+v", sch)
		}
		if got := string(sch.Config); got != `{"cron":"*/5 * * * *","timezone":"UTC","input":{"name":"Ada"}}` {
			t.Fatalf("schedule config: %s", got)
		}
		wh := b.create(t, map[string]any{"agent_id": "greeter", "kind": "webhook", "content_hash": hashV1, "config": map[string]any{"secret": secret1}, "enabled": false})
		if wh.ContentHash != hashV1 || wh.Version != "" || wh.Enabled || wh.HookPath != "/hooks/"+wh.ID || string(wh.Config) != `{"secret":"***"}` {
			t.Fatalf("webhook: %+v %s", wh, wh.Config)
		}

		r := b.srv.Do("GET", "/triggers", nil)
		if r.Status != 200 || strings.Contains(string(r.Body), secret1) {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		var page Page
		r.JSON(t, &page)
		if len(page.Triggers) != 2 || page.Triggers[0].ID != wh.ID || page.Triggers[1].ID != sch.ID {
			t.Fatalf("list order: %+v", page)
		}
		if string(page.Triggers[0].Config) != `{"secret":"***"}` {
			t.Fatalf("listed webhook config: %s", page.Triggers[0].Config)
		}
		// Paging and the agent filter.
		page = Page{}
		b.srv.Do("GET", "/triggers?limit=1", nil).JSON(t, &page)
		if len(page.Triggers) != 1 || page.Next == "" {
			t.Fatalf("page 1: %+v", page)
		}
		next := page.Next
		page = Page{}
		b.srv.Do("GET", "/triggers?limit=1&before="+next, nil).JSON(t, &page)
		if len(page.Triggers) != 1 || page.Triggers[0].ID != sch.ID || page.Next != "" {
			t.Fatalf("page 2: %+v", page)
		}
		page = Page{}
		b.srv.Do("GET", "/triggers?agent_id=other", nil).JSON(t, &page)
		if len(page.Triggers) != 0 {
			t.Fatalf("filter: %+v", page)
		}

		r = b.srv.Do("GET", "/triggers/"+wh.ID, nil)
		if r.Status != 200 || strings.Contains(string(r.Body), secret1) {
			t.Fatalf("get: %d %s", r.Status, r.Body)
		}

		// PATCH enabled, then config.
		r = b.srv.Do("PATCH", "/triggers/"+wh.ID, `{"enabled":true}`)
		var got Trigger
		r.JSON(t, &got)
		if r.Status != 200 || !got.Enabled {
			t.Fatalf("patch enabled: %d %s", r.Status, r.Body)
		}
		got = Trigger{}
		r = b.srv.Do("PATCH", "/triggers/"+sch.ID, `{"config":{"cron":"0 9 * * 1-5","timezone":"Europe/Paris"}}`)
		r.JSON(t, &got)
		if r.Status != 200 || string(got.Config) != `{"cron":"0 9 * * 1-5","timezone":"Europe/Paris"}` || got.Version != "1" {
			t.Fatalf("patch config: %d %s", r.Status, r.Body)
		}

		r = b.srv.Do("DELETE", "/triggers/"+sch.ID, nil)
		if r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		for _, c := range []struct{ method, path string }{{"GET", "/triggers/" + sch.ID}, {"DELETE", "/triggers/" + sch.ID}, {"PATCH", "/triggers/" + sch.ID}, {"GET", "/triggers/nope"}} {
			r = b.srv.Do(c.method, c.path, `{"enabled":false}`)
			if r.Status != 404 || r.ErrorCode() != "trigger_not_found" {
				t.Fatalf("%s %s after delete: %d %s", c.method, c.path, r.Status, r.Body)
			}
		}
	})
}

func TestCreateValidation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		sched := func(cfg any) map[string]any {
			return map[string]any{"agent_id": "greeter", "kind": "schedule", "version": "1", "config": cfg}
		}
		cases := []struct {
			name   string
			body   any
			status int
			code   string
		}{
			{"malformed JSON", `{"agent_id":`, 400, "invalid_request"},
			{"not an object", `[1]`, 400, "invalid_request"},
			{"unknown field", `{"agent_id":"greeter","kind":"webhook","version":"1","config":{"secret":"` + secret1 + `"},"extra":1}`, 400, "invalid_request"},
			{"missing agent", map[string]any{"kind": "webhook", "version": "1", "config": map[string]any{"secret": secret1}}, 400, "invalid_request"},
			{"missing kind", map[string]any{"agent_id": "greeter", "version": "1", "config": map[string]any{"secret": secret1}}, 400, "invalid_request"},
			{"bad kind", map[string]any{"agent_id": "greeter", "kind": "email", "version": "1", "config": map[string]any{}}, 400, "invalid_request"},
			{"no pin", map[string]any{"agent_id": "greeter", "kind": "webhook", "config": map[string]any{"secret": secret1}}, 400, "invalid_pin"},
			{"both pins", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "1", "content_hash": hashV1, "config": map[string]any{"secret": secret1}}, 400, "invalid_pin"},
			{"empty version", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "", "config": map[string]any{"secret": secret1}}, 400, "invalid_pin"},
			{"malformed hash", map[string]any{"agent_id": "greeter", "kind": "webhook", "content_hash": "sha256:XYZ", "config": map[string]any{"secret": secret1}}, 400, "invalid_pin"},
			{"unknown agent", map[string]any{"agent_id": "nobody", "kind": "webhook", "version": "1", "config": map[string]any{"secret": secret1}}, 404, "agent_not_found"},
			{"unknown version", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "9", "config": map[string]any{"secret": secret1}}, 404, "version_not_found"},
			{"unknown hash", map[string]any{"agent_id": "greeter", "kind": "webhook", "content_hash": "sha256:" + strings.Repeat("0", 64), "config": map[string]any{"secret": secret1}}, 404, "version_not_found"},
			{"durable version, durable off", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "2", "config": map[string]any{"secret": secret1}}, 400, "durable_required"},
			{"webhook no config", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "1"}, 400, "invalid_request"},
			{"webhook no secret", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "1", "config": map[string]any{}}, 400, "invalid_request"},
			{"webhook empty secret", webhookBody(""), 400, "invalid_request"},
			{"webhook short secret", webhookBody("short"), 400, "invalid_request"},
			{"webhook placeholder secret", webhookBody("***"), 400, "invalid_request"},
			{"webhook secret not a string", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "1", "config": map[string]any{"secret": 123}}, 400, "invalid_request"},
			{"webhook unknown config key", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "1", "config": map[string]any{"secret": secret1, "cron": "* * * * *"}}, 400, "invalid_request"},
			{"schedule config not an object", sched("* * * * *"), 400, "invalid_request"},
			{"schedule unknown key", sched(map[string]any{"cron": "* * * * *", "secret": "x"}), 400, "invalid_request"},
			{"schedule no cron", sched(map[string]any{"input": map[string]any{}}), 400, "invalid_cron"},
			{"schedule input out of float range", `{"agent_id":"greeter","kind":"schedule","version":"1","config":{"cron":"* * * * *","input":{"n":1e400}}}`, 400, "invalid_request"},
			{"schedule blank cron", sched(map[string]any{"cron": "  "}), 400, "invalid_cron"},
			{"cron garbage", sched(map[string]any{"cron": "every day"}), 400, "invalid_cron"},
			{"cron six fields", sched(map[string]any{"cron": "0 * * * * *"}), 400, "invalid_cron"},
			{"cron out of range", sched(map[string]any{"cron": "61 * * * *"}), 400, "invalid_cron"},
			{"cron never fires (Feb 31)", sched(map[string]any{"cron": "0 0 31 2 *"}), 400, "invalid_cron"},
			{"cron never fires (Feb 30)", sched(map[string]any{"cron": "0 0 30 2 *"}), 400, "invalid_cron"},
			{"cron @every", sched(map[string]any{"cron": "@every 5m"}), 400, "invalid_cron"},
			{"cron TZ prefix", sched(map[string]any{"cron": "CRON_TZ=UTC * * * * *"}), 400, "invalid_cron"},
			{"cron not a string", sched(map[string]any{"cron": 5}), 400, "invalid_request"},
			{"bad timezone", sched(map[string]any{"cron": "* * * * *", "timezone": "Mars/Olympus"}), 400, "invalid_timezone"},
			{"empty timezone", sched(map[string]any{"cron": "* * * * *", "timezone": ""}), 400, "invalid_timezone"},
			{"Local timezone", sched(map[string]any{"cron": "* * * * *", "timezone": "Local"}), 400, "invalid_timezone"},
			{"path-like timezone", sched(map[string]any{"cron": "* * * * *", "timezone": "../../etc/passwd"}), 400, "invalid_timezone"},
			{"enabled not a bool", map[string]any{"agent_id": "greeter", "kind": "webhook", "version": "1", "config": map[string]any{"secret": secret1}, "enabled": "yes"}, 400, "invalid_request"},
		}
		for _, c := range cases {
			r := b.srv.Do("POST", "/triggers", c.body)
			if r.Status != c.status || r.ErrorCode() != c.code {
				t.Errorf("%s: got %d %s, want %d %s", c.name, r.Status, r.Body, c.status, c.code)
			}
			if strings.Contains(string(r.Body), secret1) {
				t.Errorf("%s: the secret is echoed: %s", c.name, r.Body)
			}
		}
		var page Page
		b.srv.Do("GET", "/triggers", nil).JSON(t, &page)
		if len(page.Triggers) != 0 {
			t.Fatalf("rejected creates stored something: %+v", page.Triggers)
		}
		// The accepted forms next to the refused ones.
		for _, cfg := range []map[string]any{
			{"cron": "0 0 29 2 *"}, // leap days do come
			{"cron": "@hourly"},
			{"cron": "0 9 * * MON-FRI", "timezone": "America/New_York", "input": "plain"},
		} {
			b.create(t, sched(cfg))
		}
	})
}

func TestDurableVersionAcceptedInDurableMode(t *testing.T) {
	b := setup(t, dbtest.Open(t, database.SQLite), setupOpts{durable: true})
	tr := b.create(t, map[string]any{"agent_id": "greeter", "kind": "webhook", "content_hash": hashV2, "config": map[string]any{"secret": secret1}})
	if tr.ContentHash != hashV2 {
		t.Fatalf("%+v", tr)
	}
}

func TestPatchValidation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		sch := b.create(t, scheduleBody("*/5 * * * *", nil))
		wh := b.create(t, webhookBody(secret1))
		cases := []struct {
			name, id, body, code string
		}{
			{"empty body", sch.ID, ``, "invalid_request"},
			{"empty object", sch.ID, `{}`, "invalid_request"},
			{"array", sch.ID, `[]`, "invalid_request"},
			{"malformed", sch.ID, `{"enabled":`, "invalid_request"},
			{"kind", sch.ID, `{"kind":"webhook"}`, "invalid_request"},
			{"agent_id", sch.ID, `{"agent_id":"other"}`, "invalid_request"},
			{"version", sch.ID, `{"version":"2"}`, "invalid_request"},
			{"content_hash", sch.ID, `{"content_hash":"` + hashV1 + `"}`, "invalid_request"},
			{"unknown with enabled", sch.ID, `{"enabled":false,"colour":"red"}`, "invalid_request"},
			{"id", sch.ID, `{"id":"trg_x"}`, "invalid_request"},
			{"enabled null", sch.ID, `{"enabled":null}`, "invalid_request"},
			{"enabled string", sch.ID, `{"enabled":"false"}`, "invalid_request"},
			{"bad cron with enabled", sch.ID, `{"enabled":false,"config":{"cron":"0 0 31 2 *"}}`, "invalid_cron"},
			{"bad timezone", sch.ID, `{"config":{"cron":"* * * * *","timezone":"Nowhere/City"}}`, "invalid_timezone"},
			{"webhook config for a schedule", sch.ID, `{"config":{"secret":"` + secret1 + `"}}`, "invalid_request"},
			{"schedule config for a webhook", wh.ID, `{"config":{"cron":"* * * * *"}}`, "invalid_request"},
			{"short secret", wh.ID, `{"config":{"secret":"short"}}`, "invalid_request"},
			{"null config", wh.ID, `{"config":null}`, "invalid_request"},
			{"invalid UTF-8 in the input", sch.ID, "{\"config\":{\"cron\":\"0 0 1 1 *\",\"input\":\"a\xff\xfeb\"}}", "invalid_request"},
		}
		for _, c := range cases {
			r := b.srv.Do("PATCH", "/triggers/"+c.id, c.body)
			if r.Status != 400 || r.ErrorCode() != c.code {
				t.Errorf("%s: got %d %s, want 400 %s", c.name, r.Status, r.Body, c.code)
			}
		}
		for _, before := range []Trigger{sch, wh} {
			var after Trigger
			b.srv.Do("GET", "/triggers/"+before.ID, nil).JSON(t, &after)
			if string(after.Config) != string(before.Config) || after.Enabled != before.Enabled || !after.UpdatedAt.Equal(before.UpdatedAt) {
				t.Fatalf("a refused PATCH changed %s: %+v → %+v", before.ID, before, after)
			}
		}
		// The webhook secret still verifies: nothing was re-encrypted.
		body := []byte(`{"name":"Ada"}`)
		if r := b.srv.Do("POST", "/hooks/"+wh.ID, body, SignatureHeader+": "+Sign([]byte(secret1), body)); r.Status != 202 {
			t.Fatalf("hook after refused patches: %d %s", r.Status, r.Body)
		}
	})
}

func TestPatchWebhookSecret(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		b := setup(t, db, setupOpts{})
		wh := b.create(t, webhookBody(secret1))
		body := []byte(`{}`)
		deliver := func(secret string) int {
			return b.srv.Do("POST", "/hooks/"+wh.ID, body, SignatureHeader+": "+Sign([]byte(secret), body)).Status
		}
		// "***" (what GET shows) keeps the stored secret.
		if r := b.srv.Do("PATCH", "/triggers/"+wh.ID, `{"config":{"secret":"***"},"enabled":true}`); r.Status != 200 {
			t.Fatalf("patch ***: %d %s", r.Status, r.Body)
		}
		if s := deliver(secret1); s != 202 {
			t.Fatalf("old secret after ***: %d", s)
		}
		const secret2 = "another-secret-of-enough-length"
		if r := b.srv.Do("PATCH", "/triggers/"+wh.ID, `{"config":{"secret":"`+secret2+`"}}`); r.Status != 200 || strings.Contains(string(r.Body), secret2) {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		if s := deliver(secret1); s != 401 {
			t.Fatalf("old secret after rotation: %d", s)
		}
		if s := deliver(secret2); s != 202 {
			t.Fatalf("new secret: %d", s)
		}
		if strings.Contains(b.logs.String(), secret1) || strings.Contains(b.logs.String(), secret2) {
			t.Fatal("a secret reached the logs")
		}
	})
}
