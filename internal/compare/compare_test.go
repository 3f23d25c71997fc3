package compare

import (
	"errors"
	"math"
	"testing"

	"github.com/google/uuid"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// The sign test's p-values, worked by hand from the binomial distribution.
func TestSignTestExact(t *testing.T) {
	for _, tc := range []struct {
		wins, losses int
		want         float64
	}{
		{2, 8, 2 * (1 + 10 + 45) / 1024.0}, // 0.109375
		{8, 2, 2 * (1 + 10 + 45) / 1024.0},
		{0, 5, 2 / 32.0},
		{0, 1, 1},
		{5, 5, 1},
		{0, 0, 1},
		{1, 19, 2 * 21 / 1048576.0},
	} {
		if got := SignTest(tc.wins, tc.losses); !near(got, tc.want, 1e-12) {
			t.Errorf("SignTest(%d, %d) = %.12f, want %.12f", tc.wins, tc.losses, got, tc.want)
		}
	}
}

// pass@k and pass^k from their definitions over small n, by counting subsets.
func TestPassKByCounting(t *testing.T) {
	for n := 1; n <= 6; n++ {
		for c := 0; c <= n; c++ {
			for k := 1; k <= n; k++ {
				// Enumerate every k-subset of n attempts, the first c passing.
				var subsets, any, all int
				for mask := 0; mask < 1<<n; mask++ {
					if popcount(mask) != k {
						continue
					}
					subsets++
					passing := popcount(mask & (1<<c - 1))
					if passing > 0 {
						any++
					}
					if passing == k {
						all++
					}
				}
				if got, want := PassAtK(n, c, k), float64(any)/float64(subsets); !near(got, want, 1e-12) {
					t.Errorf("PassAtK(%d, %d, %d) = %v, want %v", n, c, k, got, want)
				}
				if got, want := PassHatK(n, c, k), float64(all)/float64(subsets); !near(got, want, 1e-12) {
					t.Errorf("PassHatK(%d, %d, %d) = %v, want %v", n, c, k, got, want)
				}
			}
		}
	}
}

func popcount(x int) int {
	n := 0
	for ; x > 0; x &= x - 1 {
		n++
	}
	return n
}

// For 0/1 differences the bootstrap distribution of the mean is known exactly: a resample of n
// values of which a share p are 1 has a Binomial(n, p)/n mean. The interval from 10,000 seeded
// resamples must land on that distribution's 2.5% and 97.5% quantiles (within one step, 1/n),
// and the same seed must give the same interval.
func TestBootstrapMatchesTheExactDistribution(t *testing.T) {
	const n, ones = 40, 12
	xs := make([]float64, n)
	for i := range ones {
		xs[i] = 1
	}
	low, high := BootstrapInterval(xs, 10_000, 7)
	wantLow, wantHigh := binomialQuantile(n, ones/float64(n), 0.025)/n, binomialQuantile(n, ones/float64(n), 0.975)/n
	t.Logf("bootstrap [%.4f, %.4f]; exact quantiles [%.4f, %.4f]", low, high, wantLow, wantHigh)
	if !near(low, wantLow, 1.0/n) || !near(high, wantHigh, 1.0/n) {
		t.Errorf("bootstrap interval [%v, %v], want [%v, %v] within %v", low, high, wantLow, wantHigh, 1.0/n)
	}
	if l2, h2 := BootstrapInterval(xs, 10_000, 7); l2 != low || h2 != high {
		t.Errorf("the same seed gave [%v, %v], then [%v, %v]", low, high, l2, h2)
	}
	// Constant differences have a point interval.
	if l, h := BootstrapInterval([]float64{0.25, 0.25, 0.25}, 1000, 1); l != 0.25 || h != 0.25 {
		t.Errorf("constant differences: [%v, %v], want [0.25, 0.25]", l, h)
	}
}

// binomialQuantile is the smallest k with P(X <= k) >= q for X ~ Binomial(n, p).
func binomialQuantile(n int, p, q float64) float64 {
	cum := 0.0
	for k := 0; k <= n; k++ {
		cum += math.Exp(logChoose(n, k) + float64(k)*math.Log(p) + float64(n-k)*math.Log(1-p))
		if cum >= q {
			return float64(k)
		}
	}
	return float64(n)
}

// Pairing is by task, task version and environment build; what is not paired says why; flips,
// means and the order of tasks are as defined.
func TestComparePairsByTaskVersionAndBuild(t *testing.T) {
	task := func(name string) (uuid.UUID, uuid.UUID) { return uuid.New(), uuid.New() }
	t1, v1 := task("alpha")
	t2, v2 := task("beta")
	t3, v3 := task("gamma")
	t4, v4 := task("delta")
	t5, v5 := task("epsilon")
	v4b := uuid.New()
	at := func(id, v uuid.UUID, name, digest string, rewards ...float64) []Attempt {
		var out []Attempt
		for _, r := range rewards {
			out = append(out, Attempt{TraceID: uuid.New(), TaskID: id, TaskName: name, TaskVersionID: v, Digest: digest, Reward: r})
		}
		return out
	}
	var a, b []Attempt
	a = append(a, at(t1, v1, "alpha", "sha256:1", 0, 0, 1)...) // pass rate 1/3 → B 2/3: gained
	b = append(b, at(t1, v1, "alpha", "sha256:1", 1, 1, 0)...)
	a = append(a, at(t2, v2, "beta", "sha256:1", 1, 1)...) // lost
	b = append(b, at(t2, v2, "beta", "sha256:1", 0, 0)...)
	a = append(a, at(t3, v3, "gamma", "", 0.5, 0.5)...) // a tie (no environment)
	b = append(b, at(t3, v3, "gamma", "", 0.5, 0.5)...)
	a = append(a, at(t4, v4, "delta", "sha256:1", 1)...) // another version in B
	b = append(b, at(t4, v4b, "delta", "sha256:1", 1)...)
	a = append(a, at(t5, v5, "epsilon", "sha256:1", 1)...) // another build in B
	b = append(b, at(t5, v5, "epsilon", "sha256:2", 1)...)

	r, err := Compare(a, b, Options{PassThreshold: 1, Resamples: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tasks) != 3 || r.Tasks[0].TaskName != "alpha" || r.Tasks[1].TaskName != "gamma" || r.Tasks[2].TaskName != "beta" {
		t.Fatalf("paired tasks %+v, want alpha, gamma, beta (by delta)", r.Tasks)
	}
	if r.Tasks[0].Flip != "gained" || r.Tasks[2].Flip != "lost" || r.Tasks[1].Flip != "" {
		t.Errorf("flips %q %q %q, want gained, \"\", lost", r.Tasks[0].Flip, r.Tasks[1].Flip, r.Tasks[2].Flip)
	}
	if !near(r.Tasks[0].Delta, 1.0/3, 1e-12) || r.Tasks[2].Delta != -1 || len(r.Tasks[0].A.TraceIDs) != 3 {
		t.Errorf("deltas %v %v, traces %d", r.Tasks[0].Delta, r.Tasks[2].Delta, len(r.Tasks[0].A.TraceIDs))
	}
	wantA, wantB := (1.0/3+1+0.5)/3, (2.0/3+0+0.5)/3
	if !near(r.MeanA, wantA, 1e-12) || !near(r.MeanB, wantB, 1e-12) || !near(r.MeanDifference, wantB-wantA, 1e-12) {
		t.Errorf("means %v %v %v, want %v %v %v", r.MeanA, r.MeanB, r.MeanDifference, wantA, wantB, wantB-wantA)
	}
	if r.WinsB != 1 || r.WinsA != 1 || r.Ties != 1 || r.PValue != 1 {
		t.Errorf("signs %d/%d/%d p %v, want 1/1/1 and 1", r.WinsB, r.WinsA, r.Ties, r.PValue)
	}
	if r.CILow > r.MeanDifference || r.CIHigh < r.MeanDifference {
		t.Errorf("interval [%v, %v] misses the mean difference %v", r.CILow, r.CIHigh, r.MeanDifference)
	}
	// k up to 2: gamma has two attempts a side. pass@1 of A: (1/3 + 1 + 0)/3.
	if len(r.PassAtK) != 2 || !near(r.PassAtK[0].A, (1.0/3+1)/3, 1e-12) || !near(r.PassHatK[1].A, (0+1+0)/3.0, 1e-12) {
		t.Errorf("pass@k %+v pass^k %+v", r.PassAtK, r.PassHatK)
	}
	reasons := map[string]string{}
	for _, u := range r.Unpaired {
		reasons[u.Run+" "+u.TaskName] = u.Reason
	}
	if reasons["a delta"] != "other_version" || reasons["b delta"] != "other_version" || reasons["a epsilon"] != "other_build" || reasons["b epsilon"] != "other_build" || len(reasons) != 4 {
		t.Errorf("unpaired: %v", reasons)
	}

	// Nothing shared: refused.
	if _, err := Compare(at(t4, v4, "delta", "", 1), at(t5, v5, "epsilon", "", 1), Options{PassThreshold: 1, Resamples: 10}); !errors.Is(err, ErrNoSharedTask) {
		t.Errorf("no shared task: %v", err)
	}
}
