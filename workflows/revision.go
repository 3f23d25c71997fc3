package workflows

// Revision is the revision of the workflows' code that a Rollout or RunList begun now records in
// its input (RolloutInput.Revision, RunListInput.Revision; a continue-as-new carries the current
// one into its next run). A run branches on it for every change made up to it, rather than on
// workflow.GetVersion: the first GetVersion of a change in a run records a marker and upserts the
// TemporalChangeVersion search attribute, two history events and a visibility write for every
// attempt. Runs begun before it (revision 0) still ask GetVersion, in the order they did, and
// replay as they ran.
//
// A run of a revision can be replayed only by code that knows that revision: code from before it
// would find no version markers, take every change for absent and fail the replay. So a worker
// of an older release fails such a run's workflow task (it is retried until a current worker
// takes it), and rolling back past a raise of Revision stalls the runs it began until the release
// returns (see README, "Upgrades").
//
// A later change that must reach runs already in flight still needs workflow.GetVersion; one
// that only new runs take may raise Revision instead, and branch on it.
const Revision = 2
