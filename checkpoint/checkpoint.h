// Checkpoint files: what a consistent cut of a job looks like on disk, and
// how it is written, found, verified and pruned; the manifest and the
// workers' state files. Shard files have their own header
// (checkpoint/shard_file.h; a server's tables go through
// server/table_checkpoint.h), as do data on demand's chunks.state
// (checkpoint/chunk_state.h) and the weights read for export
// (checkpoint/trained_model.h). Both roles use this library; it uses
// neither. The protocol that
// takes the cut (every worker at clock c, every shard then writes) lives in
// server/server.cc, worker/client/client.cc and worker/trainer.cc; docs/OPERATIONS.md
// tells users what a checkpoint holds.
//
// Layout: DIR/ckpt-<clock, 12 digits>[-final]/ holds
//   shard-<s>.tables  per server shard: its rows and optimizer state
//                     (checkpoint/shard_file.h);
//   worker-<r>.state  per worker that took part: its place in the data
//                     (WorkerState, binary protobuf);
//   worker-<r>.residuals  per worker with 16-bit pushes and error feedback:
//                     its residuals (checkpoint/residual_file.h), listed in
//                     its state file rather than in the MANIFEST;
//   MANIFEST          written last (CheckpointManifest, text format, then a
//                     "# xxh3 <16 hex digits>" line over the bytes before it).
// Every file goes to a temporary name, is fsynced, then renamed (AtomicFile),
// so a file either exists whole or not at all, and a directory without a
// MANIFEST is not a checkpoint. Each file's size and XXH3-64 (zlib) are in the
// manifest; a file that does not match is refused, naming the file and both
// checksums.
//
// Across hosts, DIR is a shared file system (NFS and the like) mounted at one
// path everywhere; or each host writes its own files under the same local
// path and they are gathered into one directory (rsync) before a resume or
// an export; the manifest lists every file, so a partial gather is refused.
//
// Thread-safety: functions are re-entrant; different checkpoints may be
// written from different threads (one-process jobs: one per shard).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/tables.pb.h"

