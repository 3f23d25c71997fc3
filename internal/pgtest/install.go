package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// findBinDir locates a directory containing initdb and postgres. An explicit
// PROCTOR_PG_BIN wins; otherwise the newest Debian-style install, then
// pg_config, then PATH.
func findBinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if !hasBinaries(dir) {
			return "", fmt.Errorf("pgtest: %s=%s does not contain initdb and postgres", BinDirEnv, dir)
		}
		return dir, nil
	}
	if dir := newestDebianBinDir(); dir != "" {
		return dir, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); hasBinaries(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		// Follow symlinks such as /usr/local/bin/initdb -> .../15/bin/initdb
		// so that postgres is looked up next to the real initdb.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); hasBinaries(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("pgtest: no PostgreSQL binaries found (looked in /usr/lib/postgresql/*/bin, pg_config --bindir and PATH); install postgresql or set %s", BinDirEnv)
}

func newestDebianBinDir() string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	type candidate struct {
		dir     string
		version []int
	}
	var cands []candidate
	for _, m := range matches {
		if !hasBinaries(m) {
			continue
		}
		cands = append(cands, candidate{m, parseVersion(filepath.Base(filepath.Dir(m)))})
	}
	if len(cands) == 0 {
		return ""
	}
	// Numeric, not lexical: 9.6 must sort below 10.
	slices.SortFunc(cands, func(a, b candidate) int { return slices.Compare(b.version, a.version) })
	return cands[0].dir
}

func parseVersion(s string) []int {
	var v []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			n = -1
		}
		v = append(v, n)
	}
	return v
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// childCredential returns the identity to run initdb and postgres as: nil
// (ourselves) normally, the postgres system user when we are root.
func childCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(systemUser)
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, but initdb and postgres refuse to run as root and there is no %q system user to run them as: %w", systemUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgtest: parsing uid %q of user %q: %w", u.Uid, systemUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgtest: parsing gid %q of user %q: %w", u.Gid, systemUser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func chownTree(root string, uid, gid int) error {
	err := filepath.WalkDir(root, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("pgtest: handing %s to uid %d: %w", root, uid, err)
	}
	return nil
}

func initdb(ctx context.Context, binDir, dataDir string, cred *syscall.Credential) error {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
		"-D", dataDir,
		"-A", "trust",
		"-U", superuser,
		"-E", "UTF8",
		"--locale=C",
		// The cluster is deleted after the test; flushing it to disk is
		// wasted seconds.
		"--no-sync",
	)
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

// childEnv is our environment minus libpq's PG* variables, which would
// otherwise leak the developer's own database settings (PGDATA, PGPORT,
// PGOPTIONS...) into the throwaway cluster.
func childEnv() []string {
	env := os.Environ()
	return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PG") })
}
