package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/svc-dev/svc/platform/apperr"
)

func newAgentsCmd() *cobra.Command {
	agents := &cobra.Command{
		Use:   "agents",
		Short: "Publish and inspect agents (graph IR documents) on the control plane",
	}
	addControlURLFlag(agents)
	agents.AddCommand(agentsPublish(), agentsList(), agentsGet())
	return agents
}

func agentsPublish() *cobra.Command {
	var version, name string
	var asJSON bool
	c := &cobra.Command{
		Use:   "publish FILE",
		Short: "Publish an IR file (- for stdin): a new agent, or a new version of the agent ir.id names",
		Long: "Publish an IR file. When no agent has the IR's id yet, the agent is created; otherwise\n" +
			"the IR becomes a new version (the next integer unless --version is given). Publishing the\n" +
			"same content under an existing version is a no-op; different content is refused.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			raw, err := readFileOrStdin(c, args[0])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			raw = bytes.TrimSpace(raw)
			var head struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(raw, &head); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("%s is not a JSON object: %v", args[0], err)}
			}
			body := map[string]any{"ir": json.RawMessage(raw)}
			if version != "" {
				body["version"] = version
			}
			createBody := map[string]any{"ir": json.RawMessage(raw)}
			for k, v := range body {
				createBody[k] = v
			}
			if name != "" {
				createBody["name"] = name
			}
			var out map[string]any
			err = cl.Do(c.Context(), http.MethodPost, "/agents", createBody, &out)
			action := "created agent"
			var ae *apperr.Error
			if errors.As(err, &ae) && ae.Code == "agent_exists" && head.ID != "" {
				action = "published"
				err = cl.Do(c.Context(), http.MethodPost, "/agents/"+url.PathEscape(head.ID)+"/versions", body, &out)
			}
			if err != nil {
				if errors.As(err, &ae) && ae.Details != nil {
					printProblems(c, ae.Details)
				}
				return cliError(err)
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), out)
			}
			id := out["id"]
			if id == nil {
				id = out["agent_id"]
			}
			fmt.Fprintf(c.OutOrStdout(), "%s %v version %v %v\n", action, id, out["version"], out["content_hash"])
			return nil
		},
	}
	c.Flags().StringVar(&version, "version", "", "version name (default: \"1\" for a new agent, else the next integer)")
	c.Flags().StringVar(&name, "name", "", "display name of a new agent (default: the IR's name)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the JSON answer")
	return c
}

// printProblems lists the validation problems of an invalid_ir answer on stderr.
func printProblems(c *cobra.Command, details any) {
	m, ok := details.(map[string]any)
	if !ok {
		return
	}
	ps, _ := m["problems"].([]any)
	for _, p := range ps {
		pm, _ := p.(map[string]any)
		node := ""
		if n, ok := pm["node"].(string); ok && n != "" {
			node = " [" + n + "]"
		}
		fmt.Fprintf(c.ErrOrStderr(), "  %v%s: %v\n", pm["path"], node, pm["message"])
	}
}

func agentsList() *cobra.Command {
	var asJSON bool
	var limit int
	var before string
	c := &cobra.Command{
		Use:   "list",
		Short: "List agents, newest first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			path := listPath("/agents", nil, limit, before)
			var out struct {
				Agents []struct {
					ID     string `json:"id"`
					Name   string `json:"name"`
					Latest *struct {
						Version     string `json:"version"`
						ContentHash string `json:"content_hash"`
					} `json:"latest"`
					CreatedAt string `json:"created_at"`
				} `json:"agents"`
				Next string `json:"next,omitempty"`
			}
			if err := cl.Do(c.Context(), http.MethodGet, path, nil, &out); err != nil {
				return cliError(err)
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tLATEST\tCONTENT HASH\tCREATED")
			for _, a := range out.Agents {
				v, h := "-", "-"
				if a.Latest != nil {
					v, h = a.Latest.Version, a.Latest.ContentHash
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, str(nonEmpty(a.Name)), v, h, a.CreatedAt)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if out.Next != "" {
				fmt.Fprintf(c.OutOrStdout(), "more: --before %s\n", out.Next)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the JSON answer")
	c.Flags().IntVar(&limit, "limit", 0, "page size (1-200, default 50)")
	c.Flags().StringVar(&before, "before", "", "cursor of the next page")
	return c
}

func nonEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func agentsGet() *cobra.Command {
	var version string
	c := &cobra.Command{
		Use:   "get ID",
		Short: "Show an agent with its versions, or one version's IR with --version",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			path := "/agents/" + url.PathEscape(args[0])
			if version != "" {
				path += "/versions/" + url.PathEscape(version)
			}
			var out any
			if err := cl.Do(c.Context(), http.MethodGet, path, nil, &out); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
	c.Flags().StringVar(&version, "version", "", "show this version's IR and canvas")
	return c
}
