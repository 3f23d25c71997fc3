package main

import (
	"testing"
	"time"

	"github.com/proctorhq/proctor/httpapi"
)

// replayBenchAttempts is the size of BenchmarkReplayCheck's job, run 8 at a time.
const replayBenchAttempts = 40

// BenchmarkReplayCheck runs a job of 40 attempts of the oracle playing 2048 (eight moves each),
// then a replay check of it on the build it ran, and reports both throughputs: the replay's
// attempts per second against a normal job's of the same size and concurrency, from the launch to
// the figures recorded (replay/job is its ratio).
func BenchmarkReplayCheck(b *testing.B) {
	for b.Loop() {
		dev := startDev(b, b.TempDir())
		c := api{t: b, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
		validation := []any{}
		for _, dir := range replayMoves {
			validation = append(validation, map[string]any{"name": "move", "arguments": map[string]any{"direction": dir}})
		}
		var up struct {
			TaskVersionIDs []string `json:"task_version_ids"`
		}
		c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "bench", "tasks": []any{map[string]any{"name": "seed-1", "env": "game2048",
			"scenario": "reach-tile", "args": map[string]any{"target": 16, "seed": 1}, "validation": validation}}}, &up)
		var envs struct {
			Items []environmentRow `json:"items"`
		}
		c.call("GET", "/v2/registry?search=game2048", nil, &envs)
		build := *envs.Items[0].LatestBuildID

		start := time.Now()
		var launched struct {
			JobID string `json:"job_id"`
		}
		c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": up.TaskVersionIDs, "model_ids": []string{c.resolve("/v2/models/resolve?model=oracle", "id")},
			"group_size": replayBenchAttempts, "max_concurrent": 8}, &launched)
		if sum := c.waitJob(launched.JobID, nil); sum.Completed != replayBenchAttempts {
			b.Fatalf("the job: %s", sum.String())
		}
		job := time.Since(start)

		start = time.Now()
		var chk httpapi.ReplayCheck
		c.call("POST", "/v2/builds/"+build+"/check", map[string]any{"against_job_id": launched.JobID}, &chk)
		c.waitJob(chk.JobID.String(), nil)
		ran := time.Since(start)
		for chk.Status == "running" {
			time.Sleep(50 * time.Millisecond)
			c.call("GET", "/v2/builds/"+build+"/check", nil, &chk)
		}
		replay := time.Since(start)
		b.Logf("the replays ran in %s, their figures were recorded %s later", ran, replay-ran)
		if chk.Status != "same" || len(chk.Attempts) != replayBenchAttempts {
			b.Fatalf("the replay check: %s, %d attempts", chk.Status, len(chk.Attempts))
		}
		dev.stop(b)
		b.ReportMetric(replayBenchAttempts/job.Seconds(), "job_attempts/s")
		b.ReportMetric(replayBenchAttempts/replay.Seconds(), "replay_attempts/s")
		b.ReportMetric(job.Seconds()/replay.Seconds(), "replay/job")
	}
}

// BenchmarkCertification certifies each demo environment's build on the demo taskset with k 5
// (its tasks of that environment: the oracle 5 times, the idle and random agents and the tamper
// probe once each) and reports each one's wall time, from the launch to the figures recorded.
func BenchmarkCertification(b *testing.B) {
	for b.Loop() {
		dev := startDev(b, b.TempDir())
		c := api{t: b, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
		demo := c.tasksetID("demo")
		for _, env := range exampleEnvs {
			var envs struct {
				Items []environmentRow `json:"items"`
			}
			c.call("GET", "/v2/registry?search="+env, nil, &envs)
			build := *envs.Items[0].LatestBuildID
			start := time.Now()
			var cert httpapi.Certification
			c.call("POST", "/v2/builds/"+build+"/certify", map[string]any{"taskset_id": demo, "k": 5}, &cert)
			for cert.Status == "running" {
				time.Sleep(50 * time.Millisecond)
				c.call("GET", "/v2/builds/"+build+"/certification", nil, &cert)
			}
			took := time.Since(start)
			if cert.Status != "passed" {
				b.Logf("%s's certification: %s: %+v", env, cert.Status, cert.Tasks)
			}
			b.ReportMetric(took.Seconds(), env+"_s")
			b.ReportMetric(float64(len(cert.Tasks)*8)/took.Seconds(), env+"_attempts/s")
		}
		dev.stop(b)
	}
}
