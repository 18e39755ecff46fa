package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

// runsDurable is `svc runs durable AGENT_ID`: start a durable run and print its id.
func runsDurable() *cobra.Command {
	var input, version, hash, session string
	c := &cobra.Command{
		Use:   "durable AGENT_ID",
		Short: "Start a durable run of a saved agent (needs SERVICE_DURABLE=1 on the control plane); prints the run id",
		Long: "Start a checkpointed run that survives restarts and may pause at human nodes. The run id\n" +
			"is printed at once; follow it with `svc runs get RUN_ID` and answer a human node with\n" +
			"`svc runs resume RUN_ID --input JSON`.",
		Example: "  svc runs durable review --input '{\"doc\":\"…\"}'",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			body := map[string]any{}
			if input != "" {
				if !json.Valid([]byte(input)) {
					return &exitError{code: 2, err: fmt.Errorf("--input must be JSON")}
				}
				body["input"] = json.RawMessage(input)
			}
			if version != "" {
				body["version"] = version
			}
			if hash != "" {
				body["content_hash"] = hash
			}
			if session != "" {
				body["session_id"] = session
			}
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			var out struct {
				RunID string `json:"run_id"`
			}
			if err := cl.Do(c.Context(), http.MethodPost, "/agents/"+url.PathEscape(args[0])+"/durable-runs", body, &out); err != nil {
				return cliError(err)
			}
			_, err = fmt.Fprintln(c.OutOrStdout(), out.RunID)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&input, "input", "", "the run input as JSON (default {})")
	f.StringVar(&version, "version", "", "pin a version (default: latest)")
	f.StringVar(&hash, "content-hash", "", "pin a content hash")
	f.StringVar(&session, "session", "", "session id: the finished turn is appended")
	return c
}

// runsResume is `svc runs resume RUN_ID --input JSON`: answer the human node a run waits at.
func runsResume() *cobra.Command {
	var input string
	c := &cobra.Command{
		Use:     "resume RUN_ID",
		Short:   "Resume a durable run waiting at a human node; --input (JSON) becomes that node's output",
		Example: "  svc runs resume run_0123 --input '{\"approved\":true}'\n  svc runs resume run_0123 --input '\"yes\"'",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if input == "" || !json.Valid([]byte(input)) {
				return &exitError{code: 2, err: fmt.Errorf("--input is required and must be JSON (a string needs quotes: '\"yes\"')")}
			}
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			if err := cl.Do(c.Context(), http.MethodPost, "/runs/"+url.PathEscape(args[0])+"/resume", map[string]any{"input": json.RawMessage(input)}, nil); err != nil {
				return cliError(err)
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "resumed %s\n", args[0])
			return err
		},
	}
	c.Flags().StringVar(&input, "input", "", "the human node's output, as JSON")
	return c
}
