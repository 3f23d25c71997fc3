package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/proctorhq/proctor/httpapi"
)

// reportLatest makes a succeeded build its environment's latest (when promote is set), and says
// which build new runs of the environment use: a deploy that did not take effect is said, not
// found out from a run of the old build's failures.
func reportLatest(ctx context.Context, c *apiClient, b deployBuild, name string, promote, force, deploying bool, stdout io.Writer) error {
	certificationNeeded := ""
	if promote {
		err := c.do(ctx, http.MethodPost, "/v2/builds/"+b.ID+"/set-latest", map[string]any{"force": force}, nil)
		var ae *apiError
		switch {
		case deploying && errors.As(err, &ae) && ae.Status == http.StatusConflict && strings.Contains(ae.Error(), "requires a passed certification"):
			// A deploy's build is not certified yet: said below, not a failed deploy.
			certificationNeeded = ae.Error()
		case err != nil:
			return fmt.Errorf("make build %s the latest of %s: %w", b.ID, name, err)
		}
	}
	var reg struct {
		LatestBuild *deployBuild `json:"latest_build"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/registry/"+b.RegistryID, nil, &reg); err != nil {
		return err
	}
	switch l := reg.LatestBuild; {
	case l != nil && l.ID == b.ID:
		fmt.Fprintf(stdout, "latest: build %d of %s; new runs use it\n", b.Version, name)
	case l != nil:
		why := "--no-promote"
		switch {
		case certificationNeeded != "":
			why = "the environment requires a passed certification first: proctor env certify " + b.ID + " --taskset NAME"
		case promote:
			why = "another build was made latest since" // a deploy beside this one
		}
		fmt.Fprintf(stdout, "not latest (%s): new runs of %s still use build %d (%s); make this one latest with: proctor env set-latest %s\n",
			why, name, l.Version, l.ImageName, b.ID)
	default:
		fmt.Fprintf(stdout, "%s has no latest build: make this one latest with: proctor env set-latest %s\n", name, b.ID)
	}
	return nil
}

// cmdEnvSetLatest makes a succeeded build the one new runs of its environment use.
func cmdEnvSetLatest(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		force := fs.Bool("force", false, "even where the environment requires a passed certification first and the build's did not pass")
		return clientCommand(func(ctx context.Context, c *apiClient, pos []string) (err error) {
			return setLatest(ctx, c, pos[0], *force, stdout)
		})(fs)
	}
}

// cmdEnvRequireCertification turns an environment's certification policy on (or off).
func cmdEnvRequireCertification(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		off := fs.Bool("off", false, "no longer require it")
		return clientCommand(func(ctx context.Context, c *apiClient, pos []string) error {
			id, err := c.findEnvironment(ctx, pos[0])
			if err != nil {
				return err
			}
			var out httpapi.CertificationPolicy
			if err := c.do(ctx, http.MethodPut, "/v2/registry/"+id+"/certification-policy", map[string]any{"certify_before_latest": !*off}, &out); err != nil {
				return err
			}
			if out.CertifyBeforeLatest {
				fmt.Fprintf(stdout, "%s: a build becomes the latest only once its latest certification passed (proctor env certify), or with set-latest --force\n", pos[0])
			} else {
				fmt.Fprintf(stdout, "%s: any succeeded build may become the latest\n", pos[0])
			}
			return nil
		})(fs)
	}
}

// setLatest makes build (an id or a unique prefix) its environment's latest.
func setLatest(ctx context.Context, c *apiClient, build string, force bool, stdout io.Writer) error {
	id, err := c.resolveID(ctx, "build", build)
	if err != nil {
		return err
	}
	var b deployBuild
	if err := c.do(ctx, http.MethodGet, "/v2/builds/"+id+"/status", nil, &b); err != nil {
		return err
	}
	if b.Status != "succeeded" {
		return fmt.Errorf("build %s is %s: only a succeeded build can be the latest", b.ID, b.Status)
	}
	var reg struct {
		Name string `json:"name"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/registry/"+b.RegistryID, nil, &reg); err != nil {
		return err
	}
	return reportLatest(ctx, c, b, reg.Name, true, force, false, stdout)
}
