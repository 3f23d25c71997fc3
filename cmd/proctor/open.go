package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
)

// cmdOpen prints a one-time link that signs a browser in to the web app at PAGE (a route such
// as jobs/ID or traces/ID; the jobs list when absent), and opens it where a browser can.
func cmdOpen(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		print := fs.Bool("print", false, "only print the link; do not open a browser")
		return clientCommand(func(ctx context.Context, c *apiClient, pos []string) error {
			page := ""
			if len(pos) > 0 {
				page = strings.Trim(pos[0], "#/")
			}
			var link struct {
				URL       string `json:"url"`
				ExpiresAt string `json:"expires_at"`
			}
			if err := c.do(ctx, http.MethodPost, "/auth/link", map[string]string{"page": page}, &link); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s\n", link.URL)
			fmt.Fprintf(stderr, "a one-time sign-in link, good until %s: its page names your account and asks you to continue\n", link.ExpiresAt)
			if !*print {
				if err := openBrowser(link.URL); err != nil {
					fmt.Fprintf(stderr, "(not opened: %v; open it yourself)\n", err)
				}
			}
			return nil
		})(fs)
	}
}

// openBrowser opens url with the desktop's opener ($BROWSER, xdg-open, open), without waiting
// for it. On a machine with no display it says so.
func openBrowser(url string) error {
	var name string
	switch {
	case os.Getenv("BROWSER") != "":
		name = os.Getenv("BROWSER")
	case goruntime.GOOS == "darwin":
		name = "open"
	case os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "":
		return fmt.Errorf("no display")
	default:
		name = "xdg-open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, url)
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() //nolint:errcheck // the opener's exit says nothing we can act on
	return nil
}
