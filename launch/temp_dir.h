// The launcher's private folder: $TMPDIR/tether-launch.PID.XXXXXX (as
// mktemp, so a test run with its own TMPDIR leaves nothing in /tmp), where
// the servers write their port files, ipc:// sockets live and the workers
// of an elastic job write their progress. Its "owner" file holds the
// launcher's pid and start time, so that the next launcher can remove what
// a killed one (kill -9) left behind.
//
// Ownership: the caller removes the folder it made (the launcher does, when
// it ends). Thread-safety: the functions share no state.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/status.h"

namespace tether {

/// Field 22 of /proc/PID/stat (start time in clock ticks since boot), which
/// tells a process from a later one given the same pid; "" when unknown.
std::string ProcessStartTime(pid_t pid);

/// Removes the folders tether-launch.* under `parent` of launchers that are
/// gone: a folder of this user whose owner file names a pid that no longer
/// runs, or runs as another process (another start time). A live
/// launcher's folder, another user's, and one without an owner file (a
/// launcher still starting, or an older build) are left alone. Logs each
/// folder removed (INFO) or not removable (WARNING).
void RemoveDeadLaunchersTempDirs(const std::string& parent);

/// The folder the launcher's folder goes in: $TMPDIR when set and not
/// empty, else /tmp.
std::string LaunchTempParent();

/// Checked before anything starts (exit 2): LaunchTempParent() is a folder
/// this process may write. Errors: InvalidArgument "TMPDIR=DIR: no such
/// folder; set TMPDIR to a writable folder" (or "is a file, not a folder",
/// "cannot write there (REASON)"; "/tmp (TMPDIR unset): ..." without it).
Status CheckLaunchTempParent();

/// Makes this launcher's folder under $TMPDIR (or /tmp), after removing
/// dead launchers' folders there, with its owner file. Errors: IOError
/// naming the folder (nothing is left behind).
StatusOr<std::string> MakeLaunchTempDir();

}  // namespace tether
