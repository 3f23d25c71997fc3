package billing_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/llms"
)

// BenchmarkInferenceUsagePostgres measures the usage reads over a month of 1M inference rows of
// one team (10 models, 20 users, 5 API keys) on Postgres: the daily and hourly buckets grouped
// by model, the newest page of the usage log, and a model's log page. Goal (issue 12): each
// under 200 ms. Daily buckets read the daily usage rollup; hourly ones (at most 31 days) read the
// calls themselves.
// Run:
//
//	go test -run '^$' -bench InferenceUsagePostgres -benchtime 1x ./models/billing/
func BenchmarkInferenceUsagePostgres(b *testing.B) {
	const rows = 1_000_000
	for b.Loop() {
		url := storetest.PostgresURL(b)
		s := storetest.OpenURL(b, url)
		c := storetest.Member(b, s, "usage", "u@example.com")
		var modelIDs []uuid.UUID
		for i := range 10 {
			m := &models.LLMModel{ModelName: fmt.Sprintf("m-%d", i), Name: "m", Provider: "openai", Adapter: models.AdapterOpenAI, InputCostPerToken: 1e-6}
			if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
				b.Fatal(err)
			}
			modelIDs = append(modelIDs, m.ID)
		}
		users := make([]uuid.UUID, 20)
		keys := make([]uuid.UUID, 5)
		for i := range users {
			users[i] = uuid.New()
		}
		for i := range keys {
			keys[i] = uuid.New()
		}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		cols := []string{"id", "team_id", "model_id", "route", "status", "error_code", "prompt_tokens", "completion_tokens", "total_tokens",
			"cost", "duration_ms", "streaming", "trace_id", "user_id", "api_key_id", "byok", "created_at"}
		now := time.Now().UTC()
		r := rand.New(rand.NewPCG(1, 2))
		start := time.Now()
		const chunk = 100_000
		for done := 0; done < rows; done += chunk {
			batch := make([][]any, chunk)
			for i := range batch {
				p, cpl := r.IntN(2000), r.IntN(500)
				key := &keys[r.IntN(len(keys))]
				route := billing.RouteCompletions
				if r.IntN(4) > 0 {
					route, key = billing.RouteAgent, nil
				}
				batch[i] = []any{uuid.New(), c.TeamID, modelIDs[r.IntN(len(modelIDs))], route, "ok", "", p, cpl, p + cpl,
					float64(p+cpl) * 1e-6, r.IntN(3000), false, uuid.New(), users[r.IntN(len(users))], key, r.IntN(10) == 0,
					now.Add(-time.Duration(r.Int64N(int64(30 * 24 * time.Hour))))}
			}
			if _, err := conn.CopyFrom(ctx, pgx.Identifier{"inference_logs"}, cols, pgx.CopyFromRows(batch)); err != nil {
				b.Fatal(err)
			}
		}
		// COPY bypasses RecordInference: build the daily usage as the migration does.
		if _, err := conn.Exec(ctx, `INSERT INTO inference_daily
			SELECT team_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), CAST(model_id AS TEXT), COALESCE(CAST(user_id AS TEXT), ''),
			       COALESCE(CAST(api_key_id AS TEXT), ''), COALESCE(CAST(byok_credential_id AS TEXT), ''), byok, route,
			       count(*), SUM(cost), SUM(prompt_tokens), SUM(completion_tokens)
			FROM inference_logs GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "ANALYZE inference_logs; ANALYZE inference_daily"); err != nil {
			b.Fatal(err)
		}
		b.Logf("loaded %d rows in %s", rows, time.Since(start).Round(time.Millisecond))

		measure := func(name string, f func() error) { storetest.MedianUnder(b, 200*time.Millisecond, name, f) }
		monthAgo := now.AddDate(0, -1, 0)
		measure("daily-by-model", func() error {
			_, err := billing.Of(s).InferenceBuckets(ctx, c, monthAgo, now, false, "model", billing.UsageFilter{})
			return err
		})
		measure("hourly-week", func() error {
			_, err := billing.Of(s).InferenceBuckets(ctx, c, now.AddDate(0, 0, -7), now, true, "", billing.UsageFilter{})
			return err
		})
		measure("log-page", func() error {
			_, _, err := billing.Of(s).InferenceUsage(ctx, c, billing.UsageFilter{Since: now.AddDate(0, 0, -7), Limit: 50})
			return err
		})
		measure("model-log-page", func() error {
			_, _, err := billing.Of(s).ModelLogs(ctx, c, modelIDs[3], 50, 0)
			return err
		})
	}
}
