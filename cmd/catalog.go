package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/svc-dev/svc/configs"
	"github.com/svc-dev/svc/modules/catalog"
	"github.com/svc-dev/svc/modules/models"
)

// newCatalog builds the model catalog over the registry; the closer fails in-flight
// downloads as interrupted before the database closes.
func newCatalog(ctx context.Context, d *deps, reg *models.Service) (*catalog.Service, error) {
	svc, err := catalog.New(ctx, catalog.Options{
		DB:       d.db,
		Registry: catalogRegistry{reg},
		DataDir:  d.cfg.DataDir,
		HubURL:   d.cfg.CatalogHubURL,
		Curated:  configs.Catalog,
		Logger:   d.log.With().Str("plane", "inference").Str("module", "catalog").Logger(),
	})
	if err != nil {
		return nil, err
	}
	return svc, nil
}

// catalogRegistry adapts the model registry to the catalog's Registry.
type catalogRegistry struct{ svc *models.Service }

func (r catalogRegistry) Exists(ctx context.Context, id string) (bool, error) {
	_, err := r.svc.Resolve(ctx, id)
	if errors.Is(err, models.ErrModelNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (r catalogRegistry) RegisterLocal(ctx context.Context, id, engine, modelPath, modality string) error {
	spec := &models.Spec{Binding: models.Binding(engine), ModelPath: modelPath, Modalities: []models.Modality{models.Modality(modality)}}
	_, _, err := r.svc.Put(ctx, id, spec)
	return err
}

func newCatalogCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "catalog",
		Short: "Search the model hub and install models on the inference plane",
	}
	addInferenceURLFlag(c)
	c.AddCommand(catalogSearch(), catalogShow(), catalogInstall(), catalogDownloads(), catalogCancel())
	return c
}

// catalogRepoPath is /admin/catalog/models/{owner%2Fname}.
func catalogRepoPath(repo string) string {
	return "/admin/catalog/models/" + url.PathEscape(repo)
}

func catalogSearch() *cobra.Command {
	var (
		asJSON                        bool
		sortKey, engines, size, modal string
		limit                         int
	)
	c := &cobra.Command{
		Use:   "search [TEXT]",
		Short: "Search the hub for models a local engine runs",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			q := url.Values{}
			if len(args) == 1 {
				q.Set("search", args[0])
			}
			for k, v := range map[string]string{"sort": sortKey, "engines": engines, "size": size, "modality": modal} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			path := "/admin/catalog/models"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			var out catalog.SearchResult
			if err := a.Do(c.Context(), http.MethodGet, path, nil, &out); err != nil {
				return cliError(err)
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), out)
			}
			if out.Source == "curated" {
				fmt.Fprintf(c.ErrOrStderr(), "hub unavailable (%s): showing the curated list\n", out.HubError)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REPO\tENGINE\tMODALITY\tSIZE\tDOWNLOADS\tLIKES")
			for _, m := range out.Models {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", m.ID, m.Engine, m.Modality, str(nonEmpty(m.Size)), m.Downloads, m.Likes)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the JSON answer")
	c.Flags().StringVar(&sortKey, "sort", "", "downloads (default), likes or lastModified")
	c.Flags().StringVar(&engines, "engines", "", "comma-separated: llama.cpp, whisper.cpp, stable-diffusion.cpp")
	c.Flags().StringVar(&size, "size", "", "tiny, small, medium or large (parameter count)")
	c.Flags().StringVar(&modal, "modality", "", "chat, embeddings, transcription, speech or images")
	c.Flags().IntVar(&limit, "limit", 0, "1 to 100 (default 20)")
	return c
}

func catalogShow() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show OWNER/NAME",
		Short: "Show a model's variants with RAM fit badges",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := a.Do(c.Context(), http.MethodGet, catalogRepoPath(args[0]), nil, &raw); err != nil {
				return cliError(err)
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), raw)
			}
			var d catalog.Detail
			if err := json.Unmarshal(raw, &d); err != nil {
				return cliError(err)
			}
			fmt.Fprintf(c.OutOrStdout(), "%s  engine %s  modality %s  RAM %s  (source %s)\n", d.ID, d.Engine, d.Modality, human(d.RAMBytes), d.Source)
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VARIANT\tFILES\tSIZE\tEST. MEMORY\tFIT\t")
			for _, v := range d.Variants {
				mark := ""
				if v.Recommended {
					mark = "recommended"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", v.ID, len(v.Files), human(v.SizeBytes), human(v.EstimatedBytes), v.Fit, mark)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the JSON answer")
	return c
}

