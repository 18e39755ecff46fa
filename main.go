// Command svc runs AI agents: the control plane, the inference plane, and their admin CLI.
package main

import (
	"os"

	"github.com/svc-dev/svc/cmd"
)

func main() { os.Exit(cmd.Execute()) }
