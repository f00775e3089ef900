#include "serving/input_reading.h"

namespace tether {
namespace {

std::string FormatName(FileFormat f) { return f == LIBSVM ? "libsvm" : f == XMC ? "xmc" : FileFormat_Name(f); }

// The model's index base: data.index_base, or 0 for ARFF (0-based by
// definition, the field left unset); -1 when it records none.
int ModelIndexBase(const DataConfig& d) {
  if (d.index_base() == 0 || d.index_base() == 1) return d.index_base();
  return d.format() == ARFF ? 0 : -1;
}

}  // namespace

StatusOr<InputReading> ResolveInputReading(const JobConfig& model, const std::string& model_path,
                                           const std::string& format_flag, int index_base_flag) {
  const DataConfig& d = model.data();
  InputReading r;
  const bool model_text = d.format() == XMC || d.format() == LIBSVM;
  if (format_flag.empty()) {
    if (!model_text)
      return Status::InvalidArgument("--format is required: " + model_path + " was trained on " +
                                     FormatName(d.format()) +
                                     " data (data.format), and tether-predict reads xmc or libsvm text");
    r.format = d.format();
    r.source = "format " + FormatName(r.format) + " (the model's)";
  } else {
    r.format = format_flag == "libsvm" ? LIBSVM : XMC;
    r.source = "format " + format_flag;
    if (model_text && r.format != d.format())
      r.warnings.push_back("--format=" + format_flag + " contradicts " + model_path + "'s data.format " +
                           FormatName(d.format()) + " (the data it was trained on): the input is read as " +
                           format_flag + "; drop --format to read it as the model's data was read");
  }
  const int model_base = ModelIndexBase(d);
  if (index_base_flag < 0) {
    if (model_base < 0)
      return Status::InvalidArgument("--index_base is required: " + model_path +
                                     " records no index base (data.index_base " + std::to_string(d.index_base()) +
                                     ")");
    r.index_base = model_base;
    r.source += ", index base " + std::to_string(r.index_base) + " (the model's)";
  } else {
    r.index_base = index_base_flag;
    r.source += ", index base " + std::to_string(r.index_base);
    if (model_base >= 0 && index_base_flag != model_base)
      r.warnings.push_back(
          "--index_base=" + std::to_string(index_base_flag) + " contradicts " + model_path + "'s data.index_base " +
          std::to_string(model_base) + " (the data it was trained on): the input's feature id i is scored as the "
          "model's feature " + (index_base_flag > model_base ? "i - 1" : "i + 1") + std::string(" ") +
          "(and XMC label ids are written " + std::to_string(index_base_flag) +
          "-based); right only for an input numbered from " + std::to_string(index_base_flag) +
          ": drop --index_base to read it as the model's data was read");
  }
  return r;
}

}  // namespace tether
