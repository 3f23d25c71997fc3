package activities

import (
	"testing"

	"github.com/proctorhq/proctor/models"
)

// A job's timeout multiplier scales the attempt's run and startup timeouts, the task's or the
// defaults.
func TestTheJobsTimeoutMultiplierScalesTheAttemptsTimes(t *testing.T) {
	run := 90.0
	r := &runFor{trace: &models.Trace{RuntimeConfig: models.RuntimeConfig{Limits: &models.RuntimeLimits{RunTimeoutS: &run}}}, timeoutMultiplier: 2.5}
	if got, startup, _ := r.runtime(); got != 225 || startup != DefaultStartupTimeoutS*2.5 {
		t.Errorf("run %g, startup %g; want 225 and %g", got, startup, DefaultStartupTimeoutS*2.5)
	}
	r.timeoutMultiplier = 1
	if got, startup, _ := r.runtime(); got != 90 || startup != DefaultStartupTimeoutS {
		t.Errorf("unscaled: run %g, startup %g", got, startup)
	}
}
