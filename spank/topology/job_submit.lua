--[[
job_submit.lua for slurmctld (JobSubmitPlugins=lua): the controller half of
the tiee_topology SPANK plugin.

srun/sbatch/salloc --topology=zone|block|switch puts TIEE_TOPOLOGY=<value>
into the job's spank_job_env (spank_job_control_setenv). Here it becomes a
switch request for topology/tree, whose leaf switches are the zones of the
topology.conf that slurmd-go's topology controller writes:

  zone    req_switch=1, wait4switch=ZONE_WAIT: all nodes under one leaf
          switch (one zone); the job waits for such a set.
  block   the same as zone with topology/tree (a block is one leaf there);
          22.05 has no topology/block, and under 23.11+'s topology/block
          req_switch does not select a block (use --segment there).
  switch  req_switch=1, wait4switch=SWITCH_WAIT: one leaf switch if one is
          free soon, else the job runs across switches (best effort; the
          step then only logs that it spans zones).

wait4switch is in seconds (sbatch --switches=<count>@<time> converts its
time to seconds). slurmctld caps it at SchedulerParameters=max_switch_wait,
300 seconds by default (job_mgr.c _max_switch_wait), so ZONE_WAIT only
holds where max_switch_wait is raised to match; after the wait the job is
scheduled across switches and the step-side check (tiee_topology's
user_init) fails it, which is the guarantee. A job that already asks for
--switches is left as the user asked.

Lua 5.1: Debian's job_submit_lua.so links liblua5.1.
]]

-- Seconds a zone (or block) job waits for one free leaf switch: 7 days.
local ZONE_WAIT = 7 * 24 * 3600
-- Seconds a switch (best effort) job waits before running across switches.
local SWITCH_WAIT = 300

local WAITS = { zone = ZONE_WAIT, block = ZONE_WAIT, switch = SWITCH_WAIT }

-- topology_of returns the TIEE_TOPOLOGY value of a spank_job_env, or nil.
-- The table is indexed from 0 (job_submit_lua.c pushes index i from 0), so
-- pairs, not ipairs; a SPANK_ prefix is accepted too (prolog/epilog
-- spelling).
local function topology_of(env)
	if type(env) ~= "table" then
		return nil
	end
	local found = nil
	for _, kv in pairs(env) do
		if type(kv) == "string" then
			local v = kv:match("^TIEE_TOPOLOGY=(.*)$") or kv:match("^SPANK_TIEE_TOPOLOGY=(.*)$")
			if v then
				found = v
			end
		end
	end
	return found
end

local function unset(n)
	return n == nil or n == slurm.NO_VAL or n == 0
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local mode = topology_of(job_desc.spank_job_env)
	if mode == nil then
		return slurm.SUCCESS
	end
	local wait = WAITS[mode]
	if wait == nil then
		slurm.log_user("--topology=%s: want zone, block or switch", mode)
		return slurm.ERROR
	end
	if not unset(job_desc.req_switch) then
		slurm.log_info("tiee-topology: uid %d: --topology=%s with --switches=%d given: left as asked",
			submit_uid, mode, job_desc.req_switch)
		return slurm.SUCCESS
	end
	job_desc.req_switch = 1
	job_desc.wait4switch = wait
	slurm.log_debug("tiee-topology: uid %d: --topology=%s: req_switch=1 wait4switch=%d s",
		submit_uid, mode, wait)
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end

slurm.log_info("tiee-topology job_submit.lua loaded")
return slurm.SUCCESS
