package cmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/svc-dev/svc/platform/apperr"
)

func newRunsCmd() *cobra.Command {
	runs := &cobra.Command{
		Use:   "runs",
		Short: "Start and inspect runs on the control plane",
	}
	addControlURLFlag(runs)
	runs.AddCommand(runsStart(), runsGet(), runsList(), runsDurable(), runsResume())
	return runs
}

func runsStart() *cobra.Command {
	var model, prompt, input, params, version, hash, session string
	var noStream, showReasoning bool
	c := &cobra.Command{
		Use:   "start [AGENT_ID]",
		Short: "Run a saved agent (AGENT_ID --input JSON) or a plain prompt (--model --prompt); prints answer tokens as they stream",
		Long: "Start a run and print its answer as it streams: the delta tokens of the llm nodes that\n" +
			"feed the output, or the output itself when there are none. Notes go to stderr; a failed\n" +
			"run prints its error code and message on stderr and exits 1. --no-stream prints the\n" +
			"immediate JSON result instead.",
		Example: "  svc runs start greeter --input '{\"name\":\"Ada\"}'\n" +
			"  svc runs start --model chat --prompt 'Say hello' --session ses_1",
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			base, err := controlBaseURL(c)
			if err != nil {
				return err
			}
			body := map[string]any{}
			var path string
			switch {
			case len(args) == 1:
				if model != "" || prompt != "" || params != "" {
					return &exitError{code: 2, err: fmt.Errorf("--model, --prompt and --params are for prompt runs, not agent runs")}
				}
				path = "/agents/" + url.PathEscape(args[0]) + "/runs"
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
			case model != "" && prompt != "":
				if input != "" || version != "" || hash != "" {
					return &exitError{code: 2, err: fmt.Errorf("--input, --version and --content-hash are for agent runs")}
				}
				path = "/runs"
				body["model"], body["input"] = model, prompt
				if params != "" {
					if !json.Valid([]byte(params)) {
						return &exitError{code: 2, err: fmt.Errorf("--params must be a JSON object")}
					}
					body["params"] = json.RawMessage(params)
				}
			default:
				return &exitError{code: 2, err: fmt.Errorf("give an AGENT_ID, or --model and --prompt")}
			}
			if session != "" {
				body["session_id"] = session
			}
			if noStream {
				body["stream"] = false
				cl, err := controlClient(c)
				if err != nil {
					return err
				}
				var out json.RawMessage
				if err := cl.Do(c.Context(), http.MethodPost, path, body, &out); err != nil {
					return cliError(err)
				}
				return printJSON(c.OutOrStdout(), out)
			}
			return streamRun(c, base+path, body, showReasoning)
		},
	}
	f := c.Flags()
	f.StringVar(&model, "model", "", "prompt run: logical model id registered in the inference plane")
	f.StringVar(&prompt, "prompt", "", "prompt run: the user message")
	f.StringVar(&params, "params", "", `prompt run: model params as JSON, e.g. '{"temperature":0.2,"maxTokens":200}'`)
	f.StringVar(&input, "input", "", "agent run: the run input as JSON (default {})")
	f.StringVar(&version, "version", "", "agent run: pin a version (default: latest)")
	f.StringVar(&hash, "content-hash", "", "agent run: pin a content hash")
	f.StringVar(&session, "session", "", "session id: history goes along (prompt runs) and the turn is appended")
	f.BoolVar(&noStream, "no-stream", false, "wait for the run and print the JSON result")
	f.BoolVar(&showReasoning, "reasoning", false, "print the model's reasoning tokens on stderr")
	return c
}

