package jobmgr

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/userenv"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// getUserEnvVar is what sbatch adds to the job's environment for
// --get-user-env, --export=NONE and --export=<list>.
const getUserEnvVar = "SLURM_GET_USER_ENV=1"

// userEnv is slurmd's _get_user_env: the user's login environment when the
// launch asks for it. A non-zero rc fails the launch
// (ESLURMD_SETUP_ENVIRONMENT_ERROR); a nil env with rc 0 runs the job with
// the passed environment alone. It blocks up to userenv.LoadTimeout: the
// caller is a launch goroutine, never the event loop.
func (m *Manager) userEnv(ctx context.Context, msg *slurmproto.BatchJobLaunch) ([]string, uint32) {
	if !slices.Contains(msg.Environment, getUserEnvVar) {
		return nil, 0
	}
	c := m.cfg().Conf
	user := credUser(msg.Cred)
	if user == "" {
		user = slurmproto.CString(msg.UserName)
	}
	log := m.log.With("job_id", msg.JobID, "user", user)
	log.Info("get env for user here")
	version := m.protocol()
	cache := version < slurmproto.Version2605 // 26.05 dropped env_cache and GetEnvTimeout
	env, err := userenv.Load(ctx, userenv.Options{
		User:              user,
		StepdPath:         m.stepdPath,
		NewNamespaces:     version >= slurmproto.Version2411,
		Cache:             cache,
		StateSaveLocation: c.StateSaveLocation,
		GetEnvTimeout:     c.GetEnvTimeout,
		NoEnvCache:        strings.Contains(strings.ToLower(c.SchedulerParameters), "no_env_cache"),
		SuPath:            m.suPath,
	}, log)
	if err == nil {
		return env, 0
	}
	if errors.Is(err, context.Canceled) {
		// The job was terminated meanwhile: the caller sees it revoked
		// and launches nothing; no failure to report.
		log.Info("job killed while its user environment loaded")
		return nil, 0
	}
	requeue := userenv.RequeueOnFailure(cache, c.SchedulerParameters)
	if requeue {
		log.Error("unable to get user's local environment", "error", err)
		return nil, slurmproto.ESlurmdSetupEnvironmentError
	}
	log.Error("unable to get user's local environment, running only with passed environment", "error", err)
	return nil, 0
}
