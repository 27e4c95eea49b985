// Package gres owns a node's generic resources as the node daemon knows them:
// the records that gres.conf and GPU autodetection yield (Slurm's
// gres_slurmd_conf_t), merged as stock slurmd merges them, and the devices
// those records name. It parses no wire format: the registration and
// credential layouts live in pkg/slurmproto, the GPU library in internal/gpu.
//
//	Load(ctx, Options{ConfPath, NodeName, CPUs, Version, GresTypes, NodeGres, Detector})
//	  GresTypes order (gres_init: mps/shard after gpu)
//	  node Gres= of slurm.conf (gres_init_node_config)
//	  gres.conf lines of this node (_parse_gres_config: keys, Flags, Count
//	    suffixes, File existence, NodeName= hostlists, Include)
//	  merged with Gres= (_merge_config: gres.conf works within Gres=)
//	  gpu: AutoDetect= through Detector (_merge_system_gres_conf)
//	  mps, shard: laid over the GPUs, one record per device
//	  file-less GPUs dropped
//	→ *Node{Records, AutoDetect, Messages}   or a *ConfError (stock's fatal)
//
//	PrintLines(node, err)  what `slurmd -G` prints (LogLine per record)
//	Devices(records, "gpu", stat)  File= → ordered devices: credential bit,
//	                               device number, major/minor
//	Flags.Bits(version)    config_flags as a release packs them
//
// Every step follows the stock code of the release in Options.Version
// (22.05, 24.11, 26.05); testdata/stock holds what each release's
// `slurmd -G` printed for the test cases (testdata/stock/capture.sh).
// Detector is the consumer-side interface internal/gpu implements;
// NullDetector finds nothing.
package gres
