// This file keeps web/ (and its node_modules) out of the Go module: the app is built with npm
// into ../internal/webapp/dist, which the proctor binary embeds.
module github.com/proctorhq/proctor/web

go 1.26
