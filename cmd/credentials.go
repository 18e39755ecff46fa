package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// maxCredentialInput bounds what `credentials set` reads from stdin (the server's limit is 16 KiB).
const maxCredentialInput = 64 << 10

func newCredentialsCmd() *cobra.Command {
	creds := &cobra.Command{
		Use:   "credentials",
		Short: "Manage the inference plane's local credentials (write-only values for credentialRef secret://NAME)",
	}
	addInferenceURLFlag(creds)
	creds.AddCommand(credentialsList(), credentialsSet(), credentialsRm())
	return creds
}

func credentialsList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List credential names and whether each has a usable value",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			var out []struct {
				Name     string `json:"name"`
				HasValue bool   `json:"hasValue"`
			}
			if err := a.Do(c.Context(), http.MethodGet, "/admin/credentials", nil, &out); err != nil {
				return cliError(err)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tHAS VALUE")
			for _, cr := range out {
				fmt.Fprintf(tw, "%s\t%t\n", cr.Name, cr.HasValue)
			}
			return tw.Flush()
		},
	}
}

func credentialsSet() *cobra.Command {
	return &cobra.Command{
		Use:   "set NAME",
		Short: "Set a credential; the value is read from stdin (piped) or a hidden prompt, never from the command line",
		Example: "  printf %s \"$OPENAI_API_KEY\" | svc credentials set OPENAI_API_KEY\n" +
			"  svc credentials set OPENAI_API_KEY   # prompts without echo",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			value, err := readSecret(c, args[0])
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if err := a.Do(c.Context(), http.MethodPut, "/admin/credentials/"+url.PathEscape(args[0]), map[string]string{"value": value}, nil); err != nil {
				return cliError(err)
			}
			fmt.Fprintf(c.OutOrStdout(), "stored %s\n", args[0])
			return nil
		},
	}
}

// readSecret reads the value from a hidden prompt when stdin is a terminal, else from stdin
// as piped (one trailing newline dropped).
func readSecret(c *cobra.Command, name string) (string, error) {
	in := c.InOrStdin()
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(c.ErrOrStderr(), "Value for %s (input hidden): ", name)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.ErrOrStderr())
		if err != nil {
			return "", fmt.Errorf("reading the value: %w", err)
		}
		if len(b) == 0 {
			return "", errors.New("empty value: nothing stored")
		}
		return string(b), nil
	}
	b, err := io.ReadAll(io.LimitReader(in, maxCredentialInput+1))
	if err != nil {
		return "", fmt.Errorf("reading the value from stdin: %w", err)
	}
	if len(b) > maxCredentialInput {
		return "", fmt.Errorf("the value on stdin is longer than %d bytes", maxCredentialInput)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		return "", errors.New("empty value on stdin: pipe the value in, or run in a terminal to be prompted")
	}
	return string(b), nil
}

func credentialsRm() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Remove a credential",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			if err := a.Do(c.Context(), http.MethodDelete, "/admin/credentials/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return cliError(err)
			}
			fmt.Fprintf(c.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
}
