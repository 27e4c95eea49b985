// Package envarray is Slurm's C environment array: "NAME=value" entries in
// order with the semantics of src/common/env.c's env_array_* helpers
// (overwrite in place, append if absent, setenvf's size bound, merge and
// copy). The step manager builds job and task environments with it, and
// userenv the login environment it reads from su.
package envarray
