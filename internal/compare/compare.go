// Package compare compares two runs task by task: which tasks both ran (the same task, the same
// task version and the same environment build, so that nothing is pooled across versions), how
// each did there, and whether the difference between them is more than chance.
//
// The unit of comparison is the task, not the attempt: attempts of one task are not independent
// of each other (they share its difficulty), tasks are (as far as a benchmark's tasks are). So
// each paired task gives one difference, its mean reward in B minus its mean reward in A, and
//
//   - the mean difference over paired tasks gets a paired bootstrap 95% interval: tasks are
//     resampled with replacement, Resamples times from a seeded generator (the same inputs give
//     the same interval), and the interval is the 2.5th and 97.5th percentiles of the resampled
//     means;
//   - the p-value is the exact two-sided sign test of the per-task differences (ties dropped).
//     Why the sign test: rewards are bounded, often 0 or 1, and per-task means of a few attempts
//     take few values, so differences are far from normal and often tied; the sign test assumes
//     nothing of their distribution, is exact at any number of tasks, and is what a reader can
//     check by hand. It is conservative (a permutation test of the mean difference has more
//     power), which is the right side to err on when deciding that one run is better.
//
// pass@k (at least one of k attempts passes) and pass^k (all k pass) are the unbiased estimators
// over each task's n attempts of which c pass: 1 - C(n-c, k)/C(n, k) and C(c, k)/C(n, k)
// (Chen et al. 2021; Yao et al. 2024), averaged over the paired tasks, for k up to the smallest
// number of attempts any paired task has in that run. A task flips when its pass rate crosses
// one half between the runs.
package compare

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/rollouts"
)

// Attempt is one scored attempt of a run, as the store reads it.
type Attempt = rollouts.ScoredAttempt

// Options are a comparison's settings.
type Options struct {
	// PassThreshold is the reward at or above which an attempt passes (for pass@k, pass^k and
	// flips).
	PassThreshold float64
	// Resamples is the bootstrap's number of resamples; Seed seeds it.
	Resamples int
	Seed      uint64
}

// ErrNoSharedTask is returned when the runs share no task (at the same version and build).
var ErrNoSharedTask = errors.New("the runs share no task at the same task version and environment build")

// Side is how one run did on one task.
type Side struct {
	Attempts int
	Mean     float64
	// PassRate is the share of its attempts that pass.
	PassRate float64
	TraceIDs []uuid.UUID
}

// Task is one paired task.
type Task struct {
	TaskID        uuid.UUID
	TaskName      string
	TaskVersionID uuid.UUID
	Digest        string
	A, B          Side
	// Delta is B's mean reward minus A's.
	Delta float64
	// Flip is "gained" (B passes it, A did not: its pass rate crossed one half upward), "lost",
	// or "".
	Flip string
}

// Unpaired is a task one run ran that the other did not, at the same version and build.
type Unpaired struct {
	TaskID   uuid.UUID
	TaskName string
	// Run is "a" or "b": the run that ran it.
	Run string
	// Reason says why it is not paired: "not_run" (the other run did not run the task at all),
	// "other_version" (it ran another version of it) or "other_build" (the same version on
	// another environment build).
	Reason string
}

// KRate is a pass@k or pass^k of both runs.
type KRate struct {
	K    int
	A, B float64
}

// Report is a comparison of run A with run B.
type Report struct {
	Tasks    []Task // by Delta, largest first, then by name
	Unpaired []Unpaired
	// MeanA and MeanB are the runs' means over the paired tasks of each task's mean reward;
	// MeanDifference is MeanB - MeanA.
	MeanA, MeanB, MeanDifference float64
	CILow, CIHigh                float64
	// WinsB, WinsA and Ties count the paired tasks by the sign of their Delta; PValue is the
	// exact two-sided sign test's.
	WinsA, WinsB, Ties int
	PValue             float64
	PassAtK, PassHatK  []KRate
	Options            Options
}

// tieTolerance is the difference below which two tasks' means are equal: means of the same
// rewards summed in another order differ in their last bits.
const tieTolerance = 1e-12

// maxK bounds the ks reported.
const maxK = 10

type pairKey struct {
	task, version uuid.UUID
	digest        string
}

// Compare compares the scored attempts of run A with those of run B.
func Compare(a, b []Attempt, o Options) (*Report, error) {
	ga, gb := group(a), group(b)
	r := &Report{Options: o}
	for _, k := range sortedKeys(ga) {
		if sb, ok := gb[k]; ok {
			sa := ga[k]
			t := Task{TaskID: k.task, TaskName: sa[0].TaskName, TaskVersionID: k.version, Digest: k.digest,
				A: side(sa, o.PassThreshold), B: side(sb, o.PassThreshold)}
			t.Delta = t.B.Mean - t.A.Mean
			if math.Abs(t.Delta) < tieTolerance {
				t.Delta = 0 // equal rewards summed in another order
			}
			switch {
			case t.A.PassRate < 0.5 && t.B.PassRate >= 0.5:
				t.Flip = "gained"
			case t.A.PassRate >= 0.5 && t.B.PassRate < 0.5:
				t.Flip = "lost"
			}
			r.Tasks = append(r.Tasks, t)
		}
	}
	r.Unpaired = append(unpaired(ga, gb, "a"), unpaired(gb, ga, "b")...)
	if len(r.Tasks) == 0 {
		return r, ErrNoSharedTask
	}
	deltas := make([]float64, len(r.Tasks))
	for i, t := range r.Tasks {
		deltas[i] = t.Delta
		r.MeanA += t.A.Mean / float64(len(r.Tasks))
		r.MeanB += t.B.Mean / float64(len(r.Tasks))
		switch {
		case t.Delta > 0:
			r.WinsB++
		case t.Delta < 0:
			r.WinsA++
		default:
			r.Ties++
		}
	}
	r.MeanDifference = mean(deltas)
	r.CILow, r.CIHigh = BootstrapInterval(deltas, o.Resamples, o.Seed)
	r.PValue = SignTest(r.WinsA, r.WinsB)
	r.PassAtK, r.PassHatK = passK(ga, gb, r.Tasks, o.PassThreshold)
	slices.SortStableFunc(r.Tasks, func(x, y Task) int {
		return cmp.Or(cmp.Compare(y.Delta, x.Delta), cmp.Compare(x.TaskName, y.TaskName))
	})
	return r, nil
}