// human prints a byte count in binary units ("-" when unknown).
func human(n int64) string {
	if n <= 0 {
		return "-"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func catalogInstall() *cobra.Command {
	var (
		engine, variant string
		wait            bool
	)
	c := &cobra.Command{
		Use:   "install OWNER/NAME LOGICAL_ID",
		Short: "Download a variant and register it as a logical id (prints the job)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			if variant == "" {
				// The recommended variant of the detail.
				var d catalog.Detail
				if err := a.Do(c.Context(), http.MethodGet, catalogRepoPath(args[0]), nil, &d); err != nil {
					return cliError(err)
				}
				if d.Recommended == "" {
					return &exitError{code: 2, err: fmt.Errorf("no variant of %s fits comfortably in this machine's memory: pick one with --variant (see svc catalog show %s)", args[0], args[0])}
				}
				variant = d.Recommended
			}
			body := catalog.InstallRequest{Repo: args[0], Engine: engine, VariantID: variant, LogicalID: args[1]}
			var j catalog.Job
			if err := a.Do(c.Context(), http.MethodPost, "/admin/catalog/install", body, &j); err != nil {
				return cliError(err)
			}
			if !wait {
				return printJSON(c.OutOrStdout(), j)
			}
			return waitDownload(c, j.JobID)
		},
	}
	c.Flags().StringVar(&engine, "engine", "", "llama.cpp, whisper.cpp or stable-diffusion.cpp (default: the repository's engine)")
	c.Flags().StringVar(&variant, "variant", "", "variant id (default: the recommended one)")
	c.Flags().BoolVar(&wait, "wait", false, "follow the job's progress until it ends")
	return c
}

// waitDownload prints a job's progress once a second until it ends; a failed or canceled
// job exits 1.
func waitDownload(c *cobra.Command, id string) error {
	a, err := inferenceAdmin(c)
	if err != nil {
		return err
	}
	for {
		var j catalog.Job
		if err := a.Do(c.Context(), http.MethodGet, "/admin/catalog/downloads/"+url.PathEscape(id), nil, &j); err != nil {
			return cliError(err)
		}
		fmt.Fprintf(c.ErrOrStderr(), "%s %s/%s %s/s\n", j.State, human(j.BytesDone), human(j.BytesTotal), human(j.BytesPerSecond))
		switch j.State {
		case catalog.StateCompleted:
			return printJSON(c.OutOrStdout(), j)
		case catalog.StateFailed, catalog.StateCanceled:
			_ = printJSON(c.OutOrStdout(), j)
			return &exitError{code: 1, err: fmt.Errorf("download %s: %s %s", id, j.State, j.Error)}
		}
		select {
		case <-c.Context().Done():
			return c.Context().Err()
		case <-time.After(time.Second):
		}
	}
}

func catalogDownloads() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "downloads [JOB_ID]",
		Short: "List download jobs, or show one",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				var raw json.RawMessage
				if err := a.Do(c.Context(), http.MethodGet, "/admin/catalog/downloads/"+url.PathEscape(args[0]), nil, &raw); err != nil {
					return cliError(err)
				}
				return printJSON(c.OutOrStdout(), raw)
			}
			var out struct {
				Downloads []catalog.Job `json:"downloads"`
			}
			if err := a.Do(c.Context(), http.MethodGet, "/admin/catalog/downloads", nil, &out); err != nil {
				return cliError(err)
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tREPO\tVARIANT\tLOGICAL ID\tSTATE\tPROGRESS\tERROR")
			for _, j := range out.Downloads {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\n", j.JobID, j.Repo, j.VariantID, j.LogicalID, j.State, human(j.BytesDone), human(j.BytesTotal), str(nonEmpty(j.Error)))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the JSON answer")
	return c
}

func catalogCancel() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel JOB_ID",
		Short: "Cancel a download job (its partial file is removed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := a.Do(c.Context(), http.MethodPost, "/admin/catalog/downloads/"+url.PathEscape(args[0])+":cancel", nil, &raw); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), raw)
		},
	}
}
