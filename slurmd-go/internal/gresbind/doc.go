// Package gresbind owns what a step manager does with the GRES of a job
// credential, as stock slurmstepd does it: the environment of a batch step,
// an srun step and each of its tasks (SLURM_JOB_GPUS, SLURM_STEP_GPUS,
// SLURM_GPUS_ON_NODE, CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
// ZE_AFFINITY_MASK, GPU_DEVICE_ORDINAL, SLURM_SHARDS_ON_NODE), a task's
// devices under --gpus-per-task and --gpu-bind, and the device files a job,
// step or task may open (task/cgroup's ConstrainDevices). It is pure: the
// node's devices come in (pkg/gres), the decoded credential records come in
// (pkg/slurmproto), and the cgroup that enforces the answer lives in
// internal/cgroup.
//
// Sources read for each release: 22.05 src/common/gres.c
// (gres_g_{job,step,task}_set_env, _get_usable_gres, gres_g_get_devices),
// src/plugins/gres/common/gres_common.c (common_gres_set_env,
// gres_common_gpu_set_env), src/plugins/gres/{gpu,shard,mps}; 24.11 and
// 26.05 the same under src/interfaces/gres.c.
//
// Not modelled: CPU affinity of devices (gres.conf Cores=): --gpu-bind=closest
// and the affinity preference of per_task treat every allocated device as
// close, which is what stock does for records without Cores=;
// --gres-flags=allow-task-sharing; NIC binding.
package gresbind
