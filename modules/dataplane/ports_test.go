package dataplane

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/svc-dev/svc/platform/apperr"
)

type resolverFunc func(ctx context.Context, ref string) (string, error)

func (f resolverFunc) Resolve(ctx context.Context, ref string) (string, error) { return f(ctx, ref) }

func TestHostedBindingCredentialFailures(t *testing.T) {
	target := Target{LogicalID: "m", Binding: BindingHosted, BaseURL: "http://x/v1", Model: "p", CredentialRef: "secret://K"}
	cases := map[string]HostedBinding{
		"resolver error": {Credentials: resolverFunc(func(context.Context, string) (string, error) {
			return "", errors.New("store failed near value sk-leaky")
		})},
		"empty value": {Credentials: resolverFunc(func(context.Context, string) (string, error) { return "", nil })},
		"no resolver": {},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := b.Acquire(context.Background(), target)
			ae := apperr.From(err)
			if ae == nil || !errors.Is(err, ErrCredential) || ae.Status != 502 {
				t.Fatalf("err = %v, want 502 credential_error", err)
			}
			// The client-facing message names the ref and never the resolver's text.
			if !strings.Contains(ae.Message, "secret://K") || strings.Contains(ae.Message, "sk-leaky") {
				t.Errorf("message %q", ae.Message)
			}
		})
	}
	ok := HostedBinding{Credentials: resolverFunc(func(context.Context, string) (string, error) { return "v", nil })}
	up, err := ok.Acquire(context.Background(), target)
	if err != nil || up.Bearer != "v" || up.Model != "p" || up.BaseURL != "http://x/v1" {
		t.Errorf("Acquire = %+v, %v", up, err)
	}
}
