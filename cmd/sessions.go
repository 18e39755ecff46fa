package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newSessionsCmd() *cobra.Command {
	s := &cobra.Command{
		Use:   "sessions",
		Short: "Inspect conversational sessions on the control plane",
	}
	addControlURLFlag(s)
	s.AddCommand(sessionsList(), sessionsGet())
	return s
}

func sessionsList() *cobra.Command {
	var limit int
	var before string
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List sessions, newest activity first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			path := listPath("/sessions", nil, limit, before)
			var raw json.RawMessage
			if err := cl.Do(c.Context(), http.MethodGet, path, nil, &raw); err != nil {
				return cliError(err)
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), raw)
			}
			var page struct {
				Sessions []struct {
					ID        string `json:"id"`
					Turns     int    `json:"turns"`
					UpdatedAt string `json:"updated_at"`
				} `json:"sessions"`
				Next string `json:"next"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTURNS\tLAST ACTIVITY")
			for _, s := range page.Sessions {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", s.ID, s.Turns, s.UpdatedAt)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printNext(c, page.Next)
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 0, "page size, 1-200 (default 50)")
	c.Flags().StringVar(&before, "before", "", "cursor of the next page")
	c.Flags().BoolVar(&asJSON, "json", false, "print the JSON answer")
	return c
}

func sessionsGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get SESSION_ID",
		Short: "Show a session with its messages in order",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := controlClient(c)
			if err != nil {
				return err
			}
			var out json.RawMessage
			if err := cl.Do(c.Context(), http.MethodGet, "/sessions/"+url.PathEscape(args[0]), nil, &out); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
}
