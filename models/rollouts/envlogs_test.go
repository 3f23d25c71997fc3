package rollouts_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// TestLogPagesReadEveryLineOnceByEitherCursor reads a trace's env log, whose lines share
// milliseconds, page by page with the timestamp cursor and with the seq cursor: each reads every
// line once, in the order written, and no page ends inside a millisecond.
func TestLogPagesReadEveryLineOnceByEitherCursor(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		_, id := storetest.LaunchOne(t, s)
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		// Milliseconds 0..3 hold 3, 2, 1 and 4 lines; some share the exact instant, some only the
		// millisecond.
		offsets := []time.Duration{0, 0, 400 * time.Microsecond, time.Millisecond, time.Millisecond + 999*time.Microsecond,
			2 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond, 3*time.Millisecond + 10*time.Microsecond, 3*time.Millisecond + 500*time.Microsecond}
		var lines []models.TraceLog
		for i, off := range offsets {
			lines = append(lines, models.TraceLog{TraceID: id, Source: rollouts.LogEnv, Seq: i, Stream: "stderr", Line: fmt.Sprint("line ", i), Time: base.Add(off)})
		}
		if err := rollouts.Of(s).AppendTraceLogs(ctx, lines); err != nil {
			t.Fatal(err)
		}
		all := make([]int, len(lines))
		for i := range all {
			all[i] = i
		}

		// read pages with limit from cursor first until has_more is false, as next makes each
		// next cursor from the page before.
		read := func(first rollouts.LogCursor, limit int, next func(p *rollouts.LogPage) rollouts.LogCursor) (seqs []int, sizes []int) {
			t.Helper()
			cur := first
			for range 20 {
				p, err := rollouts.Of(s).TraceLogPage(ctx, id, rollouts.LogEnv, cur, limit, false)
				if err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, len(p.Lines))
				for _, l := range p.Lines {
					seqs = append(seqs, l.Seq)
				}
				if n := len(p.Lines); p.HasMore && n > 0 && n < len(lines) {
					if last, nextLine := p.Lines[n-1], lines[p.Lines[n-1].Seq+1]; last.Time.UnixMilli() == nextLine.Time.UnixMilli() {
						t.Errorf("a page ended inside millisecond %d (line %d, before line %d)", last.Time.UnixMilli(), last.Seq, nextLine.Seq)
					}
				}
				if !p.HasMore {
					return seqs, sizes
				}
				cur = next(p)
			}
			t.Fatal("the pages never ended")
			return nil, nil
		}
		byTimestamp := func(p *rollouts.LogPage) rollouts.LogCursor {
			ms := p.Lines[len(p.Lines)-1].Time.UnixMilli()
			return rollouts.LogCursor{AfterMilli: &ms}
		}
		bySeq := func(p *rollouts.LogPage) rollouts.LogCursor {
			return rollouts.LogCursor{AfterSeq: p.Lines[len(p.Lines)-1].Seq}
		}
		zero := int64(0)
		for _, tc := range []struct {
			name  string
			first rollouts.LogCursor
			limit int
			next  func(*rollouts.LogPage) rollouts.LogCursor
			sizes []int
		}{
			// Limit 4 ends the first page after millisecond 0 (3 lines): line 3 would split
			// millisecond 1. Then milliseconds 1 and 2 (3 lines), then 3 (4 lines).
			{"by timestamp, limit 4", rollouts.LogCursor{AfterSeq: -1}, 4, byTimestamp, []int{3, 3, 4}},
			{"by timestamp from 0, limit 4", rollouts.LogCursor{AfterMilli: &zero}, 4, byTimestamp, []int{3, 3, 4}},
			{"by seq, limit 4", rollouts.LogCursor{AfterSeq: -1}, 4, bySeq, []int{3, 3, 4}},
			// Limit 2: millisecond 0 alone holds 3 lines, a page of its own; millisecond 3 holds 4.
			{"by timestamp, limit 2", rollouts.LogCursor{AfterSeq: -1}, 2, byTimestamp, []int{3, 2, 1, 4}},
			{"by seq, limit 2", rollouts.LogCursor{AfterSeq: -1}, 2, bySeq, []int{3, 2, 1, 4}},
			{"one page", rollouts.LogCursor{AfterSeq: -1}, 1000, byTimestamp, []int{10}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				seqs, sizes := read(tc.first, tc.limit, tc.next)
				if !slices.Equal(seqs, all) {
					t.Errorf("read lines %v, want each of %v once, in order", seqs, all)
				}
				if !slices.Equal(sizes, tc.sizes) {
					t.Errorf("pages of %v lines, want %v", sizes, tc.sizes)
				}
			})
		}

		// While the attempt writes, a page read by timestamp holds back the latest millisecond,
		// whose lines may still come: a line of it written later is not skipped.
		t.Run("live", func(t *testing.T) {
			ms := base.Add(2 * time.Millisecond).UnixMilli()
			p, err := rollouts.Of(s).TraceLogPage(ctx, id, rollouts.LogEnv, rollouts.LogCursor{AfterMilli: &ms}, 1000, true)
			if err != nil || len(p.Lines) != 0 || p.HasMore {
				t.Fatalf("the page after millisecond 2 while live = %+v, %v; want millisecond 3 held back", p, err)
			}
			late := models.TraceLog{TraceID: id, Source: rollouts.LogEnv, Seq: 10, Stream: "stderr", Line: "late", Time: base.Add(3*time.Millisecond + 900*time.Microsecond)}
			next := models.TraceLog{TraceID: id, Source: rollouts.LogEnv, Seq: 11, Stream: "stderr", Line: "next", Time: base.Add(4 * time.Millisecond)}
			rollouts.Of(s).AppendTraceLogs(ctx, []models.TraceLog{late, next})
			p, err = rollouts.Of(s).TraceLogPage(ctx, id, rollouts.LogEnv, rollouts.LogCursor{AfterMilli: &ms}, 1000, true)
			var got []int
			for _, l := range p.Lines {
				got = append(got, l.Seq)
			}
			if err != nil || !slices.Equal(got, []int{6, 7, 8, 9, 10}) || p.HasMore {
				t.Errorf("the page after millisecond 2 once a later line came = %v (more %v), %v; want millisecond 3 whole", got, p.HasMore, err)
			}
			// Once the attempt has ended, nothing is held back.
			last := base.Add(3 * time.Millisecond).UnixMilli()
			if p, _ := rollouts.Of(s).TraceLogPage(ctx, id, rollouts.LogEnv, rollouts.LogCursor{AfterMilli: &last}, 1000, false); len(p.Lines) != 1 || p.Lines[0].Line != "next" {
				t.Errorf("the last page of an ended attempt = %+v", p)
			}
		})
	})
}