// streamRun posts a streamed run and prints its frames as they arrive.
func streamRun(c *cobra.Command, target string, body map[string]any, showReasoning bool) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(c.Context(), http.MethodPost, target, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("error: cannot reach the control plane (is it running? set --%s or SERVICE_CONTROL_URL): %v", controlFlag, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return cliError(envelopeError(resp))
	}
	out, errOut := c.OutOrStdout(), c.ErrOrStderr()
	printed := false
	var event string
	var data strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			continue
		case strings.HasPrefix(line, "data: "):
			data.WriteString(strings.TrimPrefix(line, "data: "))
			continue
		case line != "":
			continue // comments (": keepalive")
		}
		// A blank line ends the frame.
		ev, payload := event, data.String()
		event = ""
		data.Reset()
		if payload == "[DONE]" {
			return nil
		}
		var f struct {
			RunID  string          `json:"runId"`
			Status string          `json:"status"`
			Text   string          `json:"text"`
			Output json.RawMessage `json:"output"`
			Note   string          `json:"note"`
			Error  *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if payload == "" || json.Unmarshal([]byte(payload), &f) != nil {
			continue
		}
		switch ev {
		case "delta":
			fmt.Fprint(out, f.Text)
			printed = true
		case "reasoning":
			if showReasoning {
				fmt.Fprint(errOut, f.Text)
			}
		case "run":
			switch f.Status {
			case "streaming":
				fmt.Fprintf(errOut, "run %s\n", f.RunID)
			case "completed":
				if printed {
					fmt.Fprintln(out)
				} else {
					printOutput(out, f.Output)
				}
				if f.Note != "" {
					fmt.Fprintf(errOut, "note: %s\n", f.Note)
				}
			case "failed":
				if printed {
					fmt.Fprintln(out)
				}
				code, msg := "failed", ""
				if f.Error != nil {
					code, msg = f.Error.Code, f.Error.Message
				}
				return &exitError{code: 1, err: fmt.Errorf("error: run %s failed: %s: %s", f.RunID, code, msg)}
			}
		}
	}
	if err := sc.Err(); err != nil && c.Context().Err() == nil {
		return &exitError{code: 1, err: fmt.Errorf("error: the stream broke: %v", err)}
	}
	return &exitError{code: 1, err: fmt.Errorf("error: the stream ended before the run did")}
}

// printOutput prints a run output: a string as text, anything else as indented JSON.
func printOutput(w io.Writer, raw json.RawMessage) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		fmt.Fprintln(w, s)
		return
	}
	if len(raw) == 0 {
		fmt.Fprintln(w, "null")
		return
	}
	_ = printJSON(w, raw)
}

// envelopeError turns an error answer into an *apperr.Error with its code and message.
func envelopeError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details any    `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error.Code != "" {
		return apperr.New(resp.StatusCode, env.Error.Code, env.Error.Message).WithDetails(env.Error.Details)
	}
	return fmt.Errorf("the control plane answered %d", resp.StatusCode)
}

// controlBaseURL resolves the control plane URL like controlClient does.
func controlBaseURL(c *cobra.Command) (string, error) {
	if _, err := controlClient(c); err != nil {
		return "", err
	}
	v, _ := c.Flags().GetString(controlFlag)
	if v == "" {
		v = os.Getenv("SERVICE_CONTROL_URL")
	}
	if v == "" {
		v = "http://127.0.0.1:8080"
	}
	return strings.TrimRight(v, "/"), nil
}

func runsGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get RUN_ID",
		Short: "Show a run record (status, input, output, error, note, pins)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			var out json.RawMessage
			if err := cl.Do(c.Context(), http.MethodGet, "/runs/"+url.PathEscape(args[0]), nil, &out); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
}

func runsList() *cobra.Command {
	var limit int
	var before, agent, status, session, trigger string
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"agent_id": agent, "status": status, "session_id": session, "trigger_id": trigger} {
				if v != "" {
					q.Set(k, v)
				}
			}
			path := listPath("/runs", q, limit, before)
			var raw json.RawMessage
			if err := cl.Do(c.Context(), http.MethodGet, path, nil, &raw); err != nil {
				return cliError(err)
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), raw)
			}
			var page struct {
				Runs []struct {
					ID        string  `json:"id"`
					Status    string  `json:"status"`
					Kind      string  `json:"kind"`
					AgentID   *string `json:"agent_id"`
					Version   *string `json:"version"`
					Model     *string `json:"model"`
					CreatedAt string  `json:"created_at"`
					Error     *struct {
						Code string `json:"code"`
					} `json:"error"`
				} `json:"runs"`
				Next string `json:"next"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tKIND\tTARGET\tCREATED\tERROR")
			for _, r := range page.Runs {
				target := ""
				switch {
				case r.AgentID != nil:
					target = *r.AgentID
					if r.Version != nil {
						target += "@" + *r.Version
					}
				case r.Model != nil:
					target = *r.Model
				}
				code := ""
				if r.Error != nil {
					code = r.Error.Code
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Kind, target, r.CreatedAt, code)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printNext(c, page.Next)
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&limit, "limit", 0, "page size, 1-200 (default 50)")
	f.StringVar(&before, "before", "", "cursor of the next page (printed after a full page)")
	f.StringVar(&agent, "agent", "", "only runs of this agent")
	f.StringVar(&status, "status", "", "only runs in this status (created, streaming, waiting, completed, failed)")
	f.StringVar(&session, "session", "", "only runs of this session")
	f.StringVar(&trigger, "trigger", "", "only runs started by this trigger")
	f.BoolVar(&asJSON, "json", false, "print the JSON answer")
	return c
}
