package cmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newTriggersCmd() *cobra.Command {
	tr := &cobra.Command{
		Use:   "triggers",
		Short: "Manage schedule and webhook triggers on the control plane",
	}
	addControlURLFlag(tr)
	tr.AddCommand(triggersList(), triggersGet(), triggersCreate(), triggersSetEnabled(true), triggersSetEnabled(false), triggersRm())
	return tr
}

// cliTrigger is the part of a trigger the CLI prints.
type cliTrigger struct {
	ID          string          `json:"id"`
	AgentID     string          `json:"agent_id"`
	Kind        string          `json:"kind"`
	Version     string          `json:"version"`
	ContentHash string          `json:"content_hash"`
	Config      json.RawMessage `json:"config"`
	Enabled     bool            `json:"enabled"`
	HookPath    string          `json:"hook_path"`
	LastFiredAt string          `json:"last_fired_at"`
}

func triggerPath(id string) string { return "/triggers/" + url.PathEscape(id) }

func triggersList() *cobra.Command {
	var asJSON bool
	var agent string
	c := &cobra.Command{
		Use:   "list",
		Short: "List triggers, newest first (webhook secrets are never shown)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			var all []cliTrigger
			var raw []json.RawMessage
			before := ""
			for {
				q := url.Values{"limit": {"200"}}
				if before != "" {
					q.Set("before", before)
				}
				if agent != "" {
					q.Set("agent_id", agent)
				}
				var page struct {
					Triggers []json.RawMessage `json:"triggers"`
					Next     string            `json:"next"`
				}
				if err := cl.Do(c.Context(), http.MethodGet, "/triggers?"+q.Encode(), nil, &page); err != nil {
					return cliError(err)
				}
				for _, t := range page.Triggers {
					var ct cliTrigger
					if err := json.Unmarshal(t, &ct); err != nil {
						return err
					}
					all = append(all, ct)
					raw = append(raw, t)
				}
				if page.Next == "" {
					break
				}
				before = page.Next
			}
			if asJSON {
				if raw == nil {
					raw = []json.RawMessage{}
				}
				return printJSON(c.OutOrStdout(), raw)
			}
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tKIND\tAGENT\tPIN\tENABLED\tWHEN\tLAST FIRED")
			for _, t := range all {
				pin := t.Version
				if pin == "" {
					pin = t.ContentHash
				}
				when := t.HookPath
				if t.Kind == "schedule" {
					var cfg struct{ Cron, Timezone string }
					_ = json.Unmarshal(t.Config, &cfg)
					when = cfg.Cron + " (" + cfg.Timezone + ")"
				}
				last := t.LastFiredAt
				if last == "" {
					last = "-"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\t%s\t%s\n", t.ID, t.Kind, t.AgentID, pin, t.Enabled, when, last)
			}
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the JSON list")
	c.Flags().StringVar(&agent, "agent", "", "only the triggers of this agent")
	return c
}

func triggersGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get TRIGGER_ID",
		Short: "Print one trigger as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			var out json.RawMessage
			if err := cl.Do(c.Context(), http.MethodGet, triggerPath(args[0]), nil, &out); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
}

func triggersCreate() *cobra.Command {
	var agent, kind, version, hash, cronExpr, tz, input, secret, secretEnv string
	var secretStdin, disabled bool
	c := &cobra.Command{
		Use:   "create",
		Short: "Create a schedule (--cron) or webhook (--secret-env/--secret-stdin) trigger pinned to one agent version",
		Long: "Create a trigger that starts runs of one pinned agent version: exactly one of --version and\n" +
			"--content-hash. A schedule takes a standard 5-field cron expression read in --timezone\n" +
			"(default UTC) and an optional --input; a webhook takes its signing secret (at least 16\n" +
			"bytes), best from an environment variable or stdin so that it stays out of the process list.",
		Example: "  svc triggers create --agent greeter --version 1 --cron '0 9 * * 1-5' --timezone Europe/Paris --input '{\"name\":\"Ada\"}'\n" +
			"  HOOK_SECRET=… svc triggers create --agent greeter --version 1 --kind webhook --secret-env HOOK_SECRET",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if kind == "" {
				kind = "webhook"
				if cronExpr != "" {
					kind = "schedule"
				}
			}
			body := map[string]any{"agent_id": agent, "kind": kind}
			if version != "" {
				body["version"] = version
			}
			if hash != "" {
				body["content_hash"] = hash
			}
			if disabled {
				body["enabled"] = false
			}
			switch kind {
			case "schedule":
				if secret != "" || secretEnv != "" || secretStdin {
					return &exitError{code: 2, err: fmt.Errorf("--secret, --secret-env and --secret-stdin are for webhook triggers")}
				}
				cfg := map[string]any{"cron": cronExpr}
				if tz != "" {
					cfg["timezone"] = tz
				}
				if input != "" {
					if !json.Valid([]byte(input)) {
						return &exitError{code: 2, err: fmt.Errorf("--input must be JSON")}
					}
					cfg["input"] = json.RawMessage(input)
				}
				body["config"] = cfg
			case "webhook":
				if cronExpr != "" || tz != "" || input != "" {
					return &exitError{code: 2, err: fmt.Errorf("--cron, --timezone and --input are for schedule triggers; a webhook's input is the delivered body")}
				}
				s, err := readTriggerSecret(c, secret, secretEnv, secretStdin)
				if err != nil {
					return err
				}
				body["config"] = map[string]any{"secret": s}
			default:
				body["config"] = map[string]any{} // the service names the problem
			}
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			var out json.RawMessage
			if err := cl.Do(c.Context(), http.MethodPost, "/triggers", body, &out); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
	f := c.Flags()
	f.StringVar(&agent, "agent", "", "agent id (required)")
	f.StringVar(&kind, "kind", "", "schedule or webhook (default: schedule with --cron, else webhook)")
	f.StringVar(&version, "version", "", "pin a version")
	f.StringVar(&hash, "content-hash", "", "pin a content hash (sha256:…)")
	f.StringVar(&cronExpr, "cron", "", "schedule: 5-field cron expression, e.g. '*/15 * * * *'")
	f.StringVar(&tz, "timezone", "", "schedule: IANA zone the expression is read in (default UTC)")
	f.StringVar(&input, "input", "", "schedule: run input as JSON (default {})")
	f.StringVar(&secret, "secret", "", "webhook: signing secret (visible in the process list; prefer --secret-env or --secret-stdin)")
	f.StringVar(&secretEnv, "secret-env", "", "webhook: read the signing secret from this environment variable")
	f.BoolVar(&secretStdin, "secret-stdin", false, "webhook: read the signing secret from the first line of stdin")
	f.BoolVar(&disabled, "disabled", false, "create the trigger disabled")
	return c
}

// readTriggerSecret takes the webhook secret from exactly one of its three sources.
func readTriggerSecret(c *cobra.Command, flag, env string, stdin bool) (string, error) {
	n := 0
	for _, set := range []bool{flag != "", env != "", stdin} {
		if set {
			n++
		}
	}
	if n != 1 {
		return "", &exitError{code: 2, err: fmt.Errorf("a webhook needs its secret from exactly one of --secret, --secret-env and --secret-stdin")}
	}
	switch {
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok || v == "" {
			return "", &exitError{code: 2, err: fmt.Errorf("environment variable %s is unset or empty", env)}
		}
		return v, nil
	case stdin:
		line, err := bufio.NewReader(c.InOrStdin()).ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return "", &exitError{code: 2, err: fmt.Errorf("no secret on stdin: %v", err)}
		}
		return line, nil
	}
	return flag, nil
}

func triggersSetEnabled(enabled bool) *cobra.Command {
	use, short := "enable", "Enable a trigger (schedules resume from the next window; no backfill)"
	if !enabled {
		use, short = "disable", "Disable a trigger (webhook deliveries get 409 trigger_disabled; schedules stop)"
	}
	return &cobra.Command{
		Use:   use + " TRIGGER_ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			if err := cl.Do(c.Context(), http.MethodPatch, triggerPath(args[0]), map[string]bool{"enabled": enabled}, nil); err != nil {
				return cliError(err)
			}
			fmt.Fprintf(c.OutOrStdout(), "%sd %s\n", use, args[0])
			return nil
		},
	}
}

func triggersRm() *cobra.Command {
	return &cobra.Command{
		Use:   "rm TRIGGER_ID",
		Short: "Delete a trigger",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			if err := cl.Do(c.Context(), http.MethodDelete, triggerPath(args[0]), nil, nil); err != nil {
				return cliError(err)
			}
			fmt.Fprintf(c.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
}
