package sessions_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/modules/sessions"
	"github.com/svc-dev/svc/platform/database"
	"github.com/svc-dev/svc/platform/database/dbtest"
	"github.com/svc-dev/svc/platform/testkit"
)

func setup(t *testing.T, db *database.DB) *testkit.Server {
	t.Helper()
	svc, err := sessions.NewService(db)
	if err != nil {
		t.Fatal(err)
	}
	return testkit.New(t, testkit.Options{}, sessions.New(svc))
}

func TestSessions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		srv := setup(t, db)

		// Minted id, then ensure of an existing id: 200 and unchanged.
		r := srv.Do("POST", "/sessions", map[string]any{"metadata": map[string]any{"user": "ada"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		minted := r.Map(t)
		id := minted["id"].(string)
		if !strings.HasPrefix(id, "ses_") {
			t.Fatalf("minted id %q", id)
		}
		r = srv.Do("POST", "/sessions", map[string]any{"id": id, "metadata": map[string]any{"user": "bob"}})
		if r.Status != http.StatusOK || r.Map(t)["metadata"].(map[string]any)["user"] != "ada" {
			t.Fatalf("ensure existing: %d %s", r.Status, r.Body)
		}
		if r = srv.Do("POST", "/sessions", ""); r.Status != http.StatusCreated {
			t.Fatalf("empty body: %d %s", r.Status, r.Body)
		}
		if r = srv.Do("POST", "/sessions", map[string]any{"id": "chat-1"}); r.Status != http.StatusCreated || r.Map(t)["id"] != "chat-1" {
			t.Fatalf("chosen id: %d %s", r.Status, r.Body)
		}

		for _, tc := range []struct {
			name string
			body any
		}{
			{"bad charset", map[string]any{"id": "a/b"}},
			{"leading dash", map[string]any{"id": "-x"}},
			{"too long", map[string]any{"id": strings.Repeat("a", 129)}},
			{"metadata not object", map[string]any{"metadata": []int{1}}},
			{"unknown field", map[string]any{"idd": "x"}},
			{"id not string", map[string]any{"id": 5}},
		} {
			if r := srv.Do("POST", "/sessions", tc.body); r.Status != 400 || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", tc.name, r.Status, r.Body)
			}
		}

		// Turns: blank contents are refused and change nothing.
		for _, body := range []any{
			map[string]any{"user_content": "hi"},
			map[string]any{"user_content": " ", "assistant_content": "x"},
			map[string]any{"user_content": "x", "assistant_content": "\n\t"},
		} {
			if r := srv.Do("POST", "/sessions/chat-1/turns", body); r.Status != 400 || r.ErrorCode() != "invalid_request" {
				t.Errorf("blank turn %v: %d %s", body, r.Status, r.Body)
			}
		}
		if r := srv.Do("POST", "/sessions/nope/turns", map[string]any{"user_content": "a", "assistant_content": "b"}); r.Status != 404 || r.ErrorCode() != "session_not_found" {
			t.Fatalf("unknown session turn: %d %s", r.Status, r.Body)
		}
		for i := range 3 {
			r := srv.Do("POST", "/sessions/chat-1/turns", map[string]any{"user_content": fmt.Sprintf("q%d", i), "assistant_content": fmt.Sprintf("a%d", i)})
			if r.Status != http.StatusCreated {
				t.Fatalf("turn %d: %d %s", i, r.Status, r.Body)
			}
		}
		var detail sessions.Session
		srv.Do("GET", "/sessions/chat-1", nil).JSON(t, &detail)
		if detail.Turns != 3 || len(detail.Messages) != 6 {
			t.Fatalf("detail: %+v", detail)
		}
		for i, m := range detail.Messages {
			want := fmt.Sprintf("q%d", i/2)
			role := "user"
			if i%2 == 1 {
				want, role = fmt.Sprintf("a%d", i/2), "assistant"
			}
			if m.Role != role || m.Content != want {
				t.Fatalf("message %d = %+v, want %s %s", i, m, role, want)
			}
		}

		// Newest activity first: chat-1 had the latest turn.
		var page sessions.Page
		srv.Do("GET", "/sessions", nil).JSON(t, &page)
		if len(page.Sessions) != 3 || page.Sessions[0].ID != "chat-1" || page.Sessions[0].Turns != 3 {
			t.Fatalf("list: %+v", page)
		}
		// Paging walks every session once.
		seen := map[string]bool{}
		before := ""
		for range 5 {
			var p sessions.Page
			q := "/sessions?limit=1"
			if before != "" {
				q += "&before=" + before
			}
			srv.Do("GET", q, nil).JSON(t, &p)
			for _, s := range p.Sessions {
				if seen[s.ID] {
					t.Fatalf("session %s twice", s.ID)
				}
				seen[s.ID] = true
			}
			if p.Next == "" {
				break
			}
			before = p.Next
		}
		if len(seen) != 3 {
			t.Fatalf("paging saw %d sessions", len(seen))
		}
		if r := srv.Do("GET", "/sessions?before=zzz", nil); r.Status != 400 {
			t.Fatalf("bad cursor: %d", r.Status)
		}
		if r := srv.Do("GET", "/sessions?limit=0", nil); r.Status != 400 {
			t.Fatalf("bad limit: %d", r.Status)
		}

		// Delete removes the session and its turns.
		if r := srv.Do("DELETE", "/sessions/chat-1", nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if r := srv.Do("GET", "/sessions/chat-1", nil); r.Status != 404 || r.ErrorCode() != "session_not_found" {
			t.Fatalf("after delete: %d %s", r.Status, r.Body)
		}
		if r := srv.Do("DELETE", "/sessions/chat-1", nil); r.Status != 404 {
			t.Fatalf("delete twice: %d", r.Status)
		}
		var n int64
		db.Table("session_turns").Where("session_id = ?", "chat-1").Count(&n)
		if n != 0 {
			t.Fatalf("%d turns left after delete", n)
		}
		// Re-creating the id starts empty.
		srv.Do("POST", "/sessions", map[string]any{"id": "chat-1"})
		srv.Do("GET", "/sessions/chat-1", nil).JSON(t, &detail)
		if detail.Turns != 0 {
			t.Fatalf("recreated session has %d turns", detail.Turns)
		}
	})
}

func TestHistoryOrderAndBound(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *database.DB) {
		svc, _ := sessions.NewService(db)
		ctx := t.Context()
		id := "h"
		if _, _, err := svc.Ensure(ctx, sessions.EnsureInput{ID: &id}); err != nil {
			t.Fatal(err)
		}
		for i := range sessions.MaxHistoryTurns + 2 {
			if err := svc.Append(ctx, id, fmt.Sprintf("u%d", i), fmt.Sprintf("a%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		h, err := svc.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2*sessions.MaxHistoryTurns || h[0].Content != "u2" || h[len(h)-1].Content != fmt.Sprintf("a%d", sessions.MaxHistoryTurns+1) {
			t.Fatalf("history: %d messages, first %+v last %+v", len(h), h[0], h[len(h)-1])
		}
		if _, err := svc.History(ctx, "missing"); err == nil {
			t.Fatal("history of an unknown session succeeded")
		}
	})
}

func FuzzCheckID(f *testing.F) {
	for _, s := range []string{"ses_1", "a", "", "-a", "a/b", "a b", "ü", strings.Repeat("x", 200), "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if sessions.CheckID(id) != nil {
			return
		}
		if len(id) == 0 || len(id) > 128 || strings.ContainsAny(id, "/?#% \n\r\t") {
			t.Fatalf("accepted %q", id)
		}
	})
}
