package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/svc-dev/svc/modules/triggers"
	"github.com/svc-dev/svc/platform/apperr"
)

// A signed webhook body that is valid JSON but does not decode (1e400 overflows float64)
// is the sender's error: 400 invalid_request, not a 500, and no run is started.
func TestTriggeredRunUndecodableInputIsInvalid(t *testing.T) {
	for _, in := range []string{`1e400`, `{"n":-1e400}`, `[1e999]`} {
		_, err := triggerRuns{}.StartTriggeredRun(context.Background(), triggers.RunRequest{TriggerID: "trg_x", AgentID: "a", Input: json.RawMessage(in)})
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "invalid_request" {
			t.Fatalf("%s: got %v, want 400 invalid_request", in, err)
		}
	}
}
