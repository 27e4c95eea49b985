// Package bcast serves REQUEST_FILE_BCAST, the blocks of sbcast and
// srun --bcast (stock: slurmd req.c _rpc_file_bcast and its helpers, 22.05,
// 24.11 and 26.05). It owns the node's open transfers and the library
// directories of --send-libs:
//
//	block 1 ─▶ check credential ─▶ open as the user (O_EXCL, or O_TRUNC with --force)
//	   │                              │ (FILE_BCAST_EXE: mkdir <file>_libs as the user)
//	   ▼                              ▼
//	block n ─▶ find the transfer ─▶ decompress (lz4) ─▶ write
//	                                                     │ last block
//	                                                     ▼
//	                    fchmod mode&0777, fchown, futimens (--preserve), close
//
// Every path is opened or created with the user's file-system identity
// (proc.DoAs); what follows works on the descriptor only. Transfers idle
// for StallTimeout, and those of a job that ends, are dropped.
package bcast
