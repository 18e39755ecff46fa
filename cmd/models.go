package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/svc-dev/svc/platform/client"
)

// inferenceFlag is the flag (and SERVICE_INFERENCE_URL the variable) naming the inference
// plane for the admin CLI.
const inferenceFlag = "inference-url"

// addInferenceURLFlag registers --inference-url on an admin command group.
func addInferenceURLFlag(c *cobra.Command) {
	c.PersistentFlags().String(inferenceFlag, "", "inference plane URL (SERVICE_INFERENCE_URL; default http://127.0.0.1:8081)")
}

// inferenceAdmin resolves the inference plane URL (flag, then SERVICE_INFERENCE_URL, then
// the default) and returns a client of its admin API.
func inferenceAdmin(c *cobra.Command) (*client.Admin, error) {
	v, _ := c.Flags().GetString(inferenceFlag)
	if v == "" {
		v = os.Getenv("SERVICE_INFERENCE_URL")
	}
	if v == "" {
		v = "http://127.0.0.1:8081"
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &exitError{code: 2, err: fmt.Errorf("--%s / SERVICE_INFERENCE_URL must be an http(s) URL", inferenceFlag)}
	}
	return client.NewAdmin(v, nil), nil
}

// cliError turns an API error into "code: message" with exit status 1.
func cliError(err error) error {
	if err == nil {
		return nil
	}
	if code, msg, ok := client.AsAPIError(err); ok {
		return &exitError{code: 1, err: fmt.Errorf("error: %s: %s", code, msg)}
	}
	return &exitError{code: 1, err: fmt.Errorf("error: %v", err)}
}

// printJSON prints v indented; a raw answer keeps the server's key order.
func printJSON(w io.Writer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// modelPath is /admin/models/{id} with the id escaped as one path segment ("/" → %2F).
func modelPath(id string, suffix string) string {
	return "/admin/models/" + url.PathEscape(id) + suffix
}

func newModelsCmd() *cobra.Command {
	models := &cobra.Command{
		Use:   "models",
		Short: "Manage the inference plane's model registry (logical ids)",
	}
	addInferenceURLFlag(models)
	models.AddCommand(modelsList(), modelsGet(), modelsPut(), modelsRm(), modelsAction("warm", "Pre-load a model's engine (a no-op for hosted models)"),
		modelsAction("evict", "Free a model's engine (a no-op for hosted models)"), modelsCaps())
	return models
}

func modelsList() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List registered models with their live state",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			var out struct {
				Models []map[string]any `json:"models"`
			}
			if err := a.Do(c.Context(), http.MethodGet, "/admin/models", nil, &out); err != nil {
				return cliError(err)
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tBINDING\tMODEL\tSTATE\tBASE URL")
			for _, m := range out.Models {
				fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\n", m["id"], m["binding"], str(m["model"]), m["state"], str(m["baseUrl"]))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the JSON answer")
	return c
}

func str(v any) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(v)
}

func modelsGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a registered model",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			var out json.RawMessage
			if err := a.Do(c.Context(), http.MethodGet, modelPath(args[0], ""), nil, &out); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
}

func modelsPut() *cobra.Command {
	var (
		file, binding, baseURL, model, credRef string
		maxTokens                              int
		modalities                             []string
	)
	c := &cobra.Command{
		Use:   "put ID",
		Short: "Register or replace a logical id",
		Long: "Register or replace a logical id, from flags:\n" +
			"  svc models put gpt --base-url https://api.openai.com/v1 --model gpt-4o-mini --credential-ref secret://OPENAI_API_KEY\n" +
			"or from a JSON file (- for stdin) with the PUT /admin/models/{id} body:\n" +
			"  svc models put gpt --file model.json",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			var body any
			if file != "" {
				for _, f := range []string{"binding", "base-url", "model", "credential-ref", "max-tokens", "modality"} {
					if c.Flags().Changed(f) {
						return &exitError{code: 2, err: fmt.Errorf("--file and --%s cannot be combined", f)}
					}
				}
				raw, err := readFileOrStdin(c, file)
				if err != nil {
					return &exitError{code: 2, err: err}
				}
				var m map[string]any
				if err := json.Unmarshal(raw, &m); err != nil {
					return &exitError{code: 2, err: fmt.Errorf("%s is not a JSON object: %v", file, err)}
				}
				body = m
			} else {
				spec := map[string]any{"binding": binding}
				if baseURL != "" {
					spec["baseUrl"] = baseURL
				}
				if model != "" {
					spec["model"] = model
				}
				if credRef != "" {
					spec["credentialRef"] = credRef
				}
				if c.Flags().Changed("max-tokens") {
					spec["maxTokens"] = maxTokens
				}
				if len(modalities) > 0 {
					spec["modalities"] = modalities
				}
				body = spec
			}
			var out json.RawMessage
			if err := a.Do(c.Context(), http.MethodPut, modelPath(args[0], ""), body, &out); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
	f := c.Flags()
	f.StringVar(&file, "file", "", "JSON file with the registration (- reads stdin)")
	f.StringVar(&binding, "binding", "hosted-compatible", "binding kind")
	f.StringVar(&baseURL, "base-url", "", "OpenAI-compatible base URL including /v1")
	f.StringVar(&model, "model", "", "provider-side model name")
	f.StringVar(&credRef, "credential-ref", "", "secret://NAME (set the value with svc credentials set NAME)")
	f.IntVar(&maxTokens, "max-tokens", 0, "cap on max_tokens")
	f.StringSliceVar(&modalities, "modality", nil, "modality the model serves (repeatable): chat, embeddings, transcription, speech, images")
	return c
}

func readFileOrStdin(c *cobra.Command, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(c.InOrStdin(), 1<<20))
	}
	return os.ReadFile(name)
}

func modelsRm() *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID",
		Aliases: []string{"delete"},
		Short:   "Unregister a model (evicts it first)",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			if err := a.Do(c.Context(), http.MethodDelete, modelPath(args[0], ""), nil, nil); err != nil {
				return cliError(err)
			}
			fmt.Fprintf(c.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
}

func modelsAction(action, short string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			var out json.RawMessage
			if err := a.Do(c.Context(), http.MethodPost, modelPath(args[0], ":"+action), nil, &out); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
}

func modelsCaps() *cobra.Command {
	var refresh bool
	c := &cobra.Command{
		Use:   "caps ID",
		Short: "Probe a model's capabilities (tool calling, vision, reasoning, max context, modalities)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := inferenceAdmin(c)
			if err != nil {
				return err
			}
			path := modelPath(args[0], "/capabilities")
			if refresh {
				path += "?refresh=true"
			}
			var out json.RawMessage
			if err := a.Do(c.Context(), http.MethodGet, path, nil, &out); err != nil {
				return cliError(err)
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
	c.Flags().BoolVar(&refresh, "refresh", false, "probe again instead of answering from the cache")
	return c
}