namespace tether {

/// Bumped when the layout of a checkpoint changes incompatibly.
inline constexpr uint32_t kCheckpointFormatVersion = 1;

/// "ckpt-000000000120" or "ckpt-000000000120-final".
std::string CheckpointDirName(int64_t clock, bool final);
/// Checked at start, before any training: checkpoints can be written under
/// `dir` (checkpoint.dir): it is a directory this process may write
/// (access W_OK: permissions, a read-only file system), or it does not exist
/// and the nearest part of its path that does is such a directory.
/// Errors: InvalidArgument naming `dir` and why (a file on the way, not
/// writable).
Status CheckCheckpointDir(const std::string& dir);

/// What a process checks at start, before any training (exit 2 on error):
/// CheckCheckpointDir(dir) when `dir` (checkpoint.dir) is set, and that
/// `resume_from` (--resume_from), when set, names a complete checkpoint or a
/// directory holding one (ResolveCheckpoint). Errors: InvalidArgument naming
/// the flag, the path and why.
Status CheckCheckpointPaths(const std::string& dir, const std::string& resume_from);

/// Where a new checkpoint of `clock` goes under `parent`: parent/
/// CheckpointDirName(clock, final), or, when that already holds a complete
/// checkpoint (a MANIFEST: a resumed job reaching the clock of one written
/// before), the first of "...-r1", "...-r2", ... that does not. A complete
/// checkpoint is never written over in place. ResolveCheckpoint and
/// PruneCheckpoints order "-rN" after the plain name of the same clock.
std::string FreeCheckpointDir(const std::string& parent, int64_t clock, bool final);

/// `path` made absolute against this process's working directory (no
/// trailing slash); "" stays "". A worker sends checkpoint paths to the
/// servers, whose working directories may differ.
std::string AbsoluteCheckpointPath(const std::string& path);

std::string ShardFileName(int shard);   // "shard-3.tables"
std::string WorkerFileName(int rank);   // "worker-2.state"
// A file's path in a checkpoint directory: `dir` + "/" + `name` (no second
// slash when `dir` ends in one; `name` alone when `dir` is empty).
std::string CheckpointJoinPath(const std::string& dir, const std::string& name);
// A checksum as the manifest's messages print it: 16 lower-case hex digits.
std::string ChecksumHex(uint64_t v);
inline constexpr char kManifestName[] = "MANIFEST";

/// Writes `bytes` whole to ckpt_dir/`name` atomically (the folder is made
/// first); when `written` is not null it gets the file's manifest entry
/// (name, size, XXH3-64). For the small files a checkpoint holds beside the
/// shard and worker files. Errors: IOError naming the path.
Status WriteListedFile(FileSystem* fs, const std::string& ckpt_dir, const std::string& name,
                       const std::string& bytes, CheckpointFile* written);
/// Who lists a checkpoint file with its size and checksum, as errors say.
enum class FileLister { kManifest, kWorkerState };
/// Reads the file `expected` names in `ckpt_dir` whole, its size checked
/// before it is read and its XXH3-64 after, both against `expected` (its
/// entry in the list `lister`). Errors: NotFound when the file is missing,
/// DataLoss naming both sizes or both checksums, IOError; each names the
/// path.
StatusOr<std::string> ReadListedFile(const std::string& ckpt_dir, const CheckpointFile& expected, FileLister lister);

/// Writes ckpt_dir/worker-<state.rank()>.state. Errors: IOError.
Status WriteWorkerState(FileSystem* fs, const std::string& ckpt_dir, const WorkerState& state,
                        CheckpointFile* written);

/// Copies `file` from checkpoint directory from_dir into to_dir (a worker
/// that left: its state at its last checkpoint), checking its size and
/// checksum. Errors: as VerifyCheckpointFiles, IOError.
Status CopyCheckpointFile(FileSystem* fs, const std::string& from_dir, const std::string& to_dir,
                          const CheckpointFile& file);

/// Copies a worker's state file `state_file` from from_dir into to_dir (a
/// worker that left), with the residual file its state names, if any
/// (checkpoint/residual_file.h), each checked against its record. Errors:
/// as CopyCheckpointFile; DataLoss naming a state file that does not parse.
Status CopyWorkerFiles(FileSystem* fs, const std::string& from_dir, const std::string& to_dir,
                       const CheckpointFile& state_file);

/// The rank that writes a periodic checkpoint's MANIFEST, from shard 0's
/// CHECKPOINT_REPLY entries (one per rank): the lowest rank that took part
/// in the cut (kind TRAINING). Worker 0 while it trains; once it has
/// finished its share (or left) the next one, so such a cut is still
/// completed. −1 when no entry is TRAINING (the end-of-job checkpoint: its
/// one taker writes the manifest).
int ManifestWriterRank(const std::vector<CheckpointWorker>& workers);

/// Writes ckpt_dir/MANIFEST (the last file of a checkpoint). Errors: IOError.
Status WriteManifest(FileSystem* fs, const std::string& ckpt_dir, const CheckpointManifest& manifest);

/// Reads and checks ckpt_dir/MANIFEST (its trailing checksum, its format
/// version). Errors: NotFound (no MANIFEST: not a checkpoint), DataLoss
/// naming the file (a bad checksum or text, or a file above
/// kMaxManifestBytes, which is never read whole), FailedPrecondition
/// (another format version).
StatusOr<CheckpointManifest> ReadManifest(const std::string& ckpt_dir);
inline constexpr size_t kMaxManifestBytes = 16u << 20;

/// ReadManifest's checks on a manifest's bytes; `path` names it in errors.
/// A pure function (tests/fuzz/manifest_fuzz.cc runs it on any bytes).
StatusOr<CheckpointManifest> ParseManifest(const std::string& path, const std::string& text);

/// The sizes a reader allocates from before it reads a file: no dense table
/// or file claims more than 2^40 weights or 2^50 bytes, the dense tables'
/// weights fit in the files listed (each is in some shard file), and there
/// are between 1 and as many servers as files. Errors: DataLoss naming
/// `path` and the size.
Status CheckManifestSizes(const std::string& path, const CheckpointManifest& m);

/// `path` itself when it holds a MANIFEST, else the latest complete
/// checkpoint under it (the highest clock; a final one after a periodic one
/// of the same clock). Errors: NotFound naming `path` when it does not
/// exist or holds no complete checkpoint; InvalidArgument when it is a file
/// (say a shard file or the MANIFEST), "PATH: is a file, not a checkpoint
/// directory; give the checkpoint directory that holds it: DIR" (or, when
/// its directory is no checkpoint, whether that directory holds any).
StatusOr<std::string> ResolveCheckpoint(const std::string& path);

/// Verifies every file the manifest lists (size and XXH3-64). Errors:
/// DataLoss naming the file and both values, NotFound for a missing file.
Status VerifyCheckpointFiles(const std::string& ckpt_dir, const CheckpointManifest& manifest);

/// What a resume from checkpoint `ckpt_dir` that failed on one of its
/// files tells the user: "checkpoint DIR is damaged or incomplete; resume
/// from an older one with --resume_from=FOLDER/ckpt-B (older complete ones
/// in FOLDER, newest first: ckpt-B, ckpt-A)", or that FOLDER holds no older
/// complete checkpoint. FOLDER is `ckpt_dir`'s parent; the list is cut
/// after 200 characters.
std::string OlderCheckpointsAdvice(const std::string& ckpt_dir);
/// `st` with "; " and OlderCheckpointsAdvice(ckpt_dir) after its message,
/// its code kept (OK, or a message that has the advice, as it is).
Status WithOlderCheckpointsAdvice(const Status& st, const std::string& ckpt_dir);

/// The checkpoint a resume from `resume_from` would read, verified whole
/// before any process starts (tether-launch): resolved (ResolveCheckpoint),
/// its MANIFEST read and every file it lists checked (size and XXH3-64,
/// VerifyCheckpointFiles). OK for an empty `resume_from`. Errors: those of
/// ResolveCheckpoint; those of ReadManifest and VerifyCheckpointFiles
/// (naming the file) followed by OlderCheckpointsAdvice. Cost: reads every
/// file of the checkpoint once.
Status VerifyResumeCheckpoint(const std::string& resume_from);

/// Reads worker `rank`'s state file (checked against the manifest).
/// Errors: as VerifyCheckpointFiles; NotFound when the rank has no state
/// (it had finished or left).
StatusOr<WorkerState> ReadWorkerState(const std::string& ckpt_dir, const CheckpointManifest& manifest, int rank);

/// Compares the fields of a table that a resume may not change (id, name,
/// kind, dim, size, num_keys, key_base, optimizer type, whether SGD has
/// momentum): "" when they agree, else a message naming the table and the
/// field with both values. Learning rates, l2, ε, β, the consistency and the
/// initializer of rows never trained may change.
/// `checkpoint_name`, `job_name` and `why` word the message for other
/// pairs (a model file's tables against its own config).
std::string DiffTableShapes(const google::protobuf::RepeatedPtrField<TableSpec>& checkpoint,
                            const google::protobuf::RepeatedPtrField<TableSpec>& job,
                            const std::string& checkpoint_name = "the checkpoint",
                            const std::string& job_name = "the job",
                            const std::string& why = " (a table's shape and optimizer type cannot change on resume)");

/// Compares how the job reads its rows into the model's input
/// (data.feature_scale, feature_offset, tf_idf, normalize_rows): "" when the
/// checkpoint's config and the job's agree, else a message naming the first
/// field that differs with both values. A resume trains on rows read the
/// way the checkpoint's model was trained on them.
std::string DiffInputTransform(const DataConfig& checkpoint, const DataConfig& job);

/// Compares which rows the job sets aside as validation rows: "" when the
/// checkpoint's config and the job's agree, else a message naming the first
/// field that differs with both values: data.validation_split set on one
/// side only, train.validation_fraction, or train.validation_seed (with a
/// fraction). A different validation split file on both sides is left to
/// the data stamps. A resume trains on the rows the checkpoint's run did.
std::string DiffValidationRows(const JobConfig& checkpoint, const JobConfig& job);

/// Deletes all but the `keep_last` newest complete checkpoints under
/// `parent`, and incomplete ones older than the newest complete one; only
/// ever after a newer checkpoint is complete. Errors: IOError.
Status PruneCheckpoints(FileSystem* fs, const std::string& parent, int keep_last);

}  // namespace tether
