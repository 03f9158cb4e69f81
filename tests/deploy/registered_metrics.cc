#include "tests/deploy/registered_metrics.h"

#include "service/metrics/service_metrics.h"

namespace attnscope::metrics::testing {

std::map<std::string, std::string> RegisteredSeries() {
  ServiceMetrics metrics;
  std::map<std::string, std::string> series;
  for (const ServiceMetrics::FamilyInfo& family : metrics.families()) {
    if (family.type == "histogram") {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        series[family.name + suffix] = family.name;
      }
    } else {
      series[family.name] = family.name;
    }
  }
  return series;
}

std::map<std::string, std::string> RegisteredFamilyTypes() {
  ServiceMetrics metrics;
  std::map<std::string, std::string> types;
  for (const ServiceMetrics::FamilyInfo& family : metrics.families()) {
    types[family.name] = family.type;
  }
  return types;
}

}  // namespace attnscope::metrics::testing
