package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/svc-dev/svc/platform/config"
	"github.com/svc-dev/svc/platform/database"
)

func newMigrateCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Apply database migrations and exit",
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			db, err := database.Open(c.Context(), cfg.DatabaseURL, cfg.SQLitePath())
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.Migrate(c.Context()); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "migrations applied (%s)\n", db.Dialect)
			return nil
		},
	}
	config.AddFlags(c.Flags())
	return c
}
