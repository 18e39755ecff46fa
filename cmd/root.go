// Package cmd holds the cobra commands. Flag variables live here and nowhere else; the
// serve commands are the composition roots that build each plane from its modules.
package cmd

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/svc-dev/svc/platform/config"
)

// Build information, set with -ldflags "-X github.com/svc-dev/svc/cmd.version=…".
var (
	version = "dev"
	commit  = "unknown"
	date    = "unknown"
)

// exitError carries a process exit status through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// Execute runs the root command and returns the process exit status.
func Execute() int {
	root := newRoot()
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, ee.err)
		return ee.code
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		fmt.Fprintln(os.Stderr, ce.Error())
		return 2
	}
	fmt.Fprintln(os.Stderr, "error:", err)
	return 1
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "svc",
		Short:         "svc runs AI agents: control plane, inference plane and admin CLI",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newMigrateCmd(), newVersionCmd())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	return root
}

// extraCommands lists the admin CLI command groups (agents, runs, models, …); each file
// that defines one adds its constructor here.
var extraCommands = []func() *cobra.Command{newAgentsCmd, newModelsCmd, newCredentialsCmd, newSecretsCmd, newRunsCmd, newSessionsCmd, newTriggersCmd, newCatalogCmd}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version, commit and build date",
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(c.OutOrStdout(), "svc %s (commit %s, built %s)\n", version, commit, date)
			return nil
		},
	}
}

// loadConfig resolves the configuration for a command with config flags.
func loadConfig(c *cobra.Command) (*config.Config, error) {
	return config.Load(c.Flags(), os.Getenv)
}