func group(as []Attempt) map[pairKey][]Attempt {
	g := map[pairKey][]Attempt{}
	for _, a := range as {
		k := pairKey{a.TaskID, a.TaskVersionID, a.Digest}
		g[k] = append(g[k], a)
	}
	return g
}

func sortedKeys(g map[pairKey][]Attempt) []pairKey {
	keys := make([]pairKey, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y pairKey) int {
		return cmp.Or(cmp.Compare(g[x][0].TaskName, g[y][0].TaskName), cmp.Compare(x.task.String(), y.task.String()),
			cmp.Compare(x.version.String(), y.version.String()), cmp.Compare(x.digest, y.digest))
	})
	return keys
}

func side(as []Attempt, threshold float64) Side {
	s := Side{Attempts: len(as)}
	pass := 0
	for _, a := range as {
		s.Mean += a.Reward
		if a.Reward >= threshold {
			pass++
		}
		s.TraceIDs = append(s.TraceIDs, a.TraceID)
	}
	s.Mean /= float64(len(as))
	s.PassRate = float64(pass) / float64(len(as))
	return s
}

// unpaired lists what g ran that other did not, with why.
func unpaired(g, other map[pairKey][]Attempt, run string) []Unpaired {
	tasks := map[uuid.UUID][]pairKey{}
	for k := range other {
		tasks[k.task] = append(tasks[k.task], k)
	}
	var out []Unpaired
	for _, k := range sortedKeys(g) {
		if _, ok := other[k]; ok {
			continue
		}
		reason := "not_run"
		for _, ok := range tasks[k.task] {
			if ok.version != k.version {
				reason = "other_version"
			} else {
				reason = "other_build"
				break
			}
		}
		out = append(out, Unpaired{TaskID: k.task, TaskName: g[k][0].TaskName, Run: run, Reason: reason})
	}
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// BootstrapInterval is the percentile bootstrap 95% interval of the mean of xs: resamples
// resamples with replacement drawn by a PCG generator seeded with seed.
func BootstrapInterval(xs []float64, resamples int, seed uint64) (low, high float64) {
	if len(xs) == 0 || resamples <= 0 {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	means := make([]float64, resamples)
	for i := range means {
		s := 0.0
		for range xs {
			s += xs[rng.IntN(len(xs))]
		}
		means[i] = s / float64(len(xs))
	}
	sort.Float64s(means)
	return percentile(means, 0.025), percentile(means, 0.975)
}

// percentile is the p-th quantile of sorted xs, interpolated linearly between order statistics.
func percentile(sorted []float64, p float64) float64 {
	pos := p * float64(len(sorted)-1)
	i := int(math.Floor(pos))
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (pos-float64(i))*(sorted[i+1]-sorted[i])
}

// SignTest is the exact two-sided sign test's p-value for wins of one side against losses:
// twice the probability of a split at least as uneven under Binomial(wins+losses, 1/2), at
// most 1; 1 with no untied pair.
func SignTest(wins, losses int) float64 {
	n := wins + losses
	if n == 0 {
		return 1
	}
	k := min(wins, losses)
	tail := 0.0
	for i := 0; i <= k; i++ {
		tail += math.Exp(logChoose(n, i) - float64(n)*math.Ln2)
	}
	return math.Min(1, 2*tail)
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// PassAtK is the unbiased estimate that at least one of k attempts passes, of n of which c
// passed.
func PassAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	return 1 - math.Exp(logChoose(n-c, k)-logChoose(n, k))
}

// PassHatK is the unbiased estimate that all of k attempts pass, of n of which c passed.
func PassHatK(n, c, k int) float64 {
	if c < k {
		return 0
	}
	return math.Exp(logChoose(c, k) - logChoose(n, k))
}

// passK averages pass@k and pass^k over the paired tasks, for k from 1 to the fewest attempts
// a paired task has in either run (at most maxK).
func passK(ga, gb map[pairKey][]Attempt, tasks []Task, threshold float64) (at, hat []KRate) {
	kmax := maxK
	for _, t := range tasks {
		kmax = min(kmax, t.A.Attempts, t.B.Attempts)
	}
	for k := 1; k <= kmax; k++ {
		var ra, rb, ha, hb float64
		for _, t := range tasks {
			key := pairKey{t.TaskID, t.TaskVersionID, t.Digest}
			na, ca := counts(ga[key], threshold)
			nb, cb := counts(gb[key], threshold)
			ra += PassAtK(na, ca, k)
			rb += PassAtK(nb, cb, k)
			ha += PassHatK(na, ca, k)
			hb += PassHatK(nb, cb, k)
		}
		n := float64(len(tasks))
		at = append(at, KRate{K: k, A: ra / n, B: rb / n})
		hat = append(hat, KRate{K: k, A: ha / n, B: hb / n})
	}
	return at, hat
}

func counts(as []Attempt, threshold float64) (n, c int) {
	for _, a := range as {
		if a.Reward >= threshold {
			c++
		}
	}
	return len(as), c
}
