#include "agent/metrics/metric_family.h"

#include <cstdlib>

#include "common/logging.h"

namespace packrat::metrics {

void MetricFamily::AppendWithHeader(const std::string& samples, std::string* out) const {
  if (samples.empty()) return;
  out->append("# HELP ");
  out->append(name());
  out->push_back(' ');
  AppendEscapedHelp(help(), out);
  out->append("\n# TYPE ");
  out->append(name());
  out->push_back(' ');
  out->append(MetricTypeName(type()));
  out->push_back('\n');
  out->append(samples);
}

void MetricFamily::CheckArity(const LabelValues& values) const {
  if (values.size() == label_names().size()) return;
  PACKRAT_LOG(ERROR) << "metric " << name() << " has " << label_names().size()
                     << " labels but was given " << values.size() << " values";
  std::abort();
}

}  // namespace packrat::metrics
