package registry_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/credentials"
	"github.com/proctorhq/proctor/models/registry"
)

func TestBuildsFromUploads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		up, err := registry.Of(s).CreateBuildUpload(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := registry.Of(s).TriggerBuild(ctx, b, registry.TriggerBuild{UploadID: up.ID, Name: "todo"}); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team triggering the upload: %v, want ErrNotFound", err)
		}
		first, created, err := registry.Of(s).TriggerBuild(ctx, a, registry.TriggerBuild{UploadID: up.ID, Name: "todo", Options: models.BuildOptions{EntryFolder: "env"}})
		if err != nil || !created || first.ID != up.ID || first.Version != 1 || first.Status != registry.BuildPending || first.SourceKey != up.SourceKey {
			t.Fatalf("trigger = %+v, %v, %v", first, created, err)
		}
		again, created, err := registry.Of(s).TriggerBuild(ctx, a, registry.TriggerBuild{UploadID: up.ID, Name: "todo"})
		if err != nil || created || again.ID != first.ID {
			t.Errorf("a repeated trigger = %+v, created %v, %v; want the same build", again, created, err)
		}
		if err := registry.Of(s).AppendBuildLog(ctx, first.ID, []string{"step 1", "step 2"}); err != nil {
			t.Fatal(err)
		}
		registry.Of(s).AppendBuildLog(ctx, first.ID, []string{"step 3"})
		if logs, _ := registry.Of(s).BuildLogs(ctx, first.ID, 0, 10); len(logs) != 2 || logs[1].Line != "step 3" || logs[1].Seq != 2 {
			t.Errorf("logs after seq 0 = %+v", logs)
		}
		if _, err := registry.Of(s).SetLatestBuild(ctx, a, first.ID, false); !errors.Is(err, models.ErrConflict) {
			t.Errorf("set-latest of a pending build: %v, want ErrConflict", err)
		}
		registry.Of(s).UpdateBuild(ctx, first.ID, registry.BuildUpdate{Status: registry.BuildRunning})
		done, err := registry.Of(s).FinishBuild(ctx, first.ID, registry.BuildResult{Status: registry.BuildSucceeded, Lock: models.BuildLock{Transport: models.TransportStdio},
			Scenarios: []models.Scenario{{Name: "add-todos"}}, Image: registry.BuiltImage{Digest: "sha256:abc", ImageKey: "images/x", Command: []string{"/app/env"}}})
		if err != nil || done.Status != registry.BuildSucceeded || done.DurationSeconds == nil {
			t.Fatalf("finish = %+v, %v", done, err)
		}
		reg, err := registry.Of(s).GetRegistry(ctx, a, first.RegistryID)
		if err != nil || reg.LatestBuildID == nil || *reg.LatestBuildID != first.ID {
			t.Fatalf("the first successful build is not the latest: %+v %v", reg, err)
		}
		row, _ := registry.Of(s).GetBuildFor(ctx, a, first.ID)
		if row.Digest != "sha256:abc" || row.ImageKey != "images/x" || len(row.RuntimeConfig.Command) != 1 || row.RegistryName != "todo" {
			t.Errorf("build row = %+v", row)
		}
		if sc, _ := registry.Of(s).ListScenarios(ctx, first.ID); len(sc) != 1 || sc[0].Slug != "add-todos" {
			t.Errorf("scenarios = %+v", sc)
		}
		// Finishing again changes nothing; a second build does not replace the latest by itself.
		if again, _ := registry.Of(s).FinishBuild(ctx, first.ID, registry.BuildResult{Status: registry.BuildFailed, Error: "late"}); again.Status != registry.BuildSucceeded {
			t.Errorf("a finished build was finished again: %+v", again)
		}
		up2, _ := registry.Of(s).CreateBuildUpload(ctx, a)
		second, _, err := registry.Of(s).TriggerBuild(ctx, a, registry.TriggerBuild{UploadID: up2.ID, RegistryID: &first.RegistryID})
		if err != nil || second.Version != 2 {
			t.Fatalf("second build = %+v, %v", second, err)
		}
		// A succeeded build's lock names the transport its image serves: never the empty lock.
		if _, err := registry.Of(s).FinishBuild(ctx, second.ID, registry.BuildResult{Status: registry.BuildSucceeded}); err == nil {
			t.Error("a build finished as succeeded with a lock that names no transport")
		}
		if row, _ := registry.Of(s).GetBuildFor(ctx, a, second.ID); row.Status == registry.BuildSucceeded {
			t.Errorf("the refused finish was recorded: %+v", row.Build)
		}
		registry.Of(s).FinishBuild(ctx, second.ID, registry.BuildResult{Status: registry.BuildSucceeded, Lock: models.BuildLock{Transport: models.TransportStdio}})
		if reg, _ := registry.Of(s).GetRegistry(ctx, a, first.RegistryID); *reg.LatestBuildID != first.ID {
			t.Error("a later build became the latest without set-latest")
		}
		if _, err := registry.Of(s).SetLatestBuild(ctx, b, second.ID, false); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team's set-latest: %v, want ErrNotFound", err)
		}
		if _, err := registry.Of(s).SetLatestBuild(ctx, a, second.ID, false); err != nil {
			t.Fatal(err)
		}
		if reg, _ := registry.Of(s).GetRegistry(ctx, a, first.RegistryID); *reg.LatestBuildID != second.ID {
			t.Error("set-latest did not take")
		}
		if builds, total, err := registry.Of(s).ListBuilds(ctx, a, first.RegistryID, 50); err != nil || total != 2 || builds[0].ID != second.ID {
			t.Errorf("list = %d builds (total %d), %v", len(builds), total, err)
		}
		if _, _, err := registry.Of(s).ListBuilds(ctx, b, first.RegistryID, 50); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team listing a private environment's builds: %v", err)
		}
	})
}

