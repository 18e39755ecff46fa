package cmd

import (
	"fmt"
	"net/url"
	"os"

	"github.com/spf13/cobra"
	"github.com/svc-dev/svc/platform/client"
)

// controlFlag is the flag (and SERVICE_CONTROL_URL the variable) naming the control plane for
// the admin CLI.
const controlFlag = "control-url"

// addControlURLFlag registers --control-url on an admin command group.
func addControlURLFlag(c *cobra.Command) {
	c.PersistentFlags().String(controlFlag, "", "control plane URL (SERVICE_CONTROL_URL; default http://127.0.0.1:8080)")
}

// controlClient resolves the control plane URL (flag, then SERVICE_CONTROL_URL, then the
// default) and returns a JSON client for it.
func controlClient(c *cobra.Command) (*client.Admin, error) {
	v, _ := c.Flags().GetString(controlFlag)
	if v == "" {
		v = os.Getenv("SERVICE_CONTROL_URL")
	}
	if v == "" {
		v = "http://127.0.0.1:8080"
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &exitError{code: 2, err: fmt.Errorf("--%s / SERVICE_CONTROL_URL must be an http(s) URL", controlFlag)}
	}
	return client.NewAdmin(v, nil), nil
}

// listPath is path with the query of a list call: q's non-empty values plus limit and before.
func listPath(path string, q url.Values, limit int, before string) string {
	if q == nil {
		q = url.Values{}
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if before != "" {
		q.Set("before", before)
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path
}

// printNext tells how to fetch the next page of a list, on stderr.
func printNext(c *cobra.Command, next string) {
	if next != "" {
		fmt.Fprintf(c.ErrOrStderr(), "more: --before %s\n", next)
	}
}
