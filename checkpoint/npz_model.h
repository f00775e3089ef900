// Reading a NumPy .npz model file (the layout WriteModelFile writes:
// checkpoint/model_file.h) back into a ModelFileContents, as the safetensors
// reader does: the archive is opened with libzip from the file's bytes, each
// member's NPY header is parsed strictly, and the tensors then go through
// the same checks of the model as a safetensors file's (model_tensors.h).
//
// Every input is untrusted. The sizes an archive states (members' sizes,
// NPY shapes) are checked against the file's real size, deflate's largest
// ratio and the process's memory before anything is allocated for them; a
// member that inflates to more or fewer bytes than it claims, fails its
// CRC, or holds more or fewer bytes than its NPY shape is refused, naming
// the file and the member.
//
// Ownership: plain values. Thread-safety: the functions share no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/model_file.h"
#include "core/status.h"

namespace tether {

/// An NPY file's header: its dtype as NumPy names it ("<f4", "|u1", ...),
/// its shape (C order), and where its data starts.
struct NpyHeader {
  std::string descr;
  std::vector<uint64_t> shape;
  uint64_t data_offset = 0;  // bytes from the start of the NPY file
};

/// The header of the NPY file `npy` (its bytes, at least the header's),
/// format version 1.0 (16-bit header length) or 2.0 (32-bit): the magic
/// "\x93NUMPY", the version, the header length, then a Python dict literal
/// of exactly the keys 'descr' (a string), 'fortran_order' (False) and
/// 'shape' (a tuple of non-negative integers, "(n,)" for one), in any order,
/// padded with spaces and ended by '\n', as numpy.save writes it. Nothing
/// else is taken (no other keys or values, no escapes in strings, no
/// Fortran order). Errors: DataLoss "NPY ...: ..." saying what is wrong and
/// where (callers put the file and member before it).
StatusOr<NpyHeader> ParseNpyHeader(std::string_view npy);

/// ReadModelFile's reading of an npz (`file`: the whole file's bytes; `path`
/// names it in errors). Members are stored or deflated (numpy.savez,
/// numpy.savez_compressed), each "NAME.npy" an NPY 1.0 or 2.0 file of dtype
/// '<f4', '<u8', '<i8' or '|u1' in C order; "__metadata__.npy" is a '|u1'
/// vector holding a JSON object of strings. Members no table names are
/// ignored, as are a safetensors file's extra tensors.
/// Errors: DataLoss "PATH: ..." for an archive libzip cannot open, and
/// "PATH: member 'NAME': ..." for a member that is not an .npy, appears
/// twice, is encrypted or compressed otherwise than stored or deflated,
/// claims more bytes than its compressed size can hold, inflates to other
/// bytes than it claims, or whose NPY header, dtype or size is wrong;
/// InvalidArgument "PATH: ..." when "__metadata__.npy" is missing and for
/// what ModelOfTensors refuses; ResourceExhausted "PATH: ..." when its
/// members, with the file, are more than the process may use.
StatusOr<ModelFileContents> ParseNpzModel(const std::string& path, const std::string& file);

}  // namespace tether