func TestBuildSecretsLiveOnlyWhileTheBuildRunsAndFollowTheKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		keyFile := filepath.Join(t.TempDir(), "key.json")
		k1, err := secrets.Create(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		up, _ := registry.Of(s).CreateBuildUpload(ctx, a)
		ct, _ := k1.Encrypt([]byte("tok-123"), models.BuildSecretContext(up.ID, "tok"))
		b, _, err := registry.Of(s).TriggerBuild(ctx, a, registry.TriggerBuild{UploadID: up.ID, Name: "env", Secrets: map[string][]byte{"tok": ct}})
		if err != nil {
			t.Fatal(err)
		}
		// Rotating the key and re-wrapping moves the stored value to the new key.
		id2, err := secrets.Rotate(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		k2, _ := secrets.Load(keyFile)
		if n, err := credentials.Of(s).RewrapSecrets(ctx, k2.Rewrap); err != nil || n != 1 {
			t.Fatalf("RewrapSecrets = %d, %v; want 1", n, err)
		}
		if n, _ := credentials.Of(s).RewrapSecrets(ctx, k2.Rewrap); n != 0 {
			t.Errorf("a second re-wrap changed %d values", n)
		}
		got, err := registry.Of(s).BuildSecrets(ctx, b.ID)
		if err != nil || secrets.KeyID(got["tok"]) != id2 {
			t.Fatalf("after re-wrapping: key %d, %v; want %d", secrets.KeyID(got["tok"]), err, id2)
		}
		if pt, err := k2.Decrypt(got["tok"], models.BuildSecretContext(b.ID, "tok")); err != nil || string(pt) != "tok-123" {
			t.Errorf("the re-wrapped secret opens to %q, %v", pt, err)
		}
		if _, err := registry.Of(s).FinishBuild(ctx, b.ID, registry.BuildResult{Status: registry.BuildFailed, Error: "x"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := registry.Of(s).BuildSecrets(ctx, b.ID); len(got) != 0 {
			t.Errorf("secrets of an ended build: %d left", len(got))
		}
	})
}

// A build that asks to be certified is not made its environment's latest on its own, even as its
// first successful build: set-latest does, once the certification passed.
func TestAFirstBuildThatAsksToBeCertifiedIsNotMadeTheLatest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		up, err := registry.Of(s).CreateBuildUpload(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		build, _, err := registry.Of(s).TriggerBuild(ctx, a, registry.TriggerBuild{UploadID: up.ID, Name: "todo",
			Options: models.BuildOptions{Certify: &models.CertifyOptions{TasksetID: uuid.New(), K: 2}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := registry.Of(s).FinishBuild(ctx, build.ID, registry.BuildResult{Status: registry.BuildSucceeded, Lock: models.BuildLock{Transport: models.TransportStdio}}); err != nil {
			t.Fatal(err)
		}
		if reg, err := registry.Of(s).GetRegistry(ctx, a, build.RegistryID); err != nil || reg.LatestBuildID != nil {
			t.Errorf("the environment of a first build that asks to be certified: %+v, %v; want no latest build", reg, err)
		}
		if got, err := registry.Of(s).BuildByID(ctx, build.ID); err != nil || got.Options.Certify == nil || got.Options.Certify.K != 2 {
			t.Errorf("the build's certify options: %+v, %v", got, err)
		}
	})
}
